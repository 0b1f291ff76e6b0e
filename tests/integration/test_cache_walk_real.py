"""The simulated prompt cache (``benchmarks/support/cache_walk.py``, on token ids from
``benchmarks/support/llama_tokens.py``) against a real llama-server: a short session
replayed in order to a fresh SmolLM2 llama-server with one slot, where every request's
simulated evaluated count must equal llama-server's own (``timings.prompt_n``; the
Messages and Responses equivalents), with and without ``n_cache_reuse``.

The session holds what costs prefill on a real agent's server: a tool result appended, a
tool's description rewritten inside the tool block, a tool removed from it, a user turn
appended, a side request with another system prompt between two turns (llama-server
then saves the conversation to its RAM prompt cache and loads it back), and the same
prompt sent twice (at least one token evaluated).

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (the first run builds
llama-server, see ``deploy/local_llama.py``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support.cache_walk import Slot
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.llama_replay import fresh_llama, replay
from benchmarks.support.llama_tokens import prompts_of, simulate
from benchmarks.support.upstream import Recorded

pytestmark = pytest.mark.real_upstream

CTX = 16384
GITHUB = {tool["function"]["name"]: tool for tool in
          json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())}
TOOLS = ["list_pull_requests", "pull_request_read", "search_issues", "create_issue",
         "list_commits"]
SYSTEM = "You are a GitHub agent. Call one tool at a time."
FIRST = "List the open pull requests in octo/widgets."
SECOND = "Now check whether an issue about the tooltip overflow exists."
RESULT = "\n".join(f"#{4700 + n} Change number {n} to the widget renderer (open, by user{n})"
                   for n in range(40))


def _tools(names: list[str], rewritten: str | None = None) -> list[dict[str, Any]]:
    tools = [copy.deepcopy(GITHUB[name]) for name in names]
    for tool in tools:
        if tool["function"]["name"] == rewritten:
            tool["function"]["description"] = "Search issues by a query; returns matches."
    return tools


def chat_session() -> list[dict[str, Any]]:
    """The session's Chat Completions bodies, in order."""
    call = {"id": "call_1", "type": "function", "function": {
        "name": "list_pull_requests",
        "arguments": json.dumps({"owner": "octo", "repo": "widgets", "state": "open"})}}
    first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": FIRST}]
    called = [*first, {"role": "assistant", "content": None, "tool_calls": [call]},
              {"role": "tool", "tool_call_id": "call_1", "content": RESULT}]
    answered = [*called, {"role": "assistant", "content": "Forty pull requests are open."},
                {"role": "user", "content": SECOND}]
    side = [{"role": "system", "content": "Write a five-word title for the conversation."},
            {"role": "user", "content": FIRST}]
    fewer = _tools([n for n in TOOLS if n != "pull_request_read"], rewritten="search_issues")
    return [
        {"messages": first, "tools": _tools(TOOLS)},
        {"messages": called, "tools": _tools(TOOLS)},
        {"messages": called, "tools": _tools(TOOLS, rewritten="search_issues")},
        {"messages": called, "tools": fewer},
        {"messages": answered, "tools": fewer},
        {"messages": side},
        {"messages": answered, "tools": fewer},
    ]


def messages_body(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat body of :func:`chat_session` in the Messages API's shape."""
    system = chat["messages"][0]["content"]
    messages: list[dict[str, Any]] = []
    for message in chat["messages"][1:]:
        if message["role"] == "tool":
            messages.append({"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": message["tool_call_id"],
                "content": [{"type": "text", "text": message["content"]}]}]})
        elif message.get("tool_calls"):
            messages.append({"role": "assistant", "content": [{
                "type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                "input": json.loads(call["function"]["arguments"])}
                for call in message["tool_calls"]]})
        else:
            messages.append({"role": message["role"], "content": message["content"]})
    body: dict[str, Any] = {"model": "m", "max_tokens": 1, "system": system, "messages": messages}
    if "tools" in chat:
        body["tools"] = [{"name": t["function"]["name"], "description": t["function"]["description"],
                          "input_schema": t["function"]["parameters"]} for t in chat["tools"]]
    return body


def responses_body(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat body of :func:`chat_session` in the Responses API's shape."""
    items: list[dict[str, Any]] = []
    for message in chat["messages"][1:]:
        if message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        elif message.get("tool_calls"):
            items += [{"type": "function_call", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"]}
                      for call in message["tool_calls"]]
        elif message["role"] == "assistant":
            items.append({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": message["content"]}]})
        else:
            items.append({"role": message["role"], "content": message["content"]})
    body: dict[str, Any] = {"model": "m", "instructions": chat["messages"][0]["content"],
                            "input": items}
    if "tools" in chat:
        body["tools"] = [{"type": "function", **tool["function"]} for tool in chat["tools"]]
    return body


def _bodies(api: str, reuse: int) -> list[tuple[str, dict[str, Any]]]:
    bodies = []
    for chat in chat_session():
        if api == "chat":
            path, body = "/v1/chat/completions", {"model": "m", **chat}
        elif api == "responses":
            path, body = "/v1/responses", responses_body(chat)
        else:
            path, body = "/v1/messages", messages_body(chat)
        if reuse:
            body["n_cache_reuse"] = reuse
        bodies.append((path, body))
    return bodies


@pytest.mark.parametrize(("api", "reuse"), [
    ("chat", 0), ("chat", 16), ("responses", 0), ("responses", 16), ("messages", 16)])
def test_simulated_evaluated_tokens_equal_llama_servers(api: str, reuse: int, tmp_path: Path) -> None:
    bodies = _bodies(api, reuse)
    with fresh_llama(tmp_path, f"llama-{api}-{reuse}", CTX) as origin:
        prompts = prompts_of(origin, bodies)
        simulated = simulate(prompts, Slot(CTX))
        records = [Recorded("POST", path, "", [], b"") for path, _ in bodies]
        measured = replay(origin, records, [body for _, body in bodies])
    assert [m.status for m in measured] == [200] * len(bodies), [m.error for m in measured]
    assert [s.prompt for s in simulated] == [m.prompt for m in measured]
    assert [s.evaluated for s in simulated] == [m.evaluated for m in measured]
    if reuse and api != "messages":
        # The removal is stepped over: less than the whole block after it is evaluated.
        assert simulated[3].evaluated < simulated[3].prompt // 4  # type: ignore[operator]
    # The side request's conversation comes back from the RAM cache: the turn after it
    # evaluates only what the cache lacks, and the prompt sent twice evaluates one token.
    assert simulated[6].evaluated == 1
