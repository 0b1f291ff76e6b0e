"""The one ``request`` log line of each proxied request, and the upstream timings behind it.

Every request the proxy forwards or acts on (any route but its own ``/healthz``,
``/readyz``, ``/metrics``) ends with one JSON line at ``info``::

    {"event": "request", "request_id", "method", "route", "decision", "fallback_reason",
     "status", "complete", "duration_ms", "upstream_rounds", "upstream_first_byte_ms",
     "upstream_last_byte_ms"}

``route``: the bounded route label (``chat_completions``, ``responses``, ``messages``,
``models``…); ``decision``: the pruning decision of an acting route (``pruned``,
``disabled``, ``passthrough``…; null elsewhere); ``fallback_reason``: why a ``fallback``
request was sent with its whole catalogue (``catalog_error``, ``embedder_timeout``…, the
``reason`` of the rate-limited ``fallback_full_catalog`` line, which may be suppressed;
null otherwise); ``status``: the status sent, 0 when the
client left before one; ``complete``: whether the response was sent to its end (false:
the client left, or the stream was cut); the upstream fields: from sending the first upstream request to
the first body byte of its answer, and to the last byte read of the last round (null
without an upstream answer). Never message content nor headers.

Each upstream answer is also observed in ``toolprune_upstream_first_byte_seconds`` and
``toolprune_upstream_last_byte_seconds`` (by route, per round).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proxy.log import get_logger
from proxy.metrics import Metrics

if TYPE_CHECKING:
    from proxy.http.upstream import UpstreamResponse

logger = get_logger("request")


@dataclass
class RequestLog:
    """What one request's log line says; filled in while it is served."""

    started: float = field(default_factory=time.perf_counter)
    decision: str | None = None
    fallback_reason: str | None = None
    rounds: int = 0
    first_sent: float | None = None
    first_byte: float | None = None
    last_byte: float | None = None

    def track(self, response: UpstreamResponse, metrics: Metrics, route: str) -> None:
        """Count ``response`` as one upstream round of this request; its timings are
        taken when it is closed (:meth:`UpstreamResponse.aclose`)."""
        self.rounds += 1
        if self.first_sent is None:
            self.first_sent = response.sent_at

        def closed(done: UpstreamResponse) -> None:
            if done.first_byte_at is None:
                return
            metrics.upstream_first_byte.labels(route).observe(done.first_byte_at - done.sent_at)
            if self.first_byte is None:
                self.first_byte = done.first_byte_at
            if done.last_byte_at is not None:
                metrics.upstream_last_byte.labels(route).observe(done.last_byte_at - done.sent_at)
                self.last_byte = done.last_byte_at

        response.on_close = closed

    def emit(self, *, request_id: bytes, method: str, route: str, status: int, complete: bool) -> None:
        """Write the request's log line (``complete``: the response was sent to its end)."""

        def since_sent(at: float | None) -> float | None:
            if at is None or self.first_sent is None:
                return None
            return round((at - self.first_sent) * 1000, 2)

        logger.info(
            "request",
            extra={
                "fields": {
                    "request_id": request_id.decode("latin-1"),
                    "method": method,
                    "route": route,
                    "decision": self.decision,
                    "fallback_reason": self.fallback_reason,
                    "status": status,
                    "complete": complete,
                    "duration_ms": round((time.perf_counter() - self.started) * 1000, 2),
                    "upstream_rounds": self.rounds,
                    "upstream_first_byte_ms": since_sent(self.first_byte),
                    "upstream_last_byte_ms": since_sent(self.last_byte),
                }
            },
        )
