"""Which llama-server slot a conversation is pinned to (proxy/chat/slots.py): the
client's own ``id_slot``, the one its state keeps, else the least recently assigned."""

from __future__ import annotations

import pytest

from proxy.chat.blocks import start_block
from proxy.chat.slots import assigned_slot, client_slot
from selection.state import ConversationState, LoadedTool, MemoryStateStore


@pytest.mark.parametrize(
    ("body", "total", "slot"),
    [
        ({"id_slot": 1}, 2, 1),
        ({"id_slot": 3}, 2, 1),  # llama-server wraps an id past its slots around
        ({"id_slot": 3}, None, 3),  # slots unknown: as named
        ({"id_slot": -1}, 2, None),  # any idle slot
        ({"id_slot": True}, 2, None),
        ({"id_slot": "1"}, 2, None),
        ({}, 2, None),
    ],
)
def test_the_clients_own_slot(body: dict, total: int | None, slot: int | None) -> None:
    assert client_slot(body, total) == slot


async def test_new_conversations_take_the_least_recently_assigned_slot_and_keep_it() -> None:
    store = MemoryStateStore(3600, 100)

    async def load(key: str) -> ConversationState:
        return await store.get(key) or ConversationState()

    async def slot_of(state: ConversationState, total: int = 3) -> int:
        return await assigned_slot(state, total, "slots:u", load=load, save=store.put)

    assert [await slot_of(ConversationState()) for _ in range(4)] == [0, 1, 2, 0]
    # A conversation keeps its slot, and assigning it is no new assignment.
    assert await slot_of(ConversationState(slot=2)) == 2
    assert await slot_of(ConversationState()) == 1
    # A kept slot the upstream no longer has (fewer slots after a restart) is replaced.
    assert await slot_of(ConversationState(slot=2), total=2) == 0
    # The record is per key: another upstream's assignments start at its slot 0.
    assert await assigned_slot(ConversationState(), 2, "slots:v", load=load, save=store.put) == 0


def test_a_conversations_slot_round_trips_through_its_state() -> None:
    state = ConversationState(turn=3, slot=1)
    assert ConversationState.from_json(state.to_json()).slot == 1
    assert state.copy().slot == 1
    assert "slot" not in ConversationState().to_json()


async def test_a_turn_in_another_slot_than_its_last_finds_none_of_its_prompt_cached() -> None:
    own = ConversationState({"a": LoadedTool(1, 1)}, turn=2, history_tokens=300, slot=0)
    records = {"agent:slot:1": ConversationState(), "agent:slot:0": ConversationState()}

    async def load(key: str) -> ConversationState:
        return records[key]

    stay = await start_block(own, "A", "agent:slot:0", shared=True, load=load)
    assert stay.state is own and stay.cached == ["a"] and stay.cached_history == 300
    moved = await start_block(own, "A", "agent:slot:1", shared=True, load=load, moved=True)
    assert moved.state is own and moved.cached is None and moved.kind is None
    # The slot holds the agent's block (another conversation's): the turn takes it.
    records["agent:slot:1"] = ConversationState({"b": LoadedTool(1, 1)}, holder="B")
    there = await start_block(own, "A", "agent:slot:1", shared=False, load=load, moved=True)
    assert there.kind == "shared" and there.cached == ["b"] and there.cached_history == 0
    assert list(there.state.loaded) == ["b", "a"]
