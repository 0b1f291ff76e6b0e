"""Raw ASGI plumbing for the proxy: bounded body reading, response sending, and
cancelling the handler when the client disconnects (ASGI HTTP spec, ``http.disconnect``).

The proxy sends responses itself, rather than through Starlette response classes, so
that one task owns ``receive``: the disconnect watcher.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from starlette.types import Message, Receive, Send

from proxy.http.errors import ProxyError, RequestTooLarge
from proxy.http.headers import Headers, header


class ClientDisconnected(Exception):
    """The client went away before its request body was complete."""


async def read_body(receive: Receive, headers: Headers, limit_bytes: int) -> bytes:
    """Read the whole request body.

    Raises: RequestTooLarge (declared or actual size over ``limit_bytes``),
    ClientDisconnected.
    """
    declared = header(headers, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        raise RequestTooLarge(f"request body exceeds {limit_bytes} bytes")
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


async def send_error(send: Send, error: ProxyError) -> None:
    """Answer with the error's status and OpenAI-shaped JSON body."""
    await send_complete(
        send, error.status_code, [(b"content-type", b"application/json")], error.body()
    )


async def run_until_disconnect(receive: Receive, handler: Callable[[], Awaitable[None]]) -> bool:
    """Run ``handler``; cancel it if the client disconnects first.

    Must be called after the request body was read completely: from then on the only
    message ``receive`` yields is ``http.disconnect``. Cancelling the handler closes any
    upstream request it has open, which is how a disconnect reaches the upstream.

    Returns True when the handler ran to completion, False when it was cancelled.
    """
    completed = False

    async def run(scope: anyio.CancelScope) -> None:
        nonlocal completed
        await handler()
        completed = True
        scope.cancel()

    async def watch(scope: anyio.CancelScope) -> None:
        message: Message = await receive()
        while message["type"] != "http.disconnect":
            message = await receive()
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, group.cancel_scope)
        group.start_soon(watch, group.cancel_scope)
    return completed
