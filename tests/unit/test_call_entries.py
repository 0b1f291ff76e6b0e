"""The keying rule for a call renumbered after its first delta, and empty tool-call entries
dropped at the end of a round (proxy/apis/chat/calls.py, proxy/apis/chat/round_reader.py; issue #34,
items 2 and 3), one case each."""

from __future__ import annotations

from typing import Any

from proxy.apis.chat.round_reader import RoundReader
from tests.unit.test_tool_call_keying import assemble, is_meta, item, summary


def test_fragments_at_a_new_index_continue_the_only_open_call() -> None:
    calls, _ = assemble([item(9, "m", "load_tools", "")], [item(0, None, None, '{"names": ')],
                        [item(0, None, None, '["a"]}')])
    assert summary(calls) == [("m", "load_tools", '{"names": ["a"]}')]
    assert calls.unnamed() == []


def test_fragments_at_a_new_index_with_two_calls_open_open_another() -> None:
    calls, _ = assemble([item(0, "a", "f", "{}")], [item(1, "b", "g", "{}")],
                        [item(2, None, None, '{"x": 1}')])
    assert [c.name for c in calls.unnamed()] == [None]


def test_a_new_index_with_a_name_is_a_new_call() -> None:
    calls, _ = assemble([item(0, None, "f", "{}")], [item(1, None, "f", "{}")])
    assert summary(calls) == [(None, "f", "{}"), (None, "f", "{}")]


def completion(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "done", "tool_calls": tool_calls}
    return {"id": "c", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def test_an_entry_without_name_nor_arguments_is_dropped_and_noted() -> None:
    reader = RoundReader(is_meta)
    shown = reader.read_completion(completion([{"id": "", "type": "function"}]))
    assert shown == [{"index": 0, "delta": {"content": "done"}}]
    assert reader.end() == [] and reader.problem is None
    assert reader.calls.calls == [] and reader.finish == {0: "stop"}
    assert reader.notes == ["dropped 1 tool-call entry with neither a function name nor arguments"]


def test_an_empty_entry_beside_a_real_call_keeps_the_finish_reason() -> None:
    reader = RoundReader(is_meta)
    real = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    reader.read_completion(completion([real, {"id": "", "type": "function"}]))
    reader.end()
    assert reader.problem is None and reader.finish == {0: "tool_calls"}
    assert reader.real_call_names() == ["f"]


def test_a_nameless_entry_with_arguments_is_still_a_problem() -> None:
    reader = RoundReader(is_meta)
    reader.read_completion(completion([{"id": "", "type": "function", "function": {"arguments": "{}"}}]))
    reader.end()
    assert reader.problem == "the upstream's answer has a tool call without a name"
