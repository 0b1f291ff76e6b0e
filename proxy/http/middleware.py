"""ASGI middleware: request ids and request metrics (each proxied request's log line is
:mod:`proxy.http.request_log`'s)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.http.headers import REQUEST_ID, request_id
from proxy.metrics import Metrics, route_label

#: ASGI scope key under which the request id (bytes) is kept for the handlers.
REQUEST_ID_SCOPE_KEY = "toolprune.request_id"


class ObservabilityMiddleware:
    """Assigns ``X-Request-Id`` (the client's, or a new uuid4) and returns it on the
    response; counts requests by route and status; tracks latency and in-flight."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope["headers"])
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
