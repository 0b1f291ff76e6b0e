"""The scripted agent behaviour of the upstream (benchmarks/support/agent_behaviour.py) on
the request shapes no real client of tests/agents sends: Anthropic's server search tools,
toolprune's ``load_tools``, a Responses namespace; and its answers once the result is in."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.support.agent_behaviour import (
    NO_TOOL_ANSWER,
    SIDE_ANSWER,
    AgentBehaviour,
    Step,
    Task,
    UserTurn,
)
from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import Chat, Recorded

PROMPT = {"role": "user", "content": "List the open pull requests in octo/widgets"}
LIST_SCHEMA = {"type": "object", "properties": {"owner": {"type": "string"},
               "repo": {"type": "string"}, "state": {"type": "string"}},
               "required": ["owner", "repo"]}


def reply(path: str, body: dict[str, Any]) -> Any:
    return AgentBehaviour()(Recorded("POST", path, "", [], json.dumps(body).encode()))


def test_an_anthropic_server_search_is_run_and_the_found_tool_called_in_one_message() -> None:
    body = {"model": "m", "stream": True, "messages": [PROMPT], "tools": [
        {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
        {"name": "mcp__github__list_pull_requests", "input_schema": LIST_SCHEMA,
         "defer_loading": True},
    ]}
    answer = reply("/v1/messages", body)
    assert isinstance(answer, Message)
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in answer.render(body, 0)]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [block["type"] for block in starts] == [
        "server_tool_use", "tool_search_tool_result", "tool_use"]
    references = starts[1]["content"]["tool_references"]
    assert references == [{"type": "tool_reference", "tool_name": "mcp__github__list_pull_requests"}]
    streamed = "".join(e["delta"]["partial_json"] for e in events
                       if e["type"] == "content_block_delta" and e["index"] == 2)
    assert json.loads(streamed) == {"owner": "octo", "repo": "widgets", "state": "open"}


def test_load_tools_gets_the_needed_name_from_its_enum() -> None:
    names = ["mcp__github__list_issues", "mcp__github__list_pull_requests"]
    load = {"type": "function", "function": {"name": "load_tools", "description": "Load tools.",
            "parameters": {"type": "object", "properties": {"names": {
                "type": "array", "items": {"type": "string", "enum": names}}},
                "required": ["names"]}}}
    answer = reply("/v1/chat/completions", {"model": "m", "messages": [PROMPT], "tools": [load]})
    assert isinstance(answer, Chat) and answer.tool_calls is not None
    (call,) = answer.tool_calls
    assert call["name"] == "load_tools"
    assert json.loads(call["arguments"]) == {"names": ["mcp__github__list_pull_requests"]}


def test_a_namespace_member_is_called_with_its_namespace() -> None:
    namespace = {"type": "namespace", "name": "mcp__github", "tools": [
        {"type": "function", "name": "list_pull_requests", "parameters": LIST_SCHEMA}]}
    answer = reply("/v1/responses", {"model": "m", "input": "List the open pull requests",
                                     "tools": [namespace]})
    assert isinstance(answer, Responses) and answer.calls is not None
    (call,) = answer.calls
    assert (call["name"], call["namespace"]) == ("list_pull_requests", "mcp__github")


def test_the_result_in_the_history_is_quoted_and_a_tool_less_request_gets_a_short_answer() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "github_list_pull_requests", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "#7 Fix the frobnicator"}
    answered = reply("/v1/chat/completions", {"model": "m", "messages": [PROMPT, call, result],
                                              "tools": []})
    assert isinstance(answered, Chat) and "#7 Fix the frobnicator" in (answered.content or "")
    side = reply("/v1/chat/completions", {"model": "m", "messages": [PROMPT]})
    assert isinstance(side, Chat) and side.content == SIDE_ANSWER


def test_searches_that_never_find_the_tool_end_in_a_no_tool_answer() -> None:
    search = {"type": "function", "function": {"name": "search_tools", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
    history = [PROMPT]
    for n in range(2):
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"s{n}", "type": "function",
             "function": {"name": "search_tools", "arguments": "{}"}}]})
        history.append({"role": "tool", "tool_call_id": f"s{n}", "content": "nothing"})
    answer = reply("/v1/chat/completions", {"model": "m", "messages": history, "tools": [search]})
    assert isinstance(answer, Chat) and answer.content == NO_TOOL_ANSWER


def test_a_task_with_a_query_searches_by_it_whatever_the_request_names() -> None:
    """A model that knows the tool's own name searches by it (issue 43), even where the
    request lists the client's full name."""
    search = {"type": "function", "function": {
        "name": "search_tools", "description": "Likely useful now:\n- github_search_code",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}}
    body = {"model": "m", "messages": [PROMPT], "tools": [search]}
    task = Task(turns=(UserTurn(steps=(Step("search_code", query="search_code"),)),))
    answer = AgentBehaviour(task)(Recorded("POST", "/v1/chat/completions", "", [],
                                           json.dumps(body).encode()))
    assert isinstance(answer, Chat) and answer.tool_calls is not None
    assert json.loads(answer.tool_calls[0]["arguments"]) == {"query": "search_code"}
    default = reply("/v1/chat/completions", {**body, "tools": [{**search, "function": {
        **search["function"], "description": "- github_list_pull_requests"}}]})
    assert isinstance(default, Chat) and default.tool_calls is not None
    assert json.loads(default.tool_calls[0]["arguments"]) == {"query": "github_list_pull_requests"}


def test_a_tool_delivered_in_the_conversation_is_called_through_the_bridge() -> None:
    bridge = {"type": "function", "function": {"name": "call_tool", "description": "Call it.",
              "parameters": {"type": "object", "properties": {"name": {"type": "string"},
                             "arguments": {"type": "object"}}}}}
    search = {"type": "function", "function": {"name": "search_tools", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}}
    delivered = {"loaded": ["mcp__github__list_pull_requests"], "tools": [
        {"name": "mcp__github__list_pull_requests", "description": "List PRs.",
         "parameters": LIST_SCHEMA}]}
    history = [PROMPT,
               {"role": "assistant", "content": None, "tool_calls": [{"id": "s1", "type": "function",
                "function": {"name": "search_tools", "arguments": '{"query": "pull requests"}'}}]},
               {"role": "tool", "tool_call_id": "s1", "content": json.dumps(delivered)}]
    answer = reply("/v1/chat/completions", {"model": "m", "messages": history,
                                            "tools": [search, bridge]})
    assert isinstance(answer, Chat) and answer.tool_calls is not None
    (call,) = answer.tool_calls
    assert call["name"] == "call_tool" and json.loads(call["arguments"]) == {
        "name": "mcp__github__list_pull_requests",
        "arguments": {"owner": "octo", "repo": "widgets", "state": "open"}}
    done = [*history, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": "call_tool",
                                                            "arguments": call["arguments"]}}]},
            {"role": "tool", "tool_call_id": call["id"], "content": "#4711 Fix the sprocket"}]
    answered = reply("/v1/chat/completions", {"model": "m", "messages": done,
                                              "tools": [search, bridge]})
    assert isinstance(answered, Chat) and "#4711 Fix the sprocket" in (answered.content or "")
