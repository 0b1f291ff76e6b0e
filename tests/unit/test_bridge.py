"""The bridge of tools delivered in the conversation (selection/clients/bridge.py): a bridge
call read into the client's call or the error the model is told; results that deliver
definitions; the bridge offered beside the meta-tools; a real call written back."""

from __future__ import annotations

import json

import pytest

from selection.catalog.catalog import parse_tools
from selection.clients.bridge import (
    CALL_TOOL,
    bridge_arguments,
    delivered_results,
    delivering,
    read_bridge_call,
    schema_problems,
    with_bridge,
)
from selection.clients.meta_tools import build_meta_tools, execute_load

SCHEMA = {"type": "object", "properties": {"owner": {"type": "string"}, "count": {"type": "integer"}},
          "required": ["owner"]}
CATALOG = parse_tools([
    {"type": "function", "function": {"name": "list_issues", "description": "List issues.",
                                      "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "create_issue", "description": "Create an issue.",
                                      "parameters": {"type": "object", "properties": {}}}},
])


def call(name: object, arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def test_a_call_that_fits_becomes_the_clients_call() -> None:
    made = read_bridge_call(call("list_issues", {"owner": "octo", "count": 3}), CATALOG)
    assert made.ok and made.name == "list_issues"
    assert json.loads(made.arguments) == {"owner": "octo", "count": 3}


def test_arguments_written_as_a_json_string_are_read_as_the_object() -> None:
    made = read_bridge_call(call("list_issues", json.dumps({"owner": "octo"})), CATALOG)
    assert made.ok and json.loads(made.arguments) == {"owner": "octo"}


@pytest.mark.parametrize(("arguments", "told"), [
    ("{not json", "not valid JSON"),
    (json.dumps(["list_issues"]), "arguments must be"),
    (call("list_isues", {"owner": "o"}), "no tool is named"),
    (call("list_issues", "owner=o"), "must be a JSON object"),
    (call("list_issues", {"count": "three"}), "do not fit"),
])
def test_a_call_that_cannot_be_made_tells_the_model_why_and_how(arguments: str, told: str) -> None:
    refused = read_bridge_call(arguments, CATALOG, bridge="toolprune_call_tool")
    assert not refused.ok
    answer = json.loads(refused.error or "")
    assert told in answer["error"] and "toolprune_call_tool" in answer["how_to_call"]


def test_an_unknown_name_gets_the_closest_names_and_bad_arguments_the_schema() -> None:
    unknown = json.loads(read_bridge_call(call("list_isues", {}), CATALOG).error or "")
    assert unknown["did_you_mean"][0] == "list_issues"
    off = json.loads(read_bridge_call(call("list_issues", {"count": "x"}), CATALOG).error or "")
    assert len(off["problems"]) == 2 and off["parameters"] == SCHEMA  # owner missing, count a string


def test_a_schema_that_is_not_valid_json_schema_checks_nothing() -> None:
    assert schema_problems({"type": "no such type"}, {"a": 1}) == []
    assert schema_problems(SCHEMA, {"owner": 1}) == ["owner: 1 is not of type 'string'"]


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
