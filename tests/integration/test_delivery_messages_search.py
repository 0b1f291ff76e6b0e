"""Tools delivered in the conversation (``TOOLPRUNE_LATE_TOOLS=conversation``) to the
Messages clients that search for their deferred tools, plain and streamed: Anthropic's
tool search server tool, which the proxy emulates (``server_tool_use`` +
``tool_search_tool_result`` with ``tool_reference`` blocks), and a client that runs its
own ``ToolSearch`` (Claude Code's way: a plain tool whose ``tool_result`` holds
``tool_reference`` blocks, the found tool then sent in ``tools`` with ``defer_loading``).
The found tool is not added to the block: the search result the upstream reads carries its
definition, the model calls it through ``call_tool``, the client gets the call under the
tool's name, and each forwarded prompt begins with the previous one's, ``tools``
unchanged. Real servers on loopback: the proxy under uvicorn in front of the scripted
upstream, the official ``anthropic`` SDK as the client. Shapes: tests/support/tool_search_requests.py.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from benchmarks.support.api_replies import Message
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_tool_search_messages import names, sent
from tests.support.tool_search_requests import (
    ASK,
    BASH,
    GITHUB,
    PR_INPUT,
    PR_TOOL,
    PREFIX,
    READ,
    SYSTEM,
    TOOL_SEARCH,
    deferred_github,
    first_turn,
)

STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
#: The model's call of the tool its search found, through the bridge.
#: The name a delivery shows ``PR_TOOL`` by, without Claude Code's namespace (what the
#: model copies into its bridge call).
SHOWN = PR_TOOL.removeprefix("mcp__github__")
BRIDGE_CALL = {"id": "toolu_01c", "name": "call_tool",
               "input": {"name": SHOWN, "arguments": PR_INPUT}}
DONE = "Pull request #7 is open."
#: Claude Code's list of the tools it defers, in a system message of ``messages``.
MENU = "Deferred tools, load one with ToolSearch before calling it:\n" + "\n".join(
    PREFIX + tool["function"]["name"] for tool in GITHUB[:40]
)
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(preload_deferred=False, late_tools="conversation")


def answer(proxy: str, body: dict[str, Any], stream: bool) -> list[dict[str, Any]]:
    """The content blocks the client got for ``body`` (a stream accumulated by the SDK)."""
    api = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)
    if stream:
        with api.messages.stream(**body) as events:
            message = events.get_final_message()
    else:
        message = api.messages.create(**body)
    return [block.model_dump(exclude_none=True) for block in message.content]


def unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` markers (a template renders none)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def assert_each_prompt_extends_the_last(requests: list[dict[str, Any]]) -> None:
    """Every forwarded request has the first one's ``tools`` and ``system``, and its
    messages begin with the previous request's (markers aside)."""
    for before, after in zip(requests, requests[1:], strict=False):
        assert after["tools"] == requests[0]["tools"]
        assert after.get("system") == before.get("system")
        earlier = unmarked(before["messages"])
        assert unmarked(after["messages"])[: len(earlier)] == earlier


def delivered(result: str) -> list[str]:
    """The names of the tools a result (JSON text) delivers with their definitions."""
    return [tool["name"] for tool in json.loads(result)["tools"]]


@STREAMS
def test_a_tool_the_emulated_server_search_found_is_called_through_the_bridge(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    search = {"id": "toolu_01s", "name": "tool_search_tool_regex",
              "input": {"query": "create_pull_request$"}}
    off_schema = {**BRIDGE_CALL, "id": "toolu_01x", "input": {"name": PR_TOOL, "arguments": {}}}
    upstream.upstream.script(Message(text=None, calls=[search]),
                             Message(text=None, calls=[off_schema]),
                             Message(text=None, calls=[BRIDGE_CALL]),
                             Message(text=DONE), path="/messages")
    body = first_turn()
    content = answer(proxy, body, stream)
    assert [block["type"] for block in content] == [
        "server_tool_use", "tool_search_tool_result", "tool_use"]
    assert [r["tool_name"] for r in content[1]["content"]["tool_references"]] == [PR_TOOL]
    assert content[2] == {"type": "tool_use", "id": "toolu_01c", "name": PR_TOOL, "input": PR_INPUT}
    first, second, refused = sent(upstream)
    assert names(first) == ["Bash", "Read", "tool_search_tool_regex", "call_tool"]
    (result,) = second["messages"][-1]["content"]
    assert result["tool_use_id"] == "srvtoolu_01s" and delivered(result["content"]) == [SHOWN]
    (refusal,) = refused["messages"][-1]["content"]
    assert refusal["tool_use_id"] == "toolu_01x" and "problems" in json.loads(refusal["content"])

    history = [*body["messages"], {"role": "assistant", "content": content},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01c",
                                             "content": "Pull request #7 opened."}]}]
    final = answer(proxy, {**body, "messages": history}, stream)
    assert final == [{"type": "text", "text": DONE}]
    *_, third = sent(upstream)
    assert_each_prompt_extends_the_last([first, second, refused, third])
    written, answered = third["messages"][len(refused["messages"]):]
    assert written["content"] == [{**BRIDGE_CALL, "type": "tool_use"}]
    assert answered == history[-1]


def claude_code_turn(messages: list[Any], *, found: bool) -> dict[str, Any]:
    """A request of a client that runs its own ``ToolSearch``: its own tools, then the
    tool its search found, deferred (``found``); the deferred-tool menu after the first
    user message."""
    pr_tool = [tool for tool in deferred_github() if tool["name"] == PR_TOOL]
    return {"model": "m", "max_tokens": 256, "system": SYSTEM,
            "tools": [BASH, READ, TOOL_SEARCH, *(pr_tool if found else [])],
            "messages": [messages[0], {"role": "system", "content": MENU}, *messages[1:]]}


@STREAMS
def test_a_tool_the_clients_own_search_found_is_called_through_the_bridge(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    search = {"id": "toolu_02a", "name": "ToolSearch", "input": {"query": "select:" + PR_TOOL}}
    upstream.upstream.script(Message(text=None, calls=[search]),
                             Message(text=None, calls=[{**BRIDGE_CALL, "id": "toolu_02b"}]),
                             Message(text=DONE), path="/messages")
    ask = {"role": "user", "content": ASK}
    assert answer(proxy, claude_code_turn([ask], found=False), stream) == [{"type": "tool_use", **search}]

    searched = [ask, {"role": "assistant", "content": [{"type": "tool_use", **search}]},
                {"role": "user", "content": [{
                    "type": "tool_result", "tool_use_id": "toolu_02a", "cache_control": EPHEMERAL,
                    "content": [{"type": "tool_reference", "tool_name": PR_TOOL}]}]}]
    content = answer(proxy, claude_code_turn(searched, found=True), stream)
    assert content == [{"type": "tool_use", "id": "toolu_02b", "name": PR_TOOL, "input": PR_INPUT}]
    first, second = sent(upstream)
    assert names(first) == ["Bash", "Read", "ToolSearch", "call_tool"]
    (result,) = second["messages"][-1]["content"]
    assert result["cache_control"] == EPHEMERAL  # where the client put it
    (definitions,) = result["content"]  # where the tool_reference stood
    assert delivered(definitions["text"]) == [SHOWN]

    called = [*unmarked(searched), {"role": "assistant", "content": content},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02b",
                                            "content": "Pull request #7 opened.",
                                            "cache_control": EPHEMERAL}]}]
    assert answer(proxy, claude_code_turn(called, found=True), stream) == [{"type": "text", "text": DONE}]
    *_, third = sent(upstream)
    assert_each_prompt_extends_the_last([first, second, third])
    written, answered = third["messages"][len(second["messages"]):]
    assert written["content"] == [{"type": "tool_use", **BRIDGE_CALL, "id": "toolu_02b"}]
    assert answered["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in json.dumps(third["messages"][:-1])
