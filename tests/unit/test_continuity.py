"""Whether a request's history continues its conversation's last one
(selection/conversation/continuity.py): what a template renders counts, markers it does not
render do not."""

from __future__ import annotations

from selection.conversation.continuity import HistoryMark, continues, mark

HISTORY = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": [{"type": "text", "text": "List the issues",
                                  "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "list_issues", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "[]"},
]


def test_a_history_that_grows_continues_and_one_rewritten_does_not() -> None:
    before = mark(HISTORY[:2])
    assert continues(before, HISTORY)
    edited = [HISTORY[0], {"role": "user", "content": "List the open issues"}, *HISTORY[2:]]
    assert not continues(before, edited)
    assert not continues(before, HISTORY[:1])  # shorter: compacted
    assert not continues(None, HISTORY)


def test_markers_a_template_does_not_render_are_no_change() -> None:
    moved = [HISTORY[0], {"role": "user", "content": [{"type": "text", "text": "List the issues"}]}]
    assert continues(mark(HISTORY[:2]), moved)
    other_call = [*HISTORY[:2], {**HISTORY[2], "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "list_issues", "arguments": '{"a":1}'}}]}]
    assert not continues(mark(HISTORY[:3]), other_call)


def test_the_mark_round_trips_and_rejects_what_is_not_one() -> None:
    stored = mark(HISTORY).to_json()
    assert HistoryMark.from_json(stored) == mark(HISTORY)
    assert HistoryMark.from_json({"messages": -1, "digest": "x"}) is None
    assert HistoryMark.from_json(None) is None


def test_a_lone_surrogate_is_marked() -> None:
    assert mark([{"role": "user", "content": "broken \ud800 text"}]).messages == 1
