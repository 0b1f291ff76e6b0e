"""The name a delivered tool is shown by (selection/clients/shown_names.py): its own name
without the client's namespace where that names one tool; delivered so, read back from a
bridge call as no repair, written back so in the history, and named so by a refusal."""

from __future__ import annotations

import json
from typing import Any

from selection.catalog.catalog import parse_tools
from selection.clients.bridge import delivering
from selection.clients.bridge_calls import bridge_targets, read_bridge_call
from selection.clients.meta_tools import execute_load
from selection.clients.shown_names import shown_name, shown_names, tool_named, tool_shown_as

READ = {"type": "object", "required": ["number"], "properties": {"number": {"type": "integer"}}}


def catalog(*names: str) -> Any:
    return parse_tools([{"type": "function", "function": {
        "name": name, "description": f"{name} does one thing.", "parameters": READ}}
        for name in names])


def test_a_namespaced_tool_is_shown_by_its_own_name() -> None:
    tools = catalog("mcp__github__issue_read", "mcp__github__list_issues")
    assert shown_name("mcp__github__issue_read", tools) == "issue_read"
    assert tool_shown_as("issue_read", tools) == "mcp__github__issue_read"
    opencode = catalog("github_issue_read", "github_list_issues", "browser_click", "browser_type")
    assert shown_name("github_issue_read", opencode) == "github_issue_read"  # no separator
    assert shown_name("browser_click", opencode) == "browser_click"  # its own name


def test_an_own_name_two_tools_share_keeps_its_namespace() -> None:
    tools = catalog("mcp__github__search_code", "mcp__gitlab__search_code", "mcp__github__get_me")
    assert shown_name("mcp__github__search_code", tools) == "github__search_code"
    assert shown_name("mcp__gitlab__search_code", tools) == "gitlab__search_code"
    assert shown_name("mcp__github__get_me", tools) == "get_me"


def test_a_name_a_tool_has_a_meta_name_or_one_word_is_not_taken() -> None:
    tools = catalog("mcp__github__issue_read", "issue_read", "mcp__x__load_tools",
                    "mcp__git__status", "plain_name")
    shown = shown_names(tools).shown
    assert shown["mcp__github__issue_read"] == "github__issue_read"
    assert shown_name("mcp__x__load_tools", tools) == "x__load_tools"
    assert shown_name("mcp__git__status", tools) == "git__status"  # "status" says too little
    assert shown_name("plain_name", tools) == "plain_name" and "plain_name" not in shown


def test_a_delivery_shows_the_own_name_and_a_bridge_call_of_it_is_no_repair() -> None:
    tools = catalog("mcp__github__issue_read", "mcp__github__list_issues")
    outcome = execute_load(["mcp__github__issue_read"], tools, forwarded=set())
    result = json.loads(delivering(outcome.content, outcome.admit, tools))
    assert result["loaded"] == ["issue_read"]
    assert [tool["name"] for tool in result["tools"]] == ["issue_read"]
    targets = bridge_targets(tools, "call_tool", block=["mcp__github__list_issues"])
    call = read_bridge_call('{"name": "issue_read", "arguments": {"number": 7}}', targets)
    assert (call.name, call.repairs, json.loads(call.arguments)) == (
        "mcp__github__issue_read", (), {"number": 7})
    full = read_bridge_call('{"name": "mcp__github__issue_read", "arguments": {"number": 7}}', targets)
    assert (full.name, full.repairs) == ("mcp__github__issue_read", ())


def test_a_refusal_names_a_delivered_tool_as_shown_and_a_block_tool_by_its_name() -> None:
    tools = catalog("mcp__github__issue_read", "mcp__github__list_issues")
    targets = bridge_targets(tools, "call_tool", block=["mcp__github__list_issues"])
    refused = read_bridge_call('{"name": "issue_read", "arguments": {}}', targets)
    assert refused.refusal == "off_schema"
    assert json.loads(refused.error or "{}")["call_it_so"]["name"] == "issue_read"
    in_block = read_bridge_call('{"name": "mcp__github__list_issues", "arguments": {}}', targets)
    assert json.loads(in_block.error or "{}")["call_it_so"]["name"] == "mcp__github__list_issues"


def test_a_name_the_bridge_reads_alike_is_taken_and_odd_names_are_not_shown() -> None:
    """The bridge reads ``Issue_Read`` and ``issue-read`` as one name, so a tool with
    either name (or one shown so) keeps the other's own name off; a shown name is written
    like a function name."""
    for other in ("issue-read", "IssueRead", "mcp__jira__Issue_Read"):
        tools = catalog("mcp__github__issue_read", other)
        assert shown_name("mcp__github__issue_read", tools) == "github__issue_read", other
    assert shown_name("mcp__jira__Issue_Read", catalog("mcp__jira__Issue_Read", "issue_read")) == (
        "jira__Issue_Read")
    odd = catalog("mcp__github__ issue_read", "mcp__github__issue_read.", "mcp__github__get_me")
    assert shown_name("mcp__github__ issue_read", odd) == "mcp__github__ issue_read"
    assert shown_name("mcp__github__issue_read.", odd) == "mcp__github__issue_read."
    assert shown_name("mcp__github__get_me", odd) == "get_me"


def test_a_name_shown_earlier_keeps_its_tool_when_the_catalogue_grows_a_namesake() -> None:
    grown = catalog("mcp__github__issue_read", "mcp__gitlab__issue_read")
    assert shown_name("mcp__github__issue_read", grown) == "github__issue_read"
    targets = bridge_targets(grown, "call_tool", delivered=["mcp__github__issue_read"])
    call = read_bridge_call('{"name": "issue_read", "arguments": {"number": 7}}', targets)
    assert (call.name, call.repairs) == ("mcp__github__issue_read", ())
    fresh = read_bridge_call('{"name": "issue_read", "arguments": {"number": 7}}',
                             bridge_targets(grown, "call_tool"))
    assert fresh.refusal == "ambiguous_name"
    assert json.loads(fresh.error or "{}")["did_you_mean"] == ["github__issue_read",
                                                              "gitlab__issue_read"]
    gone = bridge_targets(catalog("mcp__gitlab__list_labels", "mcp__gitlab__get_me"), "call_tool",
                          delivered=["mcp__github__issue_read"])  # the client dropped it
    assert read_bridge_call('{"name": "issue_read", "arguments": {"number": 7}}', gone).refusal == (
        "unknown_name")


def test_refusals_and_load_tools_speak_of_a_delivered_tool_as_shown() -> None:
    tools = catalog("mcp__github__issue_read", "mcp__github__list_issues")
    targets = bridge_targets(tools, "call_tool", block=["mcp__github__list_issues"])
    unknown = json.loads(read_bridge_call('{"name": "isue_reed", "arguments": {}}', targets).error or "{}")
    assert "issue_read" in unknown["did_you_mean"] and "mcp__github__issue_read" not in unknown["did_you_mean"]
    assert "mcp__github__list_issues" in unknown["did_you_mean"]  # the block's, by its name
    off = json.loads(read_bridge_call('{"name": "issue_read", "arguments": {"number": "x7"}}',
                                      targets).error or "{}")
    assert off["error"] == "the arguments do not fit issue_read's parameters"
    assert tool_named("issue_read", tools) == "mcp__github__issue_read"
    assert tool_named("mcp__github__list_issues", tools) == "mcp__github__list_issues"
    assert tool_named("nothing_here", tools) == "nothing_here"
