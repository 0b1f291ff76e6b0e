"""A transparent HTTP relay that records every request before forwarding it, to capture
what a real client sends (to the proxy, or to an upstream directly).

Serve ``RecordingRelay(target)`` (an ASGI app) with :func:`benchmarks.support.servers.serve_in_thread`
and point the client at it. Each request is read whole, recorded as a
:class:`benchmarks.support.upstream.Recorded`, and sent to ``target`` (an origin,
``http://host:port``) with the same method, path, query, headers and body; the response's
status, headers and body bytes come back as they arrive (streams chunk by chunk, SSE
comments included), with no timeout of the relay's own: the client keeps its own.
"""

from __future__ import annotations

import threading

import httpx
from starlette.types import Receive, Scope, Send

from benchmarks.support.upstream import Recorded

#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the relay's HTTP client sets itself.
_NOT_FORWARDED = {"host", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
                  "upgrade", "proxy-connection", "content-length"}
_NOT_RETURNED = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


class RecordingRelay:
    """Records each request (:attr:`requests`) and relays it to ``target``."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self._records: list[Recorded] = []
        self._lock = threading.Lock()
        self._client: httpx.AsyncClient | None = None

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of the requests recorded so far, in arrival order."""
        with self._lock:
            return list(self._records)

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
        with self._lock:
            self._records.append(record)
        assert self._client is not None, "the relay is served without its lifespan"
        url = self.target + scope["path"] + (f"?{query}" if query else "")
        request = self._client.build_request(
            scope["method"], url, content=bytes(body),
            headers=[(k, v) for k, v in headers if k not in _NOT_FORWARDED])
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TransportError as exc:
            detail = f"relay: {type(exc).__name__} reaching {self.target}".encode()
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": detail})
            return
        try:
            out_headers = [(k.encode("latin-1"), v.encode("latin-1"))
                           for k, v in response.headers.multi_items() if k not in _NOT_RETURNED]
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": out_headers})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            record.completed = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
