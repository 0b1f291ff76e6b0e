"""Reading a call of the ``call_tool`` bridge (selection/clients/bridge_calls.py,
argument_repair.py): the shapes models write, repaired where one reading exists and refused
with a lesson where none does; a refusal never shows the malformed shape back.

The corpus: the correct shape and the wrong ones reported by projects that run such bridges
(hermes-agent's telemetry, Lexus2016/hermes-agent-evolution#1786; openclaw#142304 and
#138141; stacklok/toolhive#5891; hermes-agent PR #101004 and #52220; cline#11803), each
written here against a small catalogue of our own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from selection.catalog.catalog import parse_tools
from selection.clients.argument_repair import coerce_strings, object_text, schema_problems, skeleton
from selection.clients.bridge_calls import BridgeTargets, bridge_targets, read_bridge_call
from selection.clients.meta_tools import build_meta_tools

ISSUES = {"type": "object", "required": ["owner", "repo"], "properties": {
    "owner": {"type": "string"}, "repo": {"type": "string"}, "count": {"type": "integer"},
    "labels": {"type": "array", "items": {"type": "string"}}, "open": {"type": "boolean"},
    "since": {"type": ["string", "integer"]}}}
FILE = {"type": "object", "required": ["path"], "properties": {
    "path": {"type": "string"}, "arguments": {"type": "string"}}}


def tool(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": parameters}}


CATALOG = parse_tools([
    tool("list_issues", ISSUES),
    tool("get_file", FILE),
    tool("create_issue", {"type": "object", "required": ["title"],
                          "properties": {"title": {"type": "string"}}}),
    tool("github__search_code", {"type": "object", "properties": {"query": {"type": "string"}}}),
    tool("gitlab__search_code", {"type": "object", "properties": {"query": {"type": "string"}}}),
])
META = build_meta_tools(CATALOG, set(), [], search=True)
TARGETS = bridge_targets(CATALOG, "call_tool", META, block=["create_issue"],
                         menu=["mcp__notion__search_pages"])
OWNER = {"owner": "octo", "repo": "widgets"}


def read(value: Any) -> Any:
    return read_bridge_call(value if isinstance(value, str) else json.dumps(value), TARGETS)


#: (shape, what the model wrote, the call made, the repairs)
TAKEN = [
    ("correct", {"name": "list_issues", "arguments": OWNER}, ("list_issues", OWNER), ()),
    ("arguments as JSON text", {"name": "list_issues", "arguments": json.dumps(OWNER)},
     ("list_issues", OWNER), ("arguments_text",)),
    ("arguments as a Python literal", {"name": "list_issues", "arguments": str(OWNER)},
     ("list_issues", OWNER), ("broken_json",)),
    ("the call as slightly broken JSON", '{"name": "list_issues", "arguments": {"owner": "octo", "repo": "widgets",}}',
     ("list_issues", OWNER), ("broken_json",)),
    ("the call as JSON text of JSON text", json.dumps(json.dumps({"name": "list_issues", "arguments": OWNER})),
     ("list_issues", OWNER), ("arguments_text",)),
    ("the bridge nested in itself", {"name": "call_tool", "arguments": {"name": "list_issues", "arguments": OWNER}},
     ("list_issues", OWNER), ("nested_bridge",)),
    ("arguments nested twice", {"name": "list_issues", "arguments": {"arguments": OWNER}},
     ("list_issues", OWNER), ("arguments_nested",)),
    ("the bridge's shape repeated under arguments",
     {"name": "list_issues", "arguments": {"name": "list_issues", "arguments": OWNER}},
     ("list_issues", OWNER), ("arguments_nested",)),
    ("tool_name for name", {"tool_name": "list_issues", "arguments": OWNER}, ("list_issues", OWNER), ("name_key",)),
    ("tool for name", {"tool": "list_issues", "arguments": OWNER}, ("list_issues", OWNER), ("name_key",)),
    ("a function object", {"function": {"name": "list_issues", "arguments": OWNER}},
     ("list_issues", OWNER), ("name_key",)),
    ("parameters for arguments", {"name": "list_issues", "parameters": OWNER},
     ("list_issues", OWNER), ("arguments_key",)),
    ("input for arguments", {"name": "list_issues", "input": OWNER}, ("list_issues", OWNER), ("arguments_key",)),
    ("arguments spread beside name", {"name": "list_issues", **OWNER}, ("list_issues", OWNER), ("spread_arguments",)),
    ("part spread, part under arguments", {"name": "list_issues", "owner": "octo", "arguments": {"repo": "widgets"}},
     ("list_issues", OWNER), ("spread_arguments",)),
    ("values written as strings",
     {"name": "list_issues", "arguments": {**OWNER, "count": "30", "labels": '["bug"]', "open": "true"}},
     ("list_issues", {**OWNER, "count": 30, "labels": ["bug"], "open": True}), ("string_values",)),
    ("a namespace the catalogue does not write", {"name": "mcp__github__list_issues", "arguments": OWNER},
     ("list_issues", OWNER), ("name_spelling",)),
    ("the name in words", {"name": "List Issues", "arguments": OWNER}, ("list_issues", OWNER), ("name_spelling",)),
    ("a meta-tool through the bridge", {"name": "search_tools", "arguments": {"query": "issues"}},
     ("search_tools", {"query": "issues"}), ("meta_tool",)),
    ("a tool of the block through the bridge", {"name": "create_issue", "arguments": {"title": "Bug"}},
     ("create_issue", {"title": "Bug"}), ("block_tool",)),
    ("a tool the client defers by name", {"name": "mcp__notion__search_pages", "arguments": {"q": "x"}},
     ("mcp__notion__search_pages", {"q": "x"}), ("deferred_tool",)),
    ("envelope keys copied beside the call", {"type": "function", "name": "list_issues", "arguments": OWNER},
     ("list_issues", OWNER), ()),
    ("several at once", {"tool_name": "mcp__github__list_issues", "parameters": json.dumps({**OWNER, "count": "3"})},
     ("list_issues", {**OWNER, "count": 3}), ("name_key", "name_spelling", "arguments_key", "arguments_text",
                                               "string_values")),
]


@pytest.mark.parametrize(("shape", "written", "made", "repairs"), TAKEN, ids=[c[0] for c in TAKEN])
def test_a_shape_with_one_reading_is_taken_at_once(
    shape: str, written: Any, made: tuple[str, dict[str, Any]], repairs: tuple[str, ...]
) -> None:
    call = read(written)
    assert call.ok, call.error
    assert (call.name, json.loads(call.arguments)) == made
    assert call.repairs == repairs
    assert call.runs_meta == (made[0] == "search_tools")
    assert call.client_call == (made[0] != "search_tools")
    assert call.report() == {"made": made[0], "repairs": list(repairs)}


#: (shape, what the model wrote, the refusal's kind, words of its one-line error)
REFUSED = [
    ("cut off by the output limit", '{"name": "list_issues", "arguments": {"owner": "octo", "repo": "wid',
     "unreadable", "not a JSON object"),
    ("not JSON at all", "list_issues owner=octo", "unreadable", "not a JSON object"),
    ("a list", json.dumps(["list_issues", OWNER]), "unreadable", "not a JSON object"),
    ("no name", {"arguments": OWNER}, "no_name", "names no tool"),
    ("a name that is not a string", {"name": 7, "arguments": OWNER}, "no_name", "names no tool"),
    ("an unknown name", {"name": "list_isues_now", "arguments": OWNER}, "unknown_name", "no tool is named"),
    ("a name two tools share", {"name": "search_code", "arguments": {}}, "ambiguous_name", "several tools"),
    ("the bridge nested twice", {"name": "call_tool", "arguments": {"name": "call_tool", "arguments": {
        "name": "list_issues", "arguments": OWNER}}}, "nested_bridge", "through itself"),
    ("arguments that are no object", {"name": "list_issues", "arguments": ["octo"]},
     "arguments_not_object", "must be a JSON object"),
    ("a stray key that is no parameter", {"name": "list_issues", "arguments": OWNER, "verbose": True},
     "stray_keys", "'verbose' is not a parameter of list_issues"),
    ("a key given twice", {"name": "list_issues", "arguments": OWNER, "owner": "other"},
     "stray_keys", "given twice"),
    ("off the schema", {"name": "list_issues", "arguments": {"owner": "octo", "count": "three"}},
     "off_schema", "do not fit list_issues's parameters"),
    ("a parameter named arguments is not unwrapped", {"name": "get_file", "arguments": {"arguments": {"path": "a"}}},
     "off_schema", "do not fit get_file's parameters"),
]


@pytest.mark.parametrize(("shape", "written", "kind", "told"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_shape_without_one_reading_is_refused_with_a_lesson(
    shape: str, written: Any, kind: str, told: str
) -> None:
    call = read(written)
    assert not call.ok and not call.client_call and call.refusal == kind
    answer = json.loads(call.error or "")
    assert told in answer["error"] and "\n" not in answer["error"]
    assert set(answer["call_it_so"]) == {"name", "arguments"}
    assert isinstance(answer["call_it_so"]["arguments"], dict)
    assert "call_tool" in answer["how_to_call"]
    assert call.report()["refused"] == kind


def test_a_refusal_shows_the_models_own_call_in_the_valid_shape_never_the_malformed_one() -> None:
    off = json.loads(read({"name": "list_issues", "arguments": {"owner": "octo", "count": "three"}}).error or "")
    assert off["call_it_so"] == {"name": "list_issues", "arguments": {"owner": "octo", "repo": "<string>"}}
    assert off["parameters"] == ISSUES and len(off["problems"]) == 2
    nested = json.loads(read({"name": "get_file", "arguments": {"arguments": {"path": "a"}}}).error or "")
    assert nested["call_it_so"] == {"name": "get_file", "arguments": {"path": "<string>"}}
    assert '"arguments": {"arguments"' not in json.dumps(nested)
    stray = json.loads(read({"name": "list_issues", "owner": "octo", "repo": "w", "verbose": True}).error or "")
    assert stray["call_it_so"] == {"name": "list_issues", "arguments": {"owner": "octo", "repo": "w"}}


def test_an_unknown_name_gets_the_closest_names_and_keeps_its_arguments() -> None:
    unknown = json.loads(read({"name": "list_isues_now", "arguments": OWNER}).error or "")
    assert unknown["did_you_mean"][0] == "list_issues"
    assert unknown["call_it_so"] == {"name": "<one of did_you_mean>", "arguments": OWNER}
    both = json.loads(read({"name": "search_code", "arguments": {}}).error or "")
    assert both["did_you_mean"] == ["github__search_code", "gitlab__search_code"]
    missing = json.loads(read({"arguments": OWNER}).error or "")
    assert missing["call_it_so"] == {"name": "<the tool's name>", "arguments": OWNER}


def test_another_namespace_of_the_catalogue_is_not_read_as_this_one() -> None:
    """``gitlab`` is a namespace of the catalogue: ``gitlab__list_issues`` is no spelling
    of ``list_issues``, while ``mcp__github__…`` (no namespace of it) is."""
    assert read({"name": "gitlab__search", "arguments": {}}).refusal == "unknown_name"
    assert read({"name": "mcp__github__list_issues", "arguments": OWNER}).ok


def test_without_meta_tools_or_menu_a_meta_name_is_unknown() -> None:
    plain = BridgeTargets(CATALOG)
    assert read_bridge_call(json.dumps({"name": "search_tools", "arguments": {}}), plain).refusal == "unknown_name"


@pytest.mark.parametrize(("text", "value", "kind"), [
    ('{"a": 1}', {"a": 1}, "json"),
    ("{'a': True, 'b': None}", {"a": True, "b": None}, "python_literal"),
    ('{"a": 1,}', {"a": 1}, "python_literal"),
    ('{"a": 1 "b": 2}', {"a": 1, "b": 2}, "repaired_json"),
    ('{"a": 1', None, None),  # cut off: its tail is unknown
    ("{a: b, c: d, e: f}", None, None),  # too broken to be one reading
    ("{'a': (1, 2)}", {"a": [1, 2]}, "repaired_json"),  # a tuple is no JSON value: repaired
    ("[1, 2]", None, None),
])
def test_object_text_reads_json_literals_and_slightly_broken_json_only(text: str, value: Any, kind: Any) -> None:
    read_text = object_text(text)
    assert (read_text.value, read_text.kind) == (value, kind)


@pytest.mark.parametrize(("schema", "given", "coerced"), [
    ({"type": "integer"}, "30", 30),
    ({"type": "integer"}, "30.5", "30.5"),
    ({"type": "number"}, "2.5", 2.5),
    ({"type": "number"}, "1e3", 1000.0),
    ({"type": "boolean"}, "false", False),
    ({"type": "boolean"}, "no", "no"),
    ({"type": "array", "items": {"type": "integer"}}, '["1", "2"]', [1, 2]),
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, '{"n": "4"}', {"n": 4}),
    ({"type": ["string", "integer"]}, "30", "30"),  # a string is admitted: left alone
    ({}, "30", "30"),
    ({"type": ["integer", "boolean"]}, "1", 1),
])
def test_string_values_are_written_as_the_type_the_schema_wants(schema: Any, given: Any, coerced: Any) -> None:
    value, changed = coerce_strings(schema, given)
    assert value == coerced and type(value) is type(coerced) and changed == (value != given)


def test_the_skeleton_keeps_fitting_values_and_names_the_type_of_missing_ones() -> None:
    assert skeleton(ISSUES, {"owner": 3, "count": 2, "extra": 1}) == {
        "owner": "<string>", "repo": "<string>", "count": 2}
    assert schema_problems(ISSUES, {"owner": "o", "repo": "r"}) == []
