"""Raw ASGI plumbing for the proxy: bounded body reading, response sending, and
cancelling the handler when the client disconnects (ASGI HTTP spec, ``http.disconnect``).

The proxy sends responses itself, rather than through Starlette response classes, so
that one task owns ``receive``: the disconnect watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from starlette.types import Message, Receive, Send

from proxy.http.errors import (
    BodyTimeout,
    ProxyError,
    RequestHeadersTooLarge,
    RequestTooLarge,
    sse_error_event,
)
from proxy.http.headers import Headers, header


class ClientDisconnected(Exception):
    """The client went away before its request body was complete."""


def check_headers(headers: Headers, max_count: int, max_bytes: int) -> None:
    """Raises RequestHeadersTooLarge when there are more than ``max_count`` headers or
    their names and values exceed ``max_bytes`` in total."""
    if len(headers) > max_count:
        raise RequestHeadersTooLarge(f"more than {max_count} request headers")
    if sum(len(name) + len(value) for name, value in headers) > max_bytes:
        raise RequestHeadersTooLarge(f"request headers exceed {max_bytes} bytes")


#: Bytes of request body that extend its deadline by one second (mod_reqtimeout's
#: ``MinRate`` default).
BODY_MIN_RATE = 500.0


async def read_body(
    receive: Receive, headers: Headers, limit_bytes: int, timeout_s: float | None = None,
    min_rate: float = 0.0,
) -> bytes:
    """Read the whole request body within ``timeout_s`` seconds (None: no limit), extended
    by one second per ``min_rate`` bytes received (0: not extended): the rule of Apache
    httpd's ``RequestReadTimeout body=20,MinRate=500`` (mod_reqtimeout), so a large body
    sent steadily is read, and one that trickles is not held for long.

    Raises: RequestTooLarge (declared or actual size over ``limit_bytes``), BodyTimeout,
    ClientDisconnected.
    """
    declared = header(headers, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        raise RequestTooLarge(f"request body exceeds {limit_bytes} bytes")
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            started = asyncio.get_running_loop().time()

            def received(size: int) -> None:
                if timeout_s is not None and min_rate > 0:
                    deadline.reschedule(started + timeout_s + size / min_rate)

            return await _read_chunks(receive, limit_bytes, received)
    except TimeoutError:
        raise BodyTimeout(f"request body not received in time ({timeout_s} s, "
                          f"then 1 s per {min_rate:g} bytes)") from None


async def _read_chunks(receive: Receive, limit_bytes: int, received: Callable[[int], None]) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit_bytes:
            raise RequestTooLarge(f"request body exceeds {limit_bytes} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)
        received(size)


class TrackedSend:
    """Wraps ``send``, remembering how far the response went: started (and its
    ``Content-Type``), complete."""

    def __init__(self, send: Send) -> None:
        self._send = send
        #: The response's status (0 until it started).
        self.status = 0
        self.started = False
        self.complete = False
        self.content_type = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.status = message["status"]
            self.content_type = header(message.get("headers", []), b"content-type") or b""
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    @property
    def streaming_events(self) -> bool:
        """An SSE response has started and not ended."""
        return self.started and not self.complete and self.content_type.startswith(
            b"text/event-stream"
        )

    async def end_with(self, error: ProxyError) -> None:
        """End the response with ``error``: the OpenAI-shaped error response when nothing
        was sent yet, an SSE ``error`` event when an event stream is open; otherwise
        nothing can be added (the server closes the connection)."""
        if not self.started:
            await send_error(self, error)
        elif self.streaming_events:
            await send_body(self, sse_error_event(error), more=False)


async def start_response(send: Send, status: int, headers: Headers) -> None:
    """Send ``http.response.start``."""
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def send_body(send: Send, data: bytes, *, more: bool = True) -> None:
    """Send one body chunk; with ``more=False`` it ends the response. Awaiting it applies
    the server's back-pressure."""
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def send_complete(send: Send, status: int, headers: Headers, body: bytes) -> None:
    """Send a whole response with ``Content-Length``."""
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await start_response(send, status, headers)
    await send_body(send, body, more=False)


async def send_error(
    send: Send, error: ProxyError, *, close: bool = False, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Answer with the error's status and OpenAI-shaped JSON body; ``close`` asks the
    server to close the connection after it (``Connection: close``); ``headers``: more
    response headers (a pruned request's report, ``X-Tool-Pruning-Tools``)."""
    response_headers = [(b"content-type", b"application/json"), *headers]
    if close:
        response_headers.append((b"connection", b"close"))
    await send_complete(send, error.status_code, response_headers, error.body())


async def _disconnected(receive: Receive) -> None:
    """Return once ``receive`` yields ``http.disconnect``."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_until_disconnect(receive: Receive, handler: Callable[[], Awaitable[None]]) -> bool:
    """Run ``handler``; cancel it if the client disconnects first.

    Must be called after the request body was read completely: from then on the only
    message ``receive`` yields is ``http.disconnect``. Cancelling the handler closes any
    upstream request it has open, which is how a disconnect reaches the upstream. The
    handler and the disconnect watcher are two asyncio tasks; neither outlives this call,
    also when the calling task is cancelled (server shutdown), which then raises
    CancelledError here. An exception of the handler is raised here.

    Returns True when the handler ran to completion, False when it was cancelled.
    """
    serving = asyncio.ensure_future(handler())
    watching = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((serving, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watching, serving):
            task.cancel()
        await asyncio.gather(watching, serving, return_exceptions=True)
    if serving.cancelled():
        return False
    serving.result()
    return True
