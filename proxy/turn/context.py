"""What serving an acting turn needs from its handler, and what the handler needs from the
usage log.

The handler (:mod:`proxy.turn.handler`) builds one :class:`TurnServices` and passes it to
:func:`proxy.turn.rounds.serve_turn`, so the round loop depends on this small record, not
on the handler that calls it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.http.forwarding import ErrorReader, Forwarder, ResponseTap
from proxy.log import get_logger
from proxy.metrics import Metrics
from proxy.servers.speeds import RoundTiming
from proxy.turn.turn import MetaCall, Turn

logger = get_logger("serving")

#: Executes the meta-tool calls of a turn and returns one result text per call, in order.
MetaCallRunner = Callable[[Turn, Sequence[MetaCall]], Awaitable[list[str]]]
#: Keeps a hidden exchange of a turn (where it stands in the client's history, the API's
#: messages or items) for the conversation's later requests.
ExchangeRecorder = Callable[[Turn, int, Sequence[Any]], Awaitable[None]]
#: Learns the server's speeds from one round read to its end (the request's model).
SpeedObserver = Callable[[str | None, RoundTiming], None]
#: What watches a forwarded request's answer for the server's speeds (given its decoded
#: body, for its model): a :class:`~proxy.http.forwarding.ResponseTap`.
AnswerTapper = Callable[[dict[str, Any]], ResponseTap]


@dataclass(frozen=True)
class TurnServices:
    """``api``: the API's label (metrics, logs); ``forwarder``: relays upstream responses
    and owns the upstream client; ``metrics``: the proxy's Prometheus metrics;
    ``max_meta_rounds``: upstream re-issues allowed after meta-tool calls
    (``TOOLPRUNE_MAX_META_ROUNDS``); ``run_meta_calls``: answers meta-tool calls and
    updates the conversation's state (:meth:`proxy.turn.planner.Planner.run_meta_calls`);
    ``upstream_stream``: whether streaming requests are sent upstream as streaming
    (:meth:`proxy.servers.probe.ServerProbe.streams_tool_calls`; None: always);
    ``errors``: reads an upstream error answer as the proxy's own (a context overflow in
    the client's API's shape; None: relayed as sent); ``record_exchange``: keeps a hidden
    exchange of a turn that delivers tools in the conversation
    (:meth:`proxy.turn.planner.Planner.record_exchange`); ``observe_speed``: learns the
    server's speeds from each round's answer (:meth:`proxy.servers.speeds.SpeedBook.observe`)."""

    api: str
    forwarder: Forwarder
    metrics: Metrics
    max_meta_rounds: int
    run_meta_calls: MetaCallRunner
    upstream_stream: Callable[[], Awaitable[bool]] | None = None
    errors: ErrorReader | None = None
    record_exchange: ExchangeRecorder | None = None
    observe_speed: SpeedObserver | None = None

    def suspicious_stop(self, request_id: bytes) -> None:
        """A streamed answer to a request with tools ended normally (``stop``,
        ``end_turn``, ``response.completed``) with no content nor call: what a server
        that drops streamed tool calls sends (see ``TOOLPRUNE_UPSTREAM_STREAM``). One
        log line and ``toolprune_upstream_suspicious_stops_total``."""
        self.metrics.suspicious_stops.labels(self.api).inc()
        logger.warning("upstream_suspicious_stop", extra={"fields": {
            "api": self.api, "request_id": request_id.decode("latin-1"),
            "hint": "the upstream may drop streamed tool calls; see TOOLPRUNE_UPSTREAM_STREAM"}})


class UsageRecorder(Protocol):
    """The usage log as :class:`proxy.turn.decisions.DecisionFlow` sees it (implemented by
    :class:`proxy.usage.writer.UsageLog`); must never raise nor block."""

    def record(self, turn: Turn, decision: str) -> None: ...

    def record_fallback(self, reason: str) -> None: ...
