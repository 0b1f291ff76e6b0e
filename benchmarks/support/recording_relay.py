"""A transparent HTTP relay that records every request before forwarding it, to capture
what a real client sends (to the proxy, or to an upstream directly).

Serve ``RecordingRelay(target)`` (an ASGI app) with :func:`benchmarks.support.servers.serve_in_thread`
and point the client at it. Each request is read whole, recorded as a
:class:`benchmarks.support.upstream.Recorded`, and sent to ``target`` (an origin,
``http://host:port``) with the same method, path, query, headers and body; the response's
status, headers and body bytes come back as they arrive (streams chunk by chunk, SSE
comments included), with no timeout of the relay's own: the client keeps its own. A relay
given a ``rewrite`` forwards ``rewrite(path, body)`` instead of the body it received
(and records the body it received).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from starlette.types import Receive, Scope, Send

from benchmarks.support.upstream import Recorded

#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the relay's HTTP client sets itself.
_NOT_FORWARDED = {"host", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
                  "upgrade", "proxy-connection", "content-length"}
_NOT_RETURNED = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Exchange:
    """One relayed request, its response's status and headers (None: no response) and,
    when the relay keeps them, its response body's bytes as relayed."""

    request: Recorded
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)

    def header(self, name: str) -> str | None:
        """The response's first ``name`` header (lower-case name), or None."""
        return next((value for key, value in self.headers if key == name), None)


class RecordingRelay:
    """Records each request and its response's head (:attr:`exchanges`; with
    ``keep_bodies`` the response bodies too) and relays it to ``target``, its body
    through ``rewrite`` when one is given."""

    def __init__(self, target: str, keep_bodies: bool = False,
                 rewrite: Callable[[str, bytes], bytes] | None = None) -> None:
        self.target = target.rstrip("/")
        self.keep_bodies = keep_bodies
        self.rewrite = rewrite
        self._exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client: httpx.AsyncClient | None = None

    @property
    def exchanges(self) -> list[Exchange]:
        """A snapshot of the exchanges so far, in the requests' arrival order."""
        with self._lock:
            return list(self._exchanges)

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of the requests recorded so far, in arrival order."""
        return [exchange.request for exchange in self.exchanges]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app (lifespan opens and closes the relay's HTTP client)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._relay(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._client = httpx.AsyncClient(timeout=None, follow_redirects=False)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        query = scope["query_string"].decode("latin-1")
        record = Recorded(scope["method"], scope["path"], query, headers, bytes(body),
                          client_port=scope["client"][1] if scope.get("client") else None)
        exchange = Exchange(record)
        with self._lock:
            self._exchanges.append(exchange)
        assert self._client is not None, "the relay is served without its lifespan"
        url = self.target + scope["path"] + (f"?{query}" if query else "")
        sent = bytes(body) if self.rewrite is None else self.rewrite(scope["path"], bytes(body))
        request = self._client.build_request(
            scope["method"], url, content=sent,
            headers=[(k, v) for k, v in headers if k not in _NOT_FORWARDED])
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TransportError as exc:
            detail = f"relay: {type(exc).__name__} reaching {self.target}".encode()
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": detail})
            return
        exchange.status = response.status_code
        exchange.headers = [(k.lower(), v) for k, v in response.headers.multi_items()]
        try:
            out_headers = [(k.encode("latin-1"), v.encode("latin-1"))
                           for k, v in response.headers.multi_items() if k not in _NOT_RETURNED]
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": out_headers})
            async for chunk in response.aiter_raw():
                if self.keep_bodies:
                    exchange.body += chunk
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            record.completed = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
