"""A client that runs its own tool search, on each acting API, plain and streamed: its
tools are its CORE, forwarded whole; toolprune adds no second discovery tool; and when
its search adds a tool, the next request is the same conversation (its turn counts on)
with the found tool after the CORE, so the block's prefix stays in the upstream's cache.

The three shapes coding agents use (written here from the APIs' references, with this
test's own texts): Chat Completions with a plain search function and a deferred-tool
menu in the system prompt, the found tool then sent as a plain function (Qwen Code's
way); Messages with a plain search tool, the menu in a system message and the found tool
sent with ``defer_loading`` after a ``tool_reference`` result (Claude Code's
``ENABLE_TOOL_SEARCH`` way); Responses with a ``tool_search`` the client executes and
``tool_search_call`` / ``tool_search_output`` items (Codex's way). Real servers on
loopback: the proxy under uvicorn in front of the scripted upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream
from config.settings import Settings
from proxy.app import create_app
from tests.support.logs import Lines
from tests.support.turn_apis import APIS, ASK, CHAT_TOOLS

CASES = [(name, stream) for name in APIS for stream in (False, True)]
IDS = [f"{name}-{'streamed' if stream else 'plain'}" for name, stream in CASES]

#: The client's CORE: the tools it sends every request.
CORE = [tool["function"] for tool in CHAT_TOOLS[:12]]
#: The tools it defers (listed in its menu), and the one its search finds.
DEFERRED = [tool["function"] for tool in CHAT_TOOLS[40:52]]
FOUND = DEFERRED[3]
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
SEARCH_DESCRIPTION = "Fetch the definitions of deferred tools by name or keywords."
MENU = "These tools are deferred; fetch one before calling it:\n" + "\n".join(
    f'- "{tool["name"]}": "{tool.get("description", "")[:60]}"' for tool in DEFERRED
)


def _chat(stream: bool, found: bool) -> dict[str, Any]:
    tools = [{"type": "function", "function": f} for f in [
        *([FOUND] if found else []), *CORE,
        {"name": "tool_search", "description": SEARCH_DESCRIPTION, "parameters": QUERY}]]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent.\n\n" + MENU},
        {"role": "user", "content": ASK},
    ]
    if found:
        call = {"id": "c1", "type": "function", "function": {
            "name": "tool_search", "arguments": json.dumps({"query": "select:" + FOUND["name"]})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1",
             "content": f"<functions><function>{json.dumps(FOUND)}</function></functions>"},
        ]
    return {"model": "m", "messages": messages, "tools": tools, "stream": stream}


def _anthropic(function: dict[str, Any]) -> dict[str, Any]:
    return {"name": function["name"], "description": function.get("description", ""),
            "input_schema": function["parameters"]}


def _messages(stream: bool, found: bool) -> dict[str, Any]:
    tools = [*map(_anthropic, CORE),
             {"name": "ToolSearch", "description": SEARCH_DESCRIPTION, "input_schema": QUERY}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": ASK}]},
        {"role": "system", "content": "Deferred tools, fetch with ToolSearch:\n"
         + "\n".join(tool["name"] for tool in DEFERRED)},
    ]
    if found:
        tools.append({**_anthropic(FOUND), "defer_loading": True})
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
             "name": "ToolSearch", "input": {"query": "select:" + FOUND["name"]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "tool_reference", "tool_name": FOUND["name"]}]}]},
        ]
    return {"model": "m", "max_tokens": 64, "system": "You are a coding agent.",
            "messages": messages, "tools": tools, "stream": stream}


def _responses(stream: bool, found: bool) -> dict[str, Any]:
    tools = [*({"type": "function", **f} for f in CORE),
             {"type": "tool_search", "execution": "client", "description": SEARCH_DESCRIPTION,
              "parameters": QUERY}]
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "You are a coding agent."},
        {"type": "message", "role": "user", "content": ASK},
    ]
    if found:
        items += [
            {"type": "tool_search_call", "call_id": "c1", "execution": "client",
             "status": "completed", "arguments": {"query": "cookies"}},
            {"type": "tool_search_output", "call_id": "c1", "execution": "client",
             "status": "completed",
             "tools": [{"type": "function", **FOUND, "defer_loading": True}]},
        ]
    return {"model": "m", "input": items, "tools": tools, "stream": stream}


REQUESTS = {"chat": _chat, "messages": _messages, "responses": _responses}
#: What stands for the client's search in the upstream request.
SEARCH = {"chat": "tool_search", "messages": "ToolSearch", "responses": "tool_search"}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream()
    with serve_in_thread(upstream.app) as origin:
        settings = Settings(upstream_url=origin + "/v1", max_tools=6, top_k=4,
                            index_timeout_s=300.0)  # type: ignore[call-arg]
        with serve_in_thread(create_app(settings), server_header=False) as proxy:
            yield upstream, proxy


def _post(proxy: str, name: str, body: dict[str, Any], test: str) -> httpx.Response:
    response = httpx.post(proxy + APIS[name].path, json=body, timeout=300,
                          headers={"Authorization": f"Bearer {test}"})
    assert response.status_code == 200, response.text[:500]
    return response


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_client_that_searches_itself_gets_its_tools_and_no_second_search(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    upstream, proxy = servers
    api = APIS[name]
    upstream.drain(api.suffix)
    since = len(upstream.requests)
    response = _post(proxy, name, REQUESTS[name](stream, found=False), request.node.name)
    (sent,) = api.sent(upstream, since)
    offered = [n for n in api.offered(sent.json()) if n]
    assert SEARCH[name] in offered and "load_tools" not in offered and "search_tools" not in offered
    assert [n for n in offered if n != SEARCH[name]] == [t["name"] for t in CORE]
    forwarded, of = response.headers["x-tool-pruning-tools"].split(";")[0].split("/")
    assert forwarded == of  # nothing of the client's left out


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_the_conversation_survives_the_clients_search_adding_a_tool(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, log_lines: Lines,
    name: str, stream: bool,
) -> None:
    upstream, proxy = servers
    api = APIS[name]
    upstream.drain(api.suffix)
    since = len(upstream.requests)
    lines = []
    for found in (False, True):
        _post(proxy, name, REQUESTS[name](stream, found=found), request.node.name)
        sent = api.sent(upstream, since)[-1]
        lines.append(log_lines.wait_for("pruning_decision", sent.header("x-request-id") or ""))
    first, second = lines
    assert second["conversation"] == first["conversation"]
    assert (first["turn"], second["turn"]) == (1, 2)
    body = api.sent(upstream, since)[-1].json()
    offered = [n for n in api.offered(body) if n]
    # The found tool follows the CORE, wherever the client put it.
    assert [n for n in offered if n != SEARCH[name]] == [*(t["name"] for t in CORE), FOUND["name"]]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_search_result_does_not_repeat_a_forwarded_definition(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, stream: bool
) -> None:
    """Chat Completions: the result of the client's search function names the found tool
    and its purpose; its parameters go once, in ``tools``."""
    upstream, proxy = servers
    upstream.drain("/chat/completions")
    since = len(upstream.requests)
    _post(proxy, "chat", _chat(stream, found=True), request.node.name)
    (sent,) = APIS["chat"].sent(upstream, since)
    body = sent.json()
    result = body["messages"][-1]["content"]
    short = {"name": FOUND["name"], "description": FOUND.get("description", "")}
    assert result == f"<functions><function>{json.dumps(short)}</function></functions>"
    (definition,) = [t for t in body["tools"] if t["function"]["name"] == FOUND["name"]]
    assert definition["function"]["parameters"] == FOUND["parameters"]


def _search_result(name: str, body: dict[str, Any]) -> Any:
    """What the forwarded history holds as the result of the client's search."""
    if name == "messages":
        (block,) = body["messages"][-1]["content"]
        return block["content"]
    (output,) = [item for item in body["input"] if item.get("type") == "function_call_output"]
    return output["output"]


#: The APIs whose client search answers with the found tools themselves (not text).
LOADING_RESULTS = [(name, stream) for name, stream in CASES if name in ("messages", "responses")]


@pytest.mark.parametrize(("name", "stream"), LOADING_RESULTS,
                         ids=[f"{n}-{'streamed' if s else 'plain'}" for n, s in LOADING_RESULTS])
def test_a_client_search_result_repeats_nothing_the_forwarded_tools_carry(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    """Messages (a ``tool_reference``) and Responses (a client-executed
    ``tool_search_output``): the found tool's definition goes in the upstream's ``tools``,
    and its result in the history says nothing more (no name, no purpose, nothing every
    later request would send again); llama-server renders a ``tool_reference`` sent
    directly as nothing too."""
    upstream, proxy = servers
    api = APIS[name]
    upstream.drain(api.suffix)
    since = len(upstream.requests)
    _post(proxy, name, REQUESTS[name](stream, found=True), request.node.name)
    (sent,) = api.sent(upstream, since)
    body = sent.json()
    assert FOUND["name"] in api.offered(body)
    assert not _search_result(name, body)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_messages_clients_menu_goes_ahead_of_the_tools(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, stream: bool
) -> None:
    """Messages: the deferred-tool menu the client sends as a system message inside
    ``messages`` reaches the upstream at the end of ``system`` (rendered before the tools,
    so a tool its search adds leaves it in the upstream's cached prefix)."""
    upstream, proxy = servers
    api = APIS["messages"]
    upstream.drain(api.suffix)
    since = len(upstream.requests)
    sent_bodies = []
    for found in (False, True):
        client_body = _messages(stream, found=found)
        _post(proxy, "messages", client_body, request.node.name)
        sent_bodies.append(api.sent(upstream, since)[-1].json())
    menu = client_body["messages"][1]["content"]
    for body in sent_bodies:
        assert body["system"] == [{"type": "text", "text": "You are a coding agent."},
                                  {"type": "text", "text": menu}]
        assert [m["role"] for m in body["messages"]].count("system") == 0
        assert body["messages"][0] == client_body["messages"][0]
