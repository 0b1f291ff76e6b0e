"""Anthropic tool search read and rewritten for a plain upstream
(proxy/apis/messages/search.py): which search tool a request brings and which it may not,
the tools the history's references found, and the history as a server without tool search
accepts it, the same text on every turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.messages.search import (
    client_search_id,
    found_in_history,
    read_search_tool,
    shown_search_events,
    upstream_history,
)
from proxy.turn.planner import InvalidToolRequest
from selection.catalog.catalog import Catalog, build_catalog, parse_function
from selection.clients.bridge import delivering
from selection.clients.tool_search import ClientSearch, SearchResult
from tests.support.tool_search_requests import (
    PR_TOOL,
    client_search_history,
    messages_tools,
    server_search_history,
)


def catalog() -> Catalog:
    tools = [t for t in messages_tools() if "input_schema" in t]
    return build_catalog([
        parse_function({"name": t["name"], "description": t["description"],
                        "parameters": t["input_schema"]}, t)
        for t in tools
    ])


def test_the_search_tool_versions_toolprune_emulates() -> None:
    assert read_search_tool(messages_tools()) == ClientSearch("regex", "tool_search_tool_regex")
    bm25 = [{"type": "tool_search_tool_bm25", "name": "tool_search_tool_bm25"}]
    assert read_search_tool(bm25) == ClientSearch("query", "tool_search_tool_bm25")
    assert read_search_tool([{"name": "x", "input_schema": {}}]) is None


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        ([{"type": "tool_search_tool_regex_20991231", "name": "tool_search_tool_regex"}],
         "tools.0.type: 'tool_search_tool_regex_20991231' is a tool search version"),
        ([{"type": "tool_search_tool_embeddings_20251119", "name": "s"}], "not support"),
        ([{"type": "tool_search_tool_bm25_20251119", "name": "s", "defer_loading": True}],
         "tools.0: the tool search tool cannot be deferred"),
        ([{"type": "tool_search_tool_bm25_20251119", "name": "a"},
          {"type": "tool_search_tool_regex_20251119", "name": "b"}], "tools.1: only one"),
        ([{"type": "tool_search_tool_regex_20251119", "name": "find"},
          {"name": "find", "input_schema": {}, "defer_loading": True}], "tools.1.name: 'find'"),
    ],
)
def test_search_tools_that_break_the_contract(tools: list[Any], problem: str) -> None:
    with pytest.raises(InvalidToolRequest, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_search_tool(tools)


def test_the_found_tools_come_from_search_results_and_tool_results_once_each() -> None:
    tools = catalog()
    history = [*server_search_history(), *client_search_history()[1:]]
    assert found_in_history(history, tools) == (PR_TOOL,)
    assert found_in_history([{"role": "user", "content": "hi"}], tools) == ()
    with pytest.raises(InvalidToolRequest, match=r"messages\.1\.content\.2: tool_reference"):
        found_in_history(server_search_history(found="gone"), tools)


def test_a_history_without_search_blocks_is_the_clients_own_list() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert upstream_history(messages, catalog()) is messages


def test_a_server_search_becomes_a_function_call_and_its_result() -> None:
    tools = catalog()
    history = server_search_history()
    rewritten = upstream_history(history, tools)
    text = SearchResult("regex", None, (PR_TOOL,)).content(tools)
    assert rewritten == [
        history[0],
        {"role": "assistant", "content": [
            history[1]["content"][0],
            {"type": "tool_use", "id": "srvtoolu_01a", "name": "tool_search_tool_regex",
             "input": {"query": "create_pull_request$"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "srvtoolu_01a", "content": text}]},
        {"role": "assistant", "content": [history[1]["content"][3]]},
        history[2],
    ]
    assert history[1]["content"][1]["type"] == "server_tool_use"  # the client's list is kept


def test_a_search_that_ends_the_assistant_turn_answers_first_in_the_next_user_turn() -> None:
    tools = catalog()
    history = server_search_history()
    history[1]["content"] = history[1]["content"][:3]
    history[2] = {"role": "user", "content": "go on"}
    rewritten = upstream_history(history, tools)
    assert [m["role"] for m in rewritten] == ["user", "assistant", "user"]
    result, words = rewritten[2]["content"]
    assert result["type"] == "tool_result" and words == {"type": "text", "text": "go on"}
    # At the very end of the conversation, the result is a user turn of its own.
    ended = upstream_history(history[:2], tools)
    assert ended[-1]["role"] == "user" and ended[-1]["content"][0]["type"] == "tool_result"


def test_an_error_result_is_rewritten_as_the_model_read_it() -> None:
    tools = catalog()
    history = server_search_history()
    error = SearchResult("regex", "(", error="invalid_tool_input", message="invalid regular expression")
    history[1]["content"][2]["content"] = {
        "type": "tool_search_tool_result_error", "error_code": "invalid_tool_input",
        "error_message": "invalid regular expression"}
    rewritten = upstream_history(history, tools)
    assert rewritten[2]["content"][0]["content"] == error.content(tools)


def test_the_tool_references_of_a_client_search_are_taken_out_and_nothing_replaces_them() -> None:
    """The found tool is in the upstream's ``tools``: the result repeats none of it (as
    llama-server, which renders a ``tool_reference`` as nothing)."""
    tools = catalog()
    history = client_search_history()
    history[2]["content"][0]["content"].insert(0, {"type": "text", "text": "1 match"})
    rewritten = upstream_history(history, tools)
    (result,) = rewritten[2]["content"]
    assert result["content"] == [{"type": "text", "text": "1 match"}]
    alone = upstream_history(client_search_history(), tools)
    assert alone[2]["content"][0]["content"] == []


def outside_the_block(name: str) -> bool:
    """A block of the client's own tools: every MCP tool is outside it."""
    return name.startswith("mcp__")


def test_where_tools_are_delivered_a_search_result_carries_the_definitions_it_found() -> None:
    """The result the upstream reads where the search stands, the same text each time:
    the emulated search's JSON with the found tool's definition, the client's own
    search's as one text block where its references stood."""
    tools = catalog()

    def deliver(content: str, found: list[str]) -> str:
        return delivering(content, [name for name in found if outside_the_block(name)], tools)

    emulated = upstream_history(server_search_history(), tools, deliver)
    text = SearchResult("regex", None, (PR_TOOL,)).content(tools)
    assert emulated[2]["content"][0]["content"] == delivering(text, [PR_TOOL], tools)
    shown = PR_TOOL.removeprefix("mcp__github__")  # shown without its namespace
    assert [tool["name"] for tool in json.loads(delivering(text, [PR_TOOL], tools))["tools"]] == [shown]
    history = client_search_history()
    history[2]["content"][0]["content"].append({"type": "text", "text": "1 match"})
    (result,) = upstream_history(history, tools, deliver)[2]["content"]
    assert result["content"] == [{"type": "text", "text": delivering("{}", [PR_TOOL], tools)},
                                 {"type": "text", "text": "1 match"}]
    in_block = upstream_history(client_search_history(), tools,
                                lambda content, found: delivering(content, [], tools))
    assert in_block[2]["content"][0]["content"] == []  # a tool the block holds: nothing


def test_server_ids_keep_the_models_suffix() -> None:
    assert client_search_id("toolu_01abc") == "srvtoolu_01abc"
    assert client_search_id("srvtoolu_9") == "srvtoolu_9"
    assert client_search_id("call_1").startswith("srvtoolu_") and len(client_search_id("call_1")) > 10


def test_the_streamed_pair_starts_the_use_empty_and_gives_its_input_whole() -> None:
    pair = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_regex",
         "input": {"query": "x"}},
        {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": {"type": "tool_search_tool_search_result", "tool_references": []}},
    ]
    events = shown_search_events(pair, 3)
    assert [(e["type"], e["index"]) for e in events] == [
        ("content_block_start", 3), ("content_block_delta", 3), ("content_block_stop", 3),
        ("content_block_start", 4), ("content_block_stop", 4),
    ]
    assert events[0]["content_block"]["input"] == {}
    assert json.loads(events[1]["delta"]["partial_json"]) == {"query": "x"}
