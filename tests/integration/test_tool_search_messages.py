"""Anthropic tool search through the proxy (issue #25), on /v1/messages: the proxy under
uvicorn in front of the scripted upstream (the model's turns scripted), the official
``anthropic`` SDK as the client, the 117 GitHub MCP tools deferred behind a search
(tests/support/tool_search_requests.py). The upstream must get only what a plain
Anthropic-compatible server runs: no ``defer_loading``, no server tool, no
``server_tool_use`` / ``tool_search_tool_result`` / ``tool_reference`` block; the client
gets the blocks Anthropic's API documents."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from benchmarks.support.api_replies import Message
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.tool_search_requests import (
    ASK,
    BM25_SEARCH,
    PR_INPUT,
    PR_TOOL,
    REGEX_SEARCH,
    client_search_history,
    deferred_github,
    first_turn,
    server_search_history,
)

SEARCH = {"id": "toolu_01s", "name": "tool_search_tool_regex", "input": {"query": "create_pull_request$"}}
CALL = {"id": "toolu_01c", "name": PR_TOOL, "input": PR_INPUT}
UPSTREAM_FORBIDDEN = ("defer_loading", "server_tool_use", "tool_search_tool_result",
                      "tool_reference", "tool_search_tool_regex_2")


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(preload_deferred=False)


def client(proxy: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)


def sent(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith("/messages")]


def names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request["tools"]]


def assert_plain(request: dict[str, Any]) -> None:
    """Nothing of tool search reaches the upstream; every tool is a custom tool."""
    text = json.dumps(request)
    assert not [word for word in UPSTREAM_FORBIDDEN if word in text], text[:300]
    assert all("type" not in tool or tool["type"] == "custom" for tool in request["tools"])


def assert_search_then_call(upstream: RunningUpstream) -> list[dict[str, Any]]:
    """Round 1 offers the client's CORE and the search function only; round 2 adds the
    found tool at the end and carries the search exchange."""
    first, second = sent(upstream)[:2]
    for request in (first, second):
        assert_plain(request)
    assert names(first) == ["Bash", "Read", "tool_search_tool_regex"]
    assert first["tools"][2]["input_schema"]["required"] == ["query"]
    assert second["tools"][:3] == first["tools"]
    assert names(second)[3:] == [PR_TOOL]
    assistant, user = second["messages"][-2:]
    assert assistant["role"] == "assistant" and assistant["content"][-1] == {
        "type": "tool_use", "id": "srvtoolu_01s", "name": "tool_search_tool_regex",
        "input": SEARCH["input"]}
    (result,) = user["content"]
    assert result["tool_use_id"] == "srvtoolu_01s"
    assert [found["name"] for found in json.loads(result["content"])["found"]] == [PR_TOOL]
    return [first, second]


def test_a_regex_search_is_run_by_the_proxy_and_the_found_tool_called(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text=None, calls=[SEARCH]), Message(text="Opening it.", calls=[CALL]),
        path="/messages",
    )
    raw = client(proxy).messages.with_raw_response.create(
        **first_turn(), extra_headers={"X-Conversation-Id": "m1"}
    )
    message = raw.parse()
    assert [block.type for block in message.content] == [
        "server_tool_use", "tool_search_tool_result", "text", "tool_use"
    ]
    use, result, _, call = message.content
    assert use.id == "srvtoolu_01s" and use.name == "tool_search_tool_regex"
    assert use.input == SEARCH["input"]
    assert result.tool_use_id == use.id
    assert [ref.tool_name for ref in result.content.tool_references] == [PR_TOOL]
    assert call.name == PR_TOOL and message.stop_reason == "tool_use"
    # The answer's round: the 2 tools not deferred and the one the search found.
    assert raw.headers["x-tool-pruning-tools"] == "3/119; client=2; toolprune=0; search=1"
    assert_search_then_call(upstream)


def test_a_streamed_search_shows_its_blocks_and_the_sdk_accumulates_them(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text="Searching. ", calls=[SEARCH]), Message(text=None, calls=[CALL]),
        path="/messages",
    )
    with client(proxy).messages.stream(**first_turn()) as stream:
        events = list(stream)
        message = stream.get_final_message()
    for event in events:
        type(event).model_validate(event.model_dump(exclude_unset=True))
    assert [block.type for block in message.content] == [
        "text", "server_tool_use", "tool_search_tool_result", "tool_use"
    ]
    assert message.content[1].input == SEARCH["input"]
    assert [r.tool_name for r in message.content[2].content.tool_references] == [PR_TOOL]
    assert message.content[3].input == PR_INPUT and message.stop_reason == "tool_use"
    starts = [e.index for e in events if e.type == "content_block_start"]
    assert starts == [0, 1, 2, 3]
    assert_search_then_call(upstream)


def test_the_next_turn_rewrites_the_history_the_same_way_and_keeps_the_found_tool(
    upstream: RunningUpstream, proxy: str
) -> None:
    """The round that ran the search and the next turn, which carries it in its history,
    send the upstream the same tools and the same messages up to where they differ."""
    upstream.upstream.script(
        Message(text="I'll look for a pull request tool.", calls=[
            {**SEARCH, "id": "toolu_01a"}]),
        Message(text=None, calls=[{**CALL, "id": "toolu_01b"}]),
        Message(text="Pull request #7 is open."),
        path="/messages",
    )
    api = client(proxy)
    first = api.messages.create(**first_turn())
    history = server_search_history()
    assert [block.model_dump(exclude_none=True) for block in first.content] == history[1]["content"]
    final = api.messages.create(**{**first_turn(), "messages": history})
    assert final.content[0].text == "Pull request #7 is open."
    _, in_turn, later = sent(upstream)
    assert_plain(later)
    assert later["tools"] == in_turn["tools"]  # the found tool stays, in its place
    assert later["messages"][:3] == in_turn["messages"]
    assert later["messages"][3:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01b", "name": PR_TOOL,
                                           "input": PR_INPUT}]},
        history[2],
    ]


def test_a_bm25_search_ranks_with_the_query(upstream: RunningUpstream, proxy: str) -> None:
    search = {"id": "toolu_09", "name": "tool_search_tool_bm25",
              "input": {"query": "open a new pull request"}}
    upstream.upstream.script(Message(text=None, calls=[search]), Message(text="ok"), path="/messages")
    message = client(proxy).messages.create(**first_turn(BM25_SEARCH))
    result = message.content[1]
    found = [ref.tool_name for ref in result.content.tool_references]
    assert PR_TOOL in found and len(found) == 5
    first, second = sent(upstream)
    assert names(first)[-1] == "tool_search_tool_bm25"
    assert names(second)[3:] == found


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [("x" * 201, "at most 200"), ("(unclosed", "invalid regular expression")],
)
def test_a_bad_pattern_gets_the_documented_error_and_the_model_goes_on(
    upstream: RunningUpstream, proxy: str, pattern: str, problem: str
) -> None:
    upstream.upstream.script(
        Message(text=None, calls=[{**SEARCH, "input": {"query": pattern}}]),
        Message(text="That pattern failed."),
        path="/messages",
    )
    message = client(proxy).messages.create(**first_turn())
    use, result, text = message.content
    assert result.type == "tool_search_tool_result"
    assert result.content.type == "tool_search_tool_result_error"
    assert result.content.error_code == "invalid_tool_input"
    assert problem in (result.content.error_message or "")
    assert text.text == "That pattern failed." and message.stop_reason == "end_turn"
    second = sent(upstream)[1]
    assert names(second) == ["Bash", "Read", "tool_search_tool_regex"]  # nothing loaded
    assert json.loads(second["messages"][-1]["content"][0]["content"])["error_code"] == (
        "invalid_tool_input"
    )


def test_a_client_run_search_is_expanded_for_the_upstream(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(Message(text=None, calls=[CALL]), path="/messages")
    body = {**first_turn(search=None), "messages": client_search_history()}
    message = client(proxy).messages.create(**body)
    assert message.content[0].name == PR_TOOL
    (request,) = sent(upstream)
    assert_plain(request)
    assert names(request) == ["Bash", "Read", "ToolSearch", PR_TOOL]  # no load_tools
    (result,) = request["messages"][-1]["content"]
    assert result["content"] == []  # the reference loaded PR_TOOL, which tools carry


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b["tools"].__setitem__(2, {**REGEX_SEARCH, "type": "tool_search_tool_regex_20991231"}),
         "tool_search_tool_regex_20991231"),
        (lambda b: b["tools"].__setitem__(2, {**REGEX_SEARCH, "defer_loading": True}),
         "cannot be deferred"),
        (lambda b: b["tools"].append({**deferred_github()[0], "name": "tool_search_tool_regex"}),
         "names must be unique"),
        (lambda b: b.__setitem__("messages", server_search_history(found="mcp__github__nope")),
         "'mcp__github__nope', which is not among"),
    ],
    ids=["unknown-version", "deferred-search-tool", "name-clash", "unknown-reference"],
)
def test_requests_that_break_the_contract_are_a_400_in_anthropic_shape(
    upstream: RunningUpstream, proxy: str, change: Any, message: str
) -> None:
    body = first_turn()
    change(body)
    with pytest.raises(anthropic.BadRequestError) as raised:
        client(proxy).messages.create(**body)
    assert raised.value.status_code == 400
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error" and message in error["message"]
    assert sent(upstream) == []  # nothing reached the upstream


def test_pruning_off_forwards_the_request_unchanged(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(Message(text="as is"), path="/messages")
    raw = json.dumps(first_turn()).encode()
    response = httpx.post(proxy + "/v1/messages", content=raw, timeout=60,
                          headers={"content-type": "application/json", "X-Tool-Pruning": "off"})
    assert response.status_code == 200
    (request,) = [r for r in upstream.upstream.requests if r.path.endswith("/messages")]
    assert request.body == raw
    assert ASK in request.body.decode()
