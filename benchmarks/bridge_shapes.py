"""The bridge's calls in the shapes models write them: how many model rounds each shape
costs before the client gets its call, through this checkout's ``toolprune serve`` and,
side by side, another checkout's (``--baseline DIR``).

Run from the repository root::

    python -m benchmarks.bridge_shapes
    python -m benchmarks.bridge_shapes --baseline /tmp/main   # + main's proxy, same shapes

The scripted upstream (in this process) plays a model that misbehaves as real ones do
(:data:`benchmarks.support.bridge_shapes.SHAPES`): asked for a CI run's failed job logs
with the GitHub MCP server's 117 tools (``get_job_logs`` left out of the first block), it
searches, then calls ``get_job_logs`` through the ``call_tool`` bridge in the shape under
test; refused, it writes the correct shape (a model's best recovery: one more round).
Each proxy is a ``toolprune serve`` process with tools delivered in the conversation
(``TOOLPRUNE_LATE_TOOLS=conversation``), on every acting API, plain answers.

Per shape and proxy: the model rounds it took (upstream requests of the client's one
request: 2 when the shape is taken at once, 3 after a refusal) and whether the client got
``get_job_logs`` with the intended arguments (nothing invented: a shape with no reading
is refused, never guessed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import Server, clean_env, free_port
from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.bridge_shapes import SHAPES, Shape, correct
from benchmarks.support.chat_replies import Chat
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.text_tables import markdown_table
from benchmarks.support.upstream import Upstream

CATALOG: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
ASK = "Run 7781 of acme/ledger failed: show me the logs of its failed jobs."
TOOL = "get_job_logs"
ARGUMENTS = {"owner": "acme", "repo": "ledger", "run_id": 7781, "failed_only": True}
SEARCH = json.dumps({"query": TOOL})
APIS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
STARTUP_TIMEOUT_S = 300.0


def body(api: str) -> dict[str, Any]:
    """The client's request on ``api``, the catalogue in its shape, not streamed."""
    functions = [tool["function"] for tool in CATALOG]
    if api == "chat":
        return {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": CATALOG}
    if api == "responses":
        return {"model": "m", "input": ASK, "tools": [{"type": "function", **f} for f in functions]}
    return {"model": "m", "max_tokens": 512, "messages": [{"role": "user", "content": ASK}],
            "tools": [{"name": f["name"], "description": f.get("description", ""),
                       "input_schema": f["parameters"]} for f in functions]}


def reply(api: str, call_id: str, name: str, arguments: str) -> Any:
    """The model's answer on ``api``: one call of ``name`` with ``arguments`` (JSON text
    as written; Messages carries the object when the text reads as one)."""
    if api == "chat":
        return Chat(content=None, tool_calls=[{"id": call_id, "name": name, "arguments": arguments}])
    if api == "responses":
        return Responses(text=None, calls=[{"call_id": call_id, "name": name, "arguments": arguments}])
    try:
        given: Any = json.loads(arguments)
    except json.JSONDecodeError:
        given = arguments
    return Message(text=None, calls=[{"id": call_id, "name": name, "input": given}])


def client_call(api: str, answer: dict[str, Any]) -> tuple[str, Any] | None:
    """The one call the client got (name, arguments as an object), or None."""
    if api == "chat":
        calls = answer["choices"][0]["message"].get("tool_calls") or []
        found = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
    elif api == "responses":
        found = [(item["name"], json.loads(item["arguments"])) for item in answer["output"]
                 if item.get("type") == "function_call"]
    else:
        found = [(block["name"], block["input"]) for block in answer["content"]
                 if block.get("type") == "tool_use"]
    return found[0] if len(found) == 1 else None


def play(upstream: Upstream, origin: str, api: str, shape: Shape) -> tuple[int, bool]:
    """One client request in which the model writes its bridge call in ``shape``: the
    model rounds it took and whether the client got the intended call."""
    path = APIS[api]
    upstream.drain(path.removeprefix("/v1"))
    upstream.script(
        reply(api, "search_1", "search_tools", SEARCH),
        reply(api, "bridge_1", "call_tool", shape.write(TOOL, ARGUMENTS)),
        reply(api, "bridge_2", "call_tool", correct(TOOL, ARGUMENTS)),  # after a refusal
        path=path.removeprefix("/v1"),
    )
    before = len(upstream.requests)
    response = httpx.post(origin + path, json=body(api), timeout=300,
                          headers={"X-Conversation-Id": uuid.uuid4().hex})
    response.raise_for_status()
    rounds = len(upstream.requests) - before
    return rounds, client_call(api, response.json()) == (TOOL, ARGUMENTS)


def start(name: str, upstream: str, log_dir: Path, root: Path | None) -> Server:
    """``toolprune serve`` of this checkout or of ``root``, tools delivered in the
    conversation, waiting for a new catalogue's index before ranking."""
    from benchmarks.load import start_proxy

    env = {**clean_env("warning"), "TOOLPRUNE_LATE_TOOLS": "conversation",
           "TOOLPRUNE_INDEX_TIMEOUT_S": "300"}
    return start_proxy(name, free_port(), upstream, argparse.Namespace(workers=1), log_dir,
                       env, root=root)


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited:\n{server.log_tail()}")
        try:
            if httpx.get(server.origin + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{server.name} did not start")


def run(baseline: Path | None, apis: list[str], log_dir: Path) -> None:
    upstream = Upstream()
    with serve_in_thread(upstream.app) as origin:
        targets = [start("toolprune", origin, log_dir, None)]
        if baseline is not None:
            targets.append(start("baseline", origin, log_dir, baseline.resolve()))
        try:
            for server in targets:
                wait_ready(server)
            rows = []
            for shape in SHAPES:
                row = [shape.name, shape.source]
                for server in targets:
                    outcomes = [play(upstream, server.origin, api, shape) for api in apis]
                    rounds = {r for r, _ in outcomes}
                    row += ["/".join(map(str, sorted(rounds))),
                            "yes" if all(ok for _, ok in outcomes) else "no"]
                rows.append(row)
        finally:
            for server in targets:
                server.stop()
    load = os.getloadavg()
    print(f"toolprune bridge_shapes: python {platform.python_version()}, load average "
          f"{load[0]:.1f}; {len(SHAPES)} shapes on {', '.join(apis)} (plain)")
    headers = ["shape", "reported by"]
    for server in targets:
        headers += [f"{server.name}: model rounds", f"{server.name}: call reached the client"]
    print(markdown_table(headers, rows, left=2))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="another checkout (e.g. `git worktree add DIR main`) run side by side")
    parser.add_argument("--apis", default="chat,responses,messages",
                        help="the APIs to play each shape on (default: all three)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolprune-bridge-") as log_dir:
        run(args.baseline, args.apis.split(","), Path(log_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
