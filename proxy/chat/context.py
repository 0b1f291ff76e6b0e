"""What serving an acting turn (plain or streaming) needs from the chat handler.

The handler builds one :class:`TurnServices` and passes it to
:func:`proxy.chat.serving.serve_turn`, so that module depends on this small record, not
on the handler that calls it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from proxy.chat.turn import MetaCall, Turn
from proxy.http.forwarding import Forwarder
from proxy.metrics import Metrics

#: Executes the meta-tool calls of a turn and returns one result text per call, in order.
MetaCallRunner = Callable[[Turn, Sequence[MetaCall]], Awaitable[list[str]]]


@dataclass(frozen=True)
class TurnServices:
    """``forwarder``: relays upstream responses and owns the upstream client;
    ``metrics``: the proxy's Prometheus metrics; ``max_meta_rounds``: upstream re-issues
    allowed after meta-tool calls (``TOOLPRUNE_MAX_META_ROUNDS``); ``run_meta_calls``:
    answers meta-tool calls and updates the conversation's state; ``upstream_stream``:
    whether streaming requests are sent upstream as streaming
    (``TOOLPRUNE_UPSTREAM_STREAM``)."""

    forwarder: Forwarder
    metrics: Metrics
    max_meta_rounds: int
    run_meta_calls: MetaCallRunner
    upstream_stream: bool = True


class UsageRecorder(Protocol):
    """The usage log as :class:`proxy.chat.handler.ChatHandler` sees it (implemented by
    :class:`proxy.usage.writer.UsageLog`); must never raise nor block."""

    def record(self, turn: Turn, decision: str) -> None: ...

    def record_fallback(self, reason: str) -> None: ...
