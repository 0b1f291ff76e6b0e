"""What a turn reads of its whole history (selection/catalog/history_facts.py): the same facts as
reading every message, whether they come from the request's new messages folded onto the
last request's prefix (its bytes unchanged), from a rendered comparison (bytes changed,
nothing a template renders), or from the whole history (edited, or no bytes at all)."""

from __future__ import annotations

import json

import pytest

from selection.catalog import history_facts
from selection.catalog.history_facts import read_history
from selection.catalog.text_path import text_called_tools
from selection.choosing.prefix import estimated_text_tokens, split_system
from selection.conversation.continuity import HistoryMark, RawHistory, mark
from selection.conversation.history import called_tools

NAMES = {"list_issues", "get_issue", "read_file", "search_code"}


def exchange(n: int) -> list[dict[str, object]]:
    """A user ask, a call, its result and a reply that calls a tool in text."""
    tool = ["list_issues", "get_issue", "search_code"][n % 3]
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Step {n}: find the bug",
                                      "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": tool, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n} é"},
        {"role": "assistant", "content": f'Next <read_file> or {{"name": "x{n}"}}'},
    ]


def history(turns: int) -> list[dict[str, object]]:
    lead = [{"role": "system", "content": "You are an agent."},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}]
    return lead + [m for n in range(turns) for m in exchange(n)]


def raw_of(messages: list[dict[str, object]], indent: int | None = None) -> RawHistory:
    raw = RawHistory.of(json.dumps(messages, indent=indent).encode())
    assert raw is not None
    return raw


def assert_whole(facts: history_facts.HistoryFacts, messages: list[dict[str, object]]) -> None:
    """The facts are those of reading every message."""
    assert list(facts.called) == called_tools(messages)
    assert facts.text_called(NAMES) == text_called_tools(messages, NAMES)
    assert facts.history_tokens == estimated_text_tokens(split_system(messages)[1])
    assert facts.mark.digest == mark(messages).digest
    assert facts.mark.messages == len(messages)


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_facts, "_memo", type(history_facts._memo)())


def test_a_conversation_that_grows_reads_as_its_whole_history() -> None:
    whole, previous = history(5), None
    for length in (3, 6, 7, 12, len(whole)):  # each request the one before it and more
        messages = whole[:length]
        facts = read_history(messages, raw_of(messages), previous)
        assert facts.continued == (previous is not None)
        assert_whole(facts, messages)
        assert facts.mark.raw is not None and facts.mark.cut == raw_of(messages).end
        previous = HistoryMark.from_json(facts.mark.to_json())


def test_the_prefix_comes_from_the_memo_and_reads_alike_without_it() -> None:
    first = history(3)
    mark_json = read_history(first, raw_of(first), None).mark.to_json()
    later = history(5)
    from_memo = read_history(later, raw_of(later), HistoryMark.from_json(mark_json))
    history_facts._memo.clear()  # another worker, or a restart: the prefix read again
    without = read_history(later, raw_of(later), HistoryMark.from_json(mark_json))
    for facts in (from_memo, without):
        assert facts.continued
        assert_whole(facts, later)
    assert from_memo == without


def test_bytes_that_changed_fall_back_to_what_a_template_renders() -> None:
    first = history(2)
    previous = read_history(first, raw_of(first), None).mark
    moved = history(3)  # the cache marker moved off the first ask, and re-indented
    moved[2] = {"role": "user", "content": [{"type": "text", "text": "Step 0: find the bug"}]}
    facts = read_history(moved, raw_of(moved, indent=1), previous)
    assert facts.continued
    assert_whole(facts, moved)
    edited = history(3)
    edited[3] = {**edited[3], "tool_calls": []}  # a call the upstream saw is gone
    facts = read_history(edited, raw_of(edited), previous)
    assert not facts.continued
    assert_whole(facts, edited)


def test_without_bytes_or_a_mark_every_message_is_read() -> None:
    messages = history(2)
    facts = read_history(messages, None, None)
    assert not facts.continued and facts.mark.raw is None
    assert_whole(facts, messages)
    shorter = read_history(messages[:3], None, facts.mark)  # compacted: fewer messages
    assert not shorter.continued
    assert read_history(messages, None, mark(messages[:4])).continued


def test_the_mark_keeps_its_raw_part_and_drops_a_malformed_one() -> None:
    messages = history(1)
    stored = read_history(messages, raw_of(messages), None).mark.to_json()
    assert HistoryMark.from_json(stored) == HistoryMark(
        len(messages), mark(messages).digest, stored["raw"], stored["cut"])
    assert HistoryMark.from_json({**stored, "cut": -3}) == mark(messages)
    spaced = RawHistory.of(b"[1, 2 ]\n")
    assert spaced is not None and spaced.end == 5
    assert RawHistory.of(b'{"a": 1}') is None
    empty = RawHistory.of(b"[]")
    assert empty is not None and empty.end == 1
