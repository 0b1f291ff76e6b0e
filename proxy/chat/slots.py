"""Which llama-server slot a conversation is pinned to (``id_slot``, llama.cpp
``tools/server/README.md``): the client's own, else, with ``TOOLPRUNE_SLOTS``, the one kept
in the conversation's state, else the least recently assigned of the upstream's
``total_slots`` (one assignment record per upstream in the state store: the slot assigned
last, so assignments go round the slots). Without a pin, llama-server sends a request to
the idle slot whose cached prompt shares the longest prefix with it, so conversations of
one agent take turns in one slot and each evaluates its history again after the other's
turn; pinned, each keeps its own prompt. No I/O of its own: the state store is read and
written through the ``load`` / ``save`` it is given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from selection.state import ConversationState

#: Prefix of the state key of an upstream's slot assignment record.
ASSIGNMENT_KEY = "slots:"


def client_slot(body: Mapping[str, Any], total: int | None) -> int | None:
    """The slot the request names itself (``id_slot`` ≥ 0; llama-server wraps it around
    ``total`` slots), or None (absent, or -1: any idle slot)."""
    value = body.get("id_slot")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value % total if total else value


async def assigned_slot(
    state: ConversationState,
    total: int,
    record_key: str,
    *,
    load: Callable[[str], Awaitable[ConversationState]],
    save: Callable[[str, ConversationState], Awaitable[None]],
) -> int:
    """The conversation's slot among ``total`` (> 1): the one its state keeps, else the
    slot after the one assigned last (``record_key``'s record), which becomes the
    assigned last. Raises what ``load`` / ``save`` raise (StateStoreError)."""
    if state.slot is not None and state.slot < total:
        return state.slot
    last = (await load(record_key)).slot
    slot = 0 if last is None else (last + 1) % total
    await save(record_key, ConversationState(slot=slot))
    return slot
