"""The bridge of tools delivered in the conversation (selection/clients/bridge.py): results
that deliver definitions; the bridge offered beside the meta-tools; a real call written back.
Reading a bridge call is tests/unit/test_bridge_calls.py."""

from __future__ import annotations

import json

from selection.catalog.catalog import parse_tools
from selection.clients.bridge import (
    CALL_TOOL,
    bridge_arguments,
    delivered_results,
    delivering,
    with_bridge,
)
from selection.clients.meta_tools import build_meta_tools, execute_load, search_outcome

SCHEMA = {"type": "object", "properties": {"owner": {"type": "string"}, "count": {"type": "integer"}},
          "required": ["owner"]}
CATALOG = parse_tools([
    {"type": "function", "function": {"name": "list_issues", "description": "List issues.",
                                      "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "create_issue", "description": "Create an issue.",
                                      "parameters": {"type": "object", "properties": {}}}},
])


def test_a_load_result_delivers_the_definitions_outside_the_block_each_time() -> None:
    outcome = execute_load(["list_issues", "create_issue"], CATALOG, forwarded={"create_issue"})
    delivered: list[str] = []
    (first,) = delivered_results([outcome.content], [outcome.admit], {"create_issue"}, delivered,
                                 CATALOG)
    result = json.loads(first)
    assert [tool["name"] for tool in result["tools"]] == ["list_issues"]
    assert result["tools"][0]["parameters"] == SCHEMA
    assert "call_tool" in result["note"] and "already_available" in result["note"]
    assert delivered == ["list_issues"]
    (again,) = delivered_results([outcome.content], [outcome.admit], {"create_issue"}, delivered,
                                 CATALOG)
    assert [tool["name"] for tool in json.loads(again)["tools"]] == ["list_issues"]  # each time
    assert delivered == ["list_issues"]


def test_a_search_result_lists_a_delivered_find_once_and_compactly() -> None:
    """A find whose definition the result delivers is not listed under ``found`` again; a
    find the block holds stays there, to be called directly. The text has no space after
    a separator, and non-ASCII is written as it is."""
    catalog = parse_tools([
        {"type": "function", "function": {"name": "list_issues", "description": "Liste les tickets.",
                                          "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "create_issue", "description": "Crée un ticket.",
                                          "parameters": {"type": "object", "properties": {}}}},
    ])
    outcome = search_outcome(["create_issue", "list_issues"], catalog, forwarded={"list_issues"})
    text = delivering(outcome.content, outcome.admit, catalog)
    result = json.loads(text)
    assert [tool["name"] for tool in result["tools"]] == ["create_issue"]
    assert result["found"] == [{"name": "list_issues", "purpose": "Liste les tickets"}]
    assert 'Those under "found" are: call them directly.' in result["note"]
    assert text == json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    assert "Crée" in text
    alone = json.loads(delivering(search_outcome(["create_issue"], catalog, set()).content,
                                  ["create_issue"], catalog))
    assert "found" not in alone and '"found"' not in alone["note"]


def test_a_result_that_delivers_nothing_is_left_as_it_is() -> None:
    assert delivering('{"loaded": []}', [], CATALOG) == '{"loaded": []}'
    assert delivering("not json", ["list_issues"], CATALOG) == "not json"


def test_the_bridge_follows_the_meta_tools_and_is_renamed_on_a_clash() -> None:
    meta = with_bridge(build_meta_tools(CATALOG, set(), [], search=False), CATALOG)
    assert meta.bridge == CALL_TOOL and meta.names == {"load_tools"}
    assert [d["function"]["name"] for d in meta.definitions] == ["load_tools", CALL_TOOL]
    clash = parse_tools([{"type": "function", "function": {"name": CALL_TOOL}}])
    alone = with_bridge(None, clash)
    assert alone.bridge == "toolprune_call_tool" and alone.names == set()


def test_a_real_call_is_written_back_as_the_bridge_calls_arguments() -> None:
    assert json.loads(bridge_arguments("list_issues", '{"owner": "o"}')) == {
        "name": "list_issues", "arguments": {"owner": "o"}}
    assert json.loads(bridge_arguments("list_issues", "broken")) == {
        "name": "list_issues", "arguments": "broken"}
