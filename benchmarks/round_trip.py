"""The ``load_tools`` round trip, end to end, without a model: what the client sends, what each
upstream round gets and answers, and what the client gets back.

The upstream is the repository's scripted OpenAI-compatible server
(:mod:`benchmarks.support.upstream`), which answers as a model that needs a tool the proxy
did not forward would: its first answer calls ``load_tools``, its second the loaded tool.
The proxy is the real app (:func:`proxy.app.create_app`, default settings) under uvicorn;
both listen on free loopback ports for the length of the run. The client sends one chat
request with the GitHub MCP server's first 100 tools (above 100 the proxy offers
``search_tools`` instead); the request names ``list_pull_requests``, so that tool alone is
forwarded, and the scripted model then loads ``merge_pull_request``. The run fails (exit
1) when the trip is not as described: the loaded tool forwarded from the start, a round
missing, or the meta-call visible to the client.

Usage, from the repository root (a few seconds on 2 cores, most of it indexing the 100
tools; no network beyond loopback)::

    python -m benchmarks.round_trip          # the trip, step by step
    python -m benchmarks.round_trip --json   # the same as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Chat, Upstream
from config.settings import Settings
from proxy.app import create_app

CATALOG_TOOLS = 100
USER_MESSAGE = "List the open pull requests in octo/widgets"
LOADED_TOOL = "merge_pull_request"
CALL_ARGUMENTS = {"owner": "octo", "repo": "widgets", "pullNumber": 42}
META_TOOLS = ("load_tools", "search_tools")
#: What the scripted model answers, one tool call a round: it loads the tool, then calls it.
ANSWERS = [
    {"name": "load_tools", "arguments": json.dumps({"names": [LOADED_TOOL]})},
    {"name": LOADED_TOOL, "arguments": json.dumps(CALL_ARGUMENTS)},
]


@dataclass
class Round:
    """One upstream round: the tools it was sent (client tools, then the meta-tools), the
    messages appended since the client's, and the tool calls it answered with."""

    tools: list[str]
    meta_tools: list[str]
    appended: list[dict[str, Any]]
    answered: list[dict[str, str]]


@dataclass
class Trip:
    offered: int
    rounds: list[Round]
    status: int
    pruning_header: str | None
    client_tool_calls: list[dict[str, str]]
    finish_reason: str | None
    prompt_tokens: int


def catalog() -> list[dict[str, Any]]:
    tools = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
    return tools[:CATALOG_TOOLS]


def run_trip() -> Trip:
    """Serve the scripted upstream and the proxy, send the request, and return the trip."""
    upstream = Upstream()
    upstream.script(*(Chat(content=None, tool_calls=[{"id": f"call_{number}", **answer}])
                      for number, answer in enumerate(ANSWERS)))
    tools = catalog()
    request = {"model": "demo", "messages": [{"role": "user", "content": USER_MESSAGE}],
               "tools": tools}
    with serve_in_thread(upstream.app) as upstream_origin:
        # Wait for the catalogue's index (as `toolprune serve --warm` would have built it):
        # the first request is then ranked as every later one is.
        settings = Settings(upstream_url=upstream_origin + "/v1", index_timeout_s=300.0)
        with serve_in_thread(create_app(settings)) as proxy_origin:
            response = httpx.post(proxy_origin + "/v1/chat/completions", json=request,
                                  timeout=300.0)
    sent = [r.json() for r in upstream.requests if r.path.endswith("/chat/completions")]
    rounds = [
        Round(
            tools=[t["function"]["name"] for t in body["tools"]
                   if t["function"]["name"] not in META_TOOLS],
            meta_tools=[t["function"]["name"] for t in body["tools"]
                        if t["function"]["name"] in META_TOOLS],
            appended=body["messages"][len(request["messages"]):],
            answered=[answer],
        )
        for body, answer in zip(sent, ANSWERS, strict=False)
    ]
    answer = response.json()
    choice = answer["choices"][0] if response.status_code == 200 else {}
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in (choice.get("message", {}).get("tool_calls") or [])]
    return Trip(
        offered=len(tools), rounds=rounds, status=response.status_code,
        pruning_header=response.headers.get("x-tool-pruning-tools"),
        client_tool_calls=calls, finish_reason=choice.get("finish_reason"),
        prompt_tokens=answer.get("usage", {}).get("prompt_tokens", 0),
    )


def problems(trip: Trip) -> list[str]:
    """What makes ``trip`` other than the round trip described above (empty: none)."""
    found = []
    if trip.status != 200:
        found.append(f"the client got HTTP {trip.status}")
    if len(trip.rounds) != 2:
        found.append(f"{len(trip.rounds)} upstream rounds, not 2")
        return found
    first, second = trip.rounds
    if LOADED_TOOL in first.tools:
        found.append(f"{LOADED_TOOL} was forwarded from the first round: nothing to load")
    if "load_tools" not in first.meta_tools:
        found.append(f"the first round offered {first.meta_tools}, not load_tools")
    if LOADED_TOOL not in second.tools:
        found.append(f"the second round lacks {LOADED_TOOL}")
    if [c["name"] for c in trip.client_tool_calls] != [LOADED_TOOL]:
        found.append(f"the client got the calls {trip.client_tool_calls}")
    return found


def describe(trip: Trip) -> str:
    def call_text(call: dict[str, str]) -> str:
        return f"{call['name']}({call['arguments']})"

    def message_text(message: dict[str, Any]) -> str:
        if message.get("tool_calls"):
            return "assistant: " + ", ".join(
                call_text({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                for c in message["tool_calls"])
        content = str(message.get("content", ""))
        return f"{message['role']}: {content[:100]}{'…' if len(content) > 100 else ''}"

    lines = [f"client -> proxy: {trip.offered} tools, user: {USER_MESSAGE!r}"]
    for number, rnd in enumerate(trip.rounds, 1):
        lines.append(f"proxy -> upstream, round {number}: {len(rnd.tools)} client tools "
                     f"({', '.join(rnd.tools)}) + {', '.join(rnd.meta_tools) or 'no meta-tool'}")
        lines += [f"    appended by the proxy: {message_text(m)}" for m in rnd.appended]
        hidden = any(c["name"] in META_TOOLS for c in rnd.answered)
        lines.append(f"upstream -> proxy, round {number}: "
                     f"{', '.join(call_text(c) for c in rnd.answered)}"
                     f"{'   (answered by the proxy, hidden from the client)' if hidden else ''}")
    calls = ", ".join(call_text(c) for c in trip.client_tool_calls) or "no tool call"
    lines.append(f"proxy -> client: HTTP {trip.status}, x-tool-pruning-tools: "
                 f"{trip.pruning_header}, {calls}, finish_reason {trip.finish_reason}, "
                 f"usage.prompt_tokens {trip.prompt_tokens} (summed over the rounds)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.round_trip", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the trip as JSON")
    args = parser.parse_args(argv)
    trip = run_trip()
    print(json.dumps(asdict(trip), indent=2) if args.json else describe(trip))
    found = problems(trip)
    for problem in found:
        print(f"unexpected: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
