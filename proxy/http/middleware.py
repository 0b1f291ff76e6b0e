"""ASGI middleware: request ids and request metrics (each proxied request's log line is
:mod:`proxy.http.request_log`'s)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.http.headers import REQUEST_ID, request_id
from proxy.log import get_logger
from proxy.metrics import Metrics, route_label

#: ASGI scope key under which the request id (bytes) is kept for the handlers.
REQUEST_ID_SCOPE_KEY = "toolprune.request_id"
#: The longest ``X-Request-Id`` kept whole (bytes): a W3C ``traceparent`` is 55, a uuid 36.
#: A longer one is cut to this prefix, which is then the request's id everywhere.
MAX_REQUEST_ID_BYTES = 128

logger = get_logger("request")


def bounded_request_id(headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request's id: the client's ``X-Request-Id`` (a new uuid4 when it sent none),
    cut to its first :data:`MAX_REQUEST_ID_BYTES` bytes when longer, so it is never echoed
    or forwarded whole; a cut id is logged (``request_id_truncated``: the id kept, the
    bytes received and kept)."""
    rid = request_id(headers)
    if len(rid) <= MAX_REQUEST_ID_BYTES:
        return rid
    kept = rid[:MAX_REQUEST_ID_BYTES]
    logger.info("request_id_truncated", extra={"fields": {
        "request_id": kept.decode("latin-1"), "received_bytes": len(rid),
        "kept_bytes": len(kept),
    }})
    return kept


class ObservabilityMiddleware:
    """Assigns ``X-Request-Id`` (the client's, at most :data:`MAX_REQUEST_ID_BYTES` of it,
    or a new uuid4) and returns it on the response; counts requests by route and status;
    tracks latency and in-flight."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = bounded_request_id(scope["headers"])
        scope[REQUEST_ID_SCOPE_KEY] = rid
        route = route_label(scope["path"])
        status = 0
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k != REQUEST_ID]
                message = {**message, "headers": [*headers, (REQUEST_ID, rid)]}
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            elapsed = time.perf_counter() - started
            label = str(status) if status else "disconnected"
            self.metrics.http_requests.labels(route, label).inc()
            self.metrics.http_latency.labels(route).observe(elapsed)
