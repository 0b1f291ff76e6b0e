"""Tests for selection.choosing.state: the conversation state and the in-memory store (with an
injected fake clock: nothing sleeps)."""

from __future__ import annotations

import json

import pytest

from proxy.state.store import MemoryStateStore
from selection.choosing.state import ConversationState, LoadedTool


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sample_state() -> ConversationState:
    return ConversationState(
        {"zeta": LoadedTool(1.5, 9.25), "alpha": LoadedTool(2.0, 3.0), "mid": LoadedTool(4, 4)},
        turn=7,
        meta_calls=2,
    )


# --------------------------------------------------------------------------- JSON


def test_state_json_round_trip_keeps_everything_including_admission_order() -> None:
    state = sample_state()
    back = ConversationState.from_json(state.to_json())
    assert back == state
    assert list(back.loaded) == ["zeta", "alpha", "mid"]


def test_state_json_from_bytes() -> None:
    state = sample_state()
    assert ConversationState.from_json(state.to_json().encode()) == state


def test_an_agent_record_keeps_its_holder() -> None:
    record = ConversationState(sample_state().loaded, tier=["t"], holder="conv-key")
    back = ConversationState.from_json(record.to_json())
    assert back == record and back.holder == "conv-key"
    assert "holder" not in json.loads(sample_state().to_json())


def test_empty_state_round_trips() -> None:
    assert ConversationState.from_json(ConversationState().to_json()) == ConversationState()


def test_state_json_is_compact_and_plain() -> None:
    raw = sample_state().to_json()
    assert " " not in raw
    assert json.loads(raw) == {
        "loaded": [["zeta", 1.5, 9.25], ["alpha", 2.0, 3.0], ["mid", 4, 4]],
        "turn": 7,
        "meta_calls": 2,
        "tier": [],
        "history_tokens": 0,
    }


def test_state_from_before_the_tier_and_history_fields_still_reads() -> None:
    old = '{"loaded":[["a",1.0,2.0]],"turn":3,"meta_calls":0}'
    state = ConversationState.from_json(old)
    assert list(state.loaded) == ["a"] and state.tier == [] and state.history_tokens == 0


def test_state_with_tier_and_history_round_trips() -> None:
    state = sample_state()
    state.tier, state.history_tokens = ["x", "y"], 812
    assert ConversationState.from_json(state.to_json()) == state


def test_the_meta_tools_place_round_trips_and_copies() -> None:
    state = sample_state()
    assert state.meta_at is None and "meta_at" not in json.loads(state.to_json())
    state.meta_at = 1
    assert ConversationState.from_json(state.to_json()).meta_at == 1
    assert state.copy().meta_at == 1


def test_what_the_conversation_delivered_round_trips_and_copies() -> None:
    state = sample_state()
    assert not {"delivered", "exchanges", "seen"} & set(json.loads(state.to_json()))
    state.delivered = ["list_issues"]
    state.exchanges = [{"at": 2, "turn": 1, "items": [{"role": "tool", "content": "{}"}]}]
    state.seen = {"messages": 2, "digest": "ab"}
    read = ConversationState.from_json(state.to_json())
    assert (read.delivered, read.exchanges, read.seen) == (state.delivered, state.exchanges, state.seen)
    clone = state.copy()
    clone.exchanges.append({"at": 3})
    clone.delivered.append("x")
    assert len(state.exchanges) == 1 and state.delivered == ["list_issues"]


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "not json",
        "[]",
        "null",
        "{}",
        '{"loaded": [], "turn": 1}',
        '{"loaded": [["a", 1]], "turn": 1, "meta_calls": 0}',
        '{"loaded": [["a", "x", 1]], "turn": 1, "meta_calls": 0}',
        '{"loaded": 5, "turn": 1, "meta_calls": 0}',
        '{"loaded": [], "turn": "one", "meta_calls": 0}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "meta_at": -1}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "meta_at": "x"}',
        '{"loaded": [], "turn": -4, "meta_calls": 0}',
        '{"loaded": [], "turn": 1, "meta_calls": -1}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "history_tokens": -2}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "exchanges": {"at": 1}}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "exchanges": [1]}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "seen": [3, "x"]}',
        b"\xff\xfe",
        # Values JSON reads but int() cannot (OverflowError), and nesting json cannot
        # (RecursionError): a corrupt Redis value must read as unreadable, not as a defect.
        '{"loaded": [], "turn": 1e999, "meta_calls": 0}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "history_tokens": -1e999}',
        '{"loaded": [], "turn": 1, "meta_calls": 0, "meta_at": 1e999}',
        "[" * 100_000,
    ],
)
def test_invalid_state_json_raises_value_error(raw: str | bytes) -> None:
    with pytest.raises(ValueError):
        ConversationState.from_json(raw)


def test_copy_is_deep() -> None:
    state = sample_state()
    clone = state.copy()
    clone.loaded["zeta"].last_used_at = 99.0
    clone.loaded["new"] = LoadedTool(1, 1)
    clone.turn += 1
    assert state == sample_state()


# --------------------------------------------------------------------------- memory store


async def test_memory_store_returns_what_was_put() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=FakeClock())
    assert await store.get("c1") is None
    await store.put("c1", sample_state())
    assert await store.get("c1") == sample_state()
    assert len(store) == 1


async def test_memory_store_entries_expire_ttl_after_their_last_write() -> None:
    clock = FakeClock(1000.0)
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=clock)
    await store.put("c1", sample_state())
    clock.now = 1059.999
    assert await store.get("c1") == sample_state()
    clock.now = 1060.0
    assert await store.get("c1") is None
    assert len(store) == 0  # an expired entry is dropped, not kept


async def test_memory_store_put_resets_the_ttl() -> None:
    clock = FakeClock(0.0)
    store = MemoryStateStore(ttl_s=10, max_conversations=10, clock=clock)
    await store.put("c1", ConversationState(turn=1))
    clock.now = 8.0
    await store.put("c1", ConversationState(turn=2))
    clock.now = 17.0
    state = await store.get("c1")
    assert state is not None and state.turn == 2
    clock.now = 18.0
    assert await store.get("c1") is None


async def test_memory_store_reads_do_not_extend_the_ttl() -> None:
    clock = FakeClock(0.0)
    store = MemoryStateStore(ttl_s=10, max_conversations=10, clock=clock)
    await store.put("c1", ConversationState())
    clock.now = 9.0
    assert await store.get("c1") is not None
    clock.now = 10.0
    assert await store.get("c1") is None


async def test_memory_store_keeps_at_most_max_conversations_dropping_the_least_recently_used() -> (
    None
):
    store = MemoryStateStore(ttl_s=60, max_conversations=2, clock=FakeClock())
    await store.put("a", ConversationState(turn=1))
    await store.put("b", ConversationState(turn=2))
    assert await store.get("a") is not None  # a is now more recent than b
    await store.put("c", ConversationState(turn=3))
    assert len(store) == 2
    assert await store.get("b") is None
    assert (await store.get("a")).turn == 1  # type: ignore[union-attr]
    assert (await store.get("c")).turn == 3  # type: ignore[union-attr]


async def test_memory_store_rewriting_a_conversation_makes_it_most_recent() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=2, clock=FakeClock())
    await store.put("a", ConversationState(turn=1))
    await store.put("b", ConversationState(turn=2))
    await store.put("a", ConversationState(turn=3))
    await store.put("c", ConversationState(turn=4))
    assert await store.get("b") is None
    assert (await store.get("a")).turn == 3  # type: ignore[union-attr]


async def test_stored_state_cannot_be_mutated_through_the_object_put() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=FakeClock())
    state = sample_state()
    await store.put("c1", state)
    state.loaded["zeta"].last_used_at = -1.0
    state.loaded["intruder"] = LoadedTool(0, 0)
    state.turn = 100
    assert await store.get("c1") == sample_state()


async def test_stored_state_cannot_be_mutated_through_returned_objects() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=FakeClock())
    await store.put("c1", sample_state())
    first = await store.get("c1")
    assert first is not None
    first.loaded.clear()
    first.meta_calls = 50
    second = await store.get("c1")
    assert second == sample_state()
    assert second is not first


async def test_memory_store_conversations_are_independent() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=FakeClock())
    await store.put("a", ConversationState(turn=1))
    await store.put("b", ConversationState(turn=2))
    assert (await store.get("a")).turn == 1  # type: ignore[union-attr]
    assert (await store.get("b")).turn == 2  # type: ignore[union-attr]


async def test_memory_store_aclose_forgets_everything() -> None:
    store = MemoryStateStore(ttl_s=60, max_conversations=10, clock=FakeClock())
    await store.put("a", ConversationState())
    await store.aclose()
    assert len(store) == 0
    assert await store.get("a") is None
