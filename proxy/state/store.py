"""Where conversation states live: the :class:`StateStore` protocol and the in-process
store (:class:`MemoryStateStore`); the Redis store shared by replicas is
:mod:`proxy.state.redis`. Times are seconds of ``clock`` (monotonic by default).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from selection.types import ConversationState


class StateStore(Protocol):
    """Where conversation states live. Implementations raise
    ``selection.errors.StateStoreError`` when the backend fails."""

    async def get(self, conversation_id: str) -> ConversationState | None:
        """The conversation's state, or None when unknown or expired."""
        ...

    async def put(self, conversation_id: str, state: ConversationState) -> None:
        """Store the state (replacing any), resetting its TTL."""
        ...

    async def aclose(self) -> None: ...


class MemoryStateStore:
    """In-process store: entries expire ``ttl_s`` seconds after their last write, and at
    most ``max_conversations`` are kept (least recently used dropped first).

    States are stored serialised, so a caller can never mutate stored state by accident.
    """

    def __init__(
        self,
        ttl_s: float,
        max_conversations: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max = max_conversations
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, conversation_id: str) -> ConversationState | None:
        entry = self._entries.get(conversation_id)
        if entry is None:
            return None
        expires_at, raw = entry
        if expires_at <= self._clock():
            del self._entries[conversation_id]
            return None
        self._entries.move_to_end(conversation_id)
        return ConversationState.from_json(raw)

    async def put(self, conversation_id: str, state: ConversationState) -> None:
        self._entries[conversation_id] = (self._clock() + self._ttl_s, state.to_json())
        self._entries.move_to_end(conversation_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    async def aclose(self) -> None:
        self._entries.clear()
