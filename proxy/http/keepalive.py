"""Keep-alives for a streaming response: an SSE comment (``: keep-alive``) whenever the
client has received nothing for ``interval_s`` seconds, per the WHATWG HTML "Server-sent
events" format (a line starting with ``:`` is a comment, which clients ignore).

:class:`KeepAliveSend` wraps an ASGI ``send``. Silence may come before the handler has
started its own response (planning takes long): the keep-alive then starts it (200,
``text/event-stream``), and what the handler sends afterwards goes on that open stream —
its own start is dropped, and an answer that is not an event stream (an error status, one
JSON body) becomes one SSE error event (``error_event``). So once keep-alives were sent,
every outcome still reaches the client as a valid stream; the handler's response headers
are then not sent, except those it declared before the keep-alive started the response
(:meth:`KeepAliveSend.declare_headers`: the decision's ``X-Tool-Pruning-*``, known once
the request is planned, while the upstream prefills).

A comment is sent only between two events (never inside one the handler is relaying in
pieces), and never after the handler's own response turned out not to be an event stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from starlette.types import Message, Send

from proxy.http.headers import header

#: The comment sent to a silent stream.
KEEPALIVE = b": keep-alive\n\n"
#: The headers of a stream the keep-alives start.
STREAM_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
#: What an event ends with (a blank line, any of the format's line ends).
_EVENT_ENDS = (b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r\n")

#: The API's SSE error event for an error answer: ``(status, body) -> event bytes``.
ErrorEvent = Callable[[int, bytes], bytes]


class KeepAliveSend:
    """``send`` for a streaming response kept alive every ``interval_s`` seconds (see the
    module docstring); run the keep-alives with :meth:`running`. ``error_event``: the
    API's SSE error event for an answer that cannot follow keep-alives already sent."""

    def __init__(
        self, send: Send, interval_s: float, error_event: ErrorEvent,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._send = send
        self._interval_s = interval_s
        self._error_event = error_event
        self._lock = asyncio.Lock()
        #: Monotonic seconds (the event loop's clock by default).
        self._clock = clock or asyncio.get_running_loop().time
        self._last = self._clock()
        #: The keep-alives started the response (status 200, an event stream).
        self.prestarted = False
        #: The handler started its own response (sent, or dropped after a prestart).
        self.started = False
        #: Keep-alives may still be sent.
        self._open = True
        self._tail = b"\n\n"  # the last bytes sent: a comment goes only after an event
        #: Status and body of a handler answer that is no event stream, after a prestart.
        self._converting: tuple[int, bytearray] | None = None
        #: Headers of the handler's response known before it starts (:meth:`declare_headers`).
        self._declared: list[tuple[bytes, bytes]] = []

    def declare_headers(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """Headers the handler's response will carry, known before it starts (the
        decision's report): a response the keep-alives start from now on carries them."""
        self._declared = list(headers)

    async def __call__(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start":
                await self._start(message)
            elif message["type"] == "http.response.body":
                await self._body(message)
            else:
                await self._send(message)

    async def _start(self, message: Message) -> None:
        self.started = True
        content_type = header(message.get("headers", []), b"content-type") or b""
        events = content_type.startswith(b"text/event-stream")
        if not self.prestarted:
            self._open = events  # no comment inside a JSON body
            await self._send(message)
            self._last = self._clock()
        elif not (message["status"] == 200 and events):
            self._converting = (message["status"], bytearray())
            self._open = False

    async def _body(self, message: Message) -> None:
        more = message.get("more_body", False)
        if self._converting is not None:
            status, body = self._converting
            body += message.get("body", b"")
            if not more:
                await self._send({"type": "http.response.body",
                                  "body": self._error_event(status, bytes(body)),
                                  "more_body": False})
            return
        data = message.get("body", b"")
        await self._send(message)
        if data:
            self._tail = (self._tail + data)[-4:]
            self._last = self._clock()
        if not more:
            self._open = False

    async def keep_alive(self) -> bool:
        """Send a comment if the client has waited ``interval_s`` in silence and the stream
        is between two events (starting the response when nothing started it); whether
        one was sent. The silence counts again from now either way."""
        async with self._lock:
            if not self._open or self._clock() - self._last < self._interval_s:
                return False
            self._last = self._clock()
            if not self._tail.endswith(_EVENT_ENDS):
                return False
            if not self.prestarted and not self.started:
                self.prestarted = True
                await self._send({"type": "http.response.start", "status": 200,
                                  "headers": [*STREAM_HEADERS, *self._declared]})
            await self._send({"type": "http.response.body", "body": KEEPALIVE,
                              "more_body": True})
            return True

    async def _tick(self) -> None:
        """:meth:`keep_alive` each time the silence may have lasted ``interval_s``."""
        while self._open:
            await asyncio.sleep(max(0.0, self._last + self._interval_s - self._clock()))
            await self.keep_alive()

    async def release(self) -> Send:
        """The ``send`` for bytes that must reach the client as they came: the wrapped one,
        keep-alives stopped; or this one, when keep-alives already started the response
        (what comes goes on that stream)."""
        async with self._lock:
            if self.prestarted:
                return self
            self._open = False
            return self._send

    @asynccontextmanager
    async def running(self) -> AsyncIterator[KeepAliveSend]:
        """Send keep-alives while the block runs (a keep-alive in flight is never cut)."""
        ticking = asyncio.create_task(self._tick()) if self._interval_s > 0 else None
        try:
            yield self
        finally:
            self._open = False
            if ticking is not None:
                ticking.cancel()
                await asyncio.gather(ticking, return_exceptions=True)


async def unchanged(send: Send) -> Send:
    """The ``send`` to forward the client's bytes to as they came (passthrough, a request
    not pruned): ``send``, or what a :class:`KeepAliveSend` releases."""
    return await send.release() if isinstance(send, KeepAliveSend) else send
