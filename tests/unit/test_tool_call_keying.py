"""The relay's tool-call keying rules (proxy/apis/chat/calls.py) and meta-calls written as text
(proxy/apis/chat/text_calls.py), one case per rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.chat.calls import CallAssembler
from proxy.apis.chat.text_calls import HOLD_LIMIT, TextCallFilter
from proxy.turn.turn import meta_call
from selection.types import BridgedCall


def is_meta(name: str | None) -> bool:
    return name == "load_tools"


def item(index: int | None = 0, call_id: Any = None, name: Any = None, arguments: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    result: dict[str, Any] = {"function": function}
    if index is not None:
        result["index"] = index
    if call_id is not None:
        result["id"] = call_id
    return result


def assemble(*deltas: list[dict[str, Any]]) -> tuple[CallAssembler, list[dict[str, Any]]]:
    calls = CallAssembler(is_meta)
    shown = [shown for delta in deltas for shown in calls.feed(0, delta)]
    return calls, shown


def summary(calls: CallAssembler) -> list[tuple[str | None, str | None, str]]:
    return [(c.upstream_id, c.name, c.arguments_text) for c in calls.calls]


def test_id_on_the_first_delta_only() -> None:
    calls, shown = assemble([item(0, "a", "f", "")], [item(0, None, None, '{"x"')], [item(0, None, None, ": 1}")])
    assert summary(calls) == [("a", "f", '{"x": 1}')]
    assert shown == [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"x"'}},
        {"index": 0, "function": {"arguments": ": 1}"}},
    ]


@pytest.mark.parametrize("empty", [None, ""])
def test_null_or_empty_ids_and_names_are_absent(empty: str | None) -> None:
    continuation = {"index": 0, "id": empty, "function": {"name": empty, "arguments": "{}"}}
    calls, _ = assemble([item(0, "a", "f", "")], [continuation])
    assert summary(calls) == [("a", "f", "{}")]


def test_a_repeated_id_continues_its_call() -> None:
    calls, _ = assemble([item(0, "0", "f", "")], [item(0, "0", None, "{}")])
    assert summary(calls) == [("0", "f", "{}")]


def test_a_new_id_at_a_used_index_opens_a_new_call() -> None:
    calls, shown = assemble([item(0, "A", "load_tools", '{"names": []}')], [item(0, "B", "g", '{"y": 2}')])
    assert summary(calls) == [("A", "load_tools", '{"names": []}'), ("B", "g", '{"y": 2}')]
    assert [s["index"] for s in shown] == [0] and shown[0]["id"] == "B"


def test_a_late_id_is_adopted_by_an_id_less_call() -> None:
    calls, _ = assemble([item(0, None, None, '{"a"')], [item(0, "late", "f", ": 1}")])
    assert summary(calls) == [("late", "f", '{"a": 1}')]


def test_a_different_name_without_an_id_opens_a_new_call() -> None:
    calls, shown = assemble([item(0, None, "f", "{}")], [item(0, None, "g", "{}")])
    assert summary(calls) == [(None, "f", "{}"), (None, "g", "{}")]
    assert [s["index"] for s in shown] == [0, 1] and shown[0]["id"] != shown[1]["id"]


def test_a_repeated_name_is_not_a_fragment() -> None:
    calls, _ = assemble([item(0, "a", "f", '{"x"')], [item(0, None, "f", ": 1}")])
    assert summary(calls) == [("a", "f", '{"x": 1}')]


def test_a_missing_index_is_the_position_in_the_list() -> None:
    calls, shown = assemble([item(None, "a", "f", "{}"), item(None, "b", "g", "{}")])
    assert [c.index for c in calls.calls] == [0, 1] and [s["index"] for s in shown] == [0, 1]


def test_object_arguments_are_serialised() -> None:
    calls, _ = assemble([item(0, "a", "f", {"x": [1]})])
    assert calls.calls[0].arguments_text == '{"x": [1]}'


def test_real_calls_are_renumbered_after_hidden_meta_calls() -> None:
    calls, shown = assemble([item(0, "m", "load_tools", "{}"), item(1, "r", "g", "{}")])
    assert shown == [{"index": 0, "id": "r", "type": "function", "function": {"name": "g", "arguments": "{}"}}]
    assert [c.name for c in calls.meta_calls()] == ["load_tools"]


def test_arguments_before_the_name_are_held_then_shown_whole() -> None:
    calls, shown = assemble([item(0, "a", None, '{"x"')], [item(0, None, "g", ": 1}")])
    assert shown == [{"index": 0, "id": "a", "type": "function", "function": {"name": "g", "arguments": '{"x": 1}'}}]


def test_a_call_whose_name_never_came_is_never_shown() -> None:
    calls, shown = assemble([item(0, "a", None, "{}")])
    assert shown == [] and [call.upstream_id for call in calls.unnamed()] == ["a"]
    assert calls.real_calls() == [] and calls.meta_calls() == []


@pytest.mark.parametrize(
    ("arguments", "json_text", "problem"),
    [
        ('{"names": ["a"]}', '{"names": ["a"]}', None),
        ('{"names": ["a"', "{}", "cut off"),
        ("{'names': ['a']}", "{}", "not valid JSON"),
        ('""', "{}", "not a JSON object"),
        ("", "{}", "no arguments"),
    ],
)
def test_meta_call_arguments_are_always_json_objects(arguments: str, json_text: str, problem: str | None) -> None:
    call = meta_call("c", "load_tools", arguments)
    assert call.arguments == json_text
    assert (call.problem is None) if problem is None else (problem in call.problem)


def run_filter(*pieces: str) -> tuple[str, list[tuple[str, str]]]:
    text_filter = TextCallFilter(is_meta)
    shown = "".join(text_filter.feed(piece) for piece in pieces) + text_filter.end()
    return shown, [(c.name, c.arguments) for c in text_filter.calls]


def test_a_tool_call_element_naming_a_meta_tool_is_taken_out() -> None:
    shown, calls = run_filter("Hi <tool", '_call>{"name": "load_tools", "arguments": {"names": ["a"]}}', "</tool_call> bye")
    assert shown == "Hi  bye" and calls == [("load_tools", '{"names": ["a"]}')]


def test_a_bare_json_call_with_parameters_is_taken_out() -> None:
    shown, calls = run_filter('{"name": "load_', 'tools", "parameters": {"names": ["a"]}}')
    assert shown == "" and calls == [("load_tools", '{"names": ["a"]}')]


@pytest.mark.parametrize(
    "pieces",
    [
        ('<tool_call>{"name": "other", "arguments": {}}</tool_call>',),
        ('{"a": 1}', " more"),
        ("x < y and <tool",),
        ("  ", "hello"),
    ],
)
def test_other_text_is_shown_as_written(pieces: tuple[str, ...]) -> None:
    assert run_filter(*pieces) == ("".join(pieces), [])


def test_other_calls_are_released_as_soon_as_their_name_shows() -> None:
    text_filter = TextCallFilter(is_meta)
    assert text_filter.feed('<tool_call>{"name": "other", "argu') == '<tool_call>{"name": "other", "argu'


def test_held_text_is_bounded() -> None:
    text_filter = TextCallFilter(is_meta)
    assert text_filter.feed("<tool_call>" + "x" * HOLD_LIMIT).startswith("<tool_call>")


def test_a_cut_off_meta_call_in_text_is_taken_out_with_no_arguments() -> None:
    assert run_filter('<tool_call>{"name": "load_tools", "arguments": {"names": ["get_') == ("", [("load_tools", "")])


def is_bridge(name: str | None) -> bool:
    return name == "call_tool"


def resolve(call_id: str, arguments: str) -> BridgedCall:
    value = json.loads(arguments)
    if value["name"] == "nope":
        return BridgedCall("nope", "{}", '{"error": "no tool is named nope"}')
    return BridgedCall(value["name"], json.dumps(value["arguments"]))


def test_a_bridge_call_is_held_and_shown_as_the_call_it_stands_for_in_the_models_order() -> None:
    calls = CallAssembler(is_meta, is_bridge)
    shown = calls.feed(0, [item(0, "a", "first", '{"x": 1}')])
    shown += calls.feed(0, [item(1, "b", "call_tool", '{"name": "real", ')])
    shown += calls.feed(0, [item(1, None, None, '"arguments": {"y": 2}}')])
    shown += calls.feed(0, [item(2, "c", "after", "{}")])
    assert [s.get("id") for s in shown] == ["a"]  # the bridge and every call after it are held
    held = calls.resolve_bridges(resolve)
    assert [(choice, s["index"], s["id"], s["function"]) for choice, s in held] == [
        (0, 1, "b", {"name": "real", "arguments": '{"y": 2}'}),
        (0, 2, "c", {"name": "after", "arguments": "{}"}),
    ]
    assert [c.name for c in calls.real_calls()] == ["first", "real", "after"]


def test_a_bridge_call_that_cannot_be_made_becomes_a_hidden_meta_call() -> None:
    calls = CallAssembler(is_meta, is_bridge)
    calls.feed(0, [item(0, "b", "call_tool", '{"name": "nope", "arguments": {}}')])
    assert calls.resolve_bridges(resolve) == []
    (meta,) = calls.meta_calls()
    assert (meta.name, meta.upstream_id) == ("call_tool", "b") and calls.real_calls() == []
