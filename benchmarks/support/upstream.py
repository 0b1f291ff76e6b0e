"""A scriptable OpenAI-compatible upstream for integration tests.

Serve ``Upstream().app`` with :func:`benchmarks.support.servers.serve_in_thread`. Every request is
recorded (raw bytes and headers) before its reply is produced; replies come from a FIFO
script per path suffix, else from a ``behaviour`` when one is set, else from built-in
defaults. Each record notes whether the client went away before the reply completed
(``cancelled``) or the reply was fully sent (``completed``).

Like llama-server it also answers ``POST /tokenize`` (one token per word) and, when
``n_ctx`` is set, ``GET /props`` (``default_generation_settings.n_ctx``).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message, Receive, Scope, Send

from benchmarks.support.api_replies import Message as AnthropicMessage
from benchmarks.support.api_replies import Responses
from benchmarks.support.chat_replies import Chat
from benchmarks.support.replies import (
    CHAT_PATH,
    SSE,
    Delayed,
    Hang,
    Raw,
    Reply,
    Slow,
    builtin_reply,
    json_object,
)

_GATE_POLL_SECONDS = 0.005


@dataclass
class Recorded:
    """One request as the upstream received it, and what became of its reply."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    #: The client's TCP port: requests that share it came over one kept-alive connection.
    client_port: int | None = None
    #: ``time.monotonic()`` when the request's first bytes were read: the server's stamp
    #: (scope key ``arrived_at``) when it gives one, else when the app got the request.
    arrived_at: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    completed: bool = False
    _cancelled_event: threading.Event = field(
        default_factory=threading.Event, init=False, repr=False, compare=False
    )

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def mark_cancelled(self) -> None:
        """Record that the client went away before the reply completed."""
        self.cancelled = True
        self._cancelled_event.set()

    def wait_cancelled(self, timeout: float) -> bool:
        """Block until marked cancelled; False on timeout."""
        return self._cancelled_event.wait(timeout)


class Upstream:
    """A scriptable OpenAI-compatible server: ``app`` is its ASGI app."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._scripts: dict[str, deque[Reply]] = {}
        self._records: list[Recorded] = []
        self._app = Starlette(routes=[Mount("/", app=self._handle)])
        #: Served as llama-server's ``GET /props`` context when set; None: 404, as from a
        #: server without ``/props``.
        self.n_ctx: int | None = None
        #: Answers what no script answers when set (e.g. ``benchmarks.support.agent_behaviour``);
        #: its None falls through to the built-in replies.
        self.behaviour: Callable[[Recorded], Reply | None] | None = None

    @property
    def app(self) -> Starlette:
        """The ASGI app to serve."""
        return self._app

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of the requests recorded so far, in arrival order."""
        with self._condition:
            return list(self._records)

    def script(self, *replies: Reply, path: str = CHAT_PATH) -> None:
        """Queue ``replies`` for requests whose path ends with ``path`` (default: chat)."""
        with self._condition:
            self._scripts.setdefault(path, deque()).extend(replies)

    def drain(self, path: str = CHAT_PATH) -> int:
        """Drop the scripted replies for ``path`` still queued; return how many there were."""
        with self._condition:
            queue = self._scripts.get(path, deque())
            left = len(queue)
            queue.clear()
            return left

    def wait_for_requests(self, n: int, timeout: float = 10) -> list[Recorded]:
        """Block until ``n`` requests were recorded and return them all; TimeoutError if not."""
        with self._condition:
            if not self._condition.wait_for(lambda: len(self._records) >= n, timeout):
                raise TimeoutError(f"expected {n} upstream requests, got {len(self._records)}")
            return list(self._records)

    def wait_for(self, predicate: Callable[[list[Recorded]], bool], timeout: float = 10) -> list[Recorded]:
        """Block until ``predicate(requests so far)`` holds and return them; TimeoutError if not."""
        with self._condition:
            if not self._condition.wait_for(lambda: predicate(self._records), timeout):
                raise TimeoutError(f"condition not met after {len(self._records)} requests")
            return list(self._records)

    def wait_cancelled(self, index: int, timeout: float = 10) -> bool:
        """Block until request ``index`` exists and its client went away early; False on timeout."""
        deadline = time.monotonic() + timeout
        try:
            record = self.wait_for_requests(index + 1, timeout)[index]
        except TimeoutError:
            return False
        return record.wait_cancelled(max(0.0, deadline - time.monotonic()))

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrived_at = scope.get("arrived_at") or time.monotonic()
        body, disconnected = await _read_body(receive)
        record = Recorded(
            method=scope["method"],
            path=scope["path"],
            query=scope["query_string"].decode("latin-1"),
            headers=[
                (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]
            ],
            body=body,
            client_port=scope["client"][1] if scope.get("client") else None,
            arrived_at=arrived_at,
        )
        with self._condition:
            self._records.append(record)
            self._condition.notify_all()
        if disconnected:
            record.mark_cancelled()
        else:
            await _serve(self._next_reply(record), record, receive, send)

    def _next_reply(self, record: Recorded) -> Reply:
        with self._condition:
            for suffix, queue in self._scripts.items():
                if queue and record.path.endswith(suffix):
                    return queue.popleft()
        if self.behaviour is not None and (reply := self.behaviour(record)) is not None:
            return reply
        if record.method == "GET" and record.path == "/props" and self.n_ctx is not None:
            # llama-server's shape: the context of one slot (tools/server/README.md).
            settings = {"n_ctx": self.n_ctx, "params": {}}
            return Raw(200, {"default_generation_settings": settings, "total_slots": 1})
        return builtin_reply(record)


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """Read the whole request body; also report whether the client disconnected meanwhile."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return bytes(body), True
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), False


async def _serve(reply: Reply, record: Recorded, receive: Receive, send: Send) -> None:
    """Play ``reply`` while watching for a client disconnect, and record the outcome."""

    async def tracking_send(message: Message) -> None:
        # Marked before the final write, so a client that saw the end also sees ``completed``.
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            record.completed = True
        await send(message)

    playing = asyncio.create_task(_play(reply, record, tracking_send))
    disconnect = asyncio.create_task(_wait_disconnect(receive))
    try:
        done, _ = await asyncio.wait({playing, disconnect}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        playing.cancel()
        disconnect.cancel()
        await asyncio.gather(playing, disconnect, return_exceptions=True)
    if playing in done:
        playing.result()
    elif not record.completed:
        record.mark_cancelled()


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _play(reply: Reply, record: Recorded, send: Send) -> None:
    match reply:
        case Chat() | Responses() | AnthropicMessage():
            rendered = reply.render(json_object(record.body), len(record.body))
            answer = SSE(rendered) if isinstance(rendered, list) else Raw(200, rendered)
            await _play(answer, record, send)
        case Raw():
            body = _body_bytes(reply.body)
            await _send_whole(send, reply.status, body, reply.media_type, reply.headers)
        case SSE():
            await _send_sse(reply, send)
        case Hang():
            await asyncio.get_running_loop().create_future()
        case Slow():
            await _wait_gate(reply.delay_gate)
            await _play(reply.then or builtin_reply(record), record, send)
        case Delayed():
            await asyncio.sleep(reply.seconds)
            await _play(reply.then, record, send)


async def _wait_gate(gate: threading.Event | None) -> None:
    """Wait for a test-thread event without blocking the loop (cancellable, unlike to_thread)."""
    while gate is not None and not gate.is_set():  # noqa: ASYNC110 - a thread's event
        await asyncio.sleep(_GATE_POLL_SECONDS)


async def _send_whole(
    send: Send,
    status: int,
    body: bytes,
    media_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> None:
    start_headers = [
        (b"content-type", media_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("ascii")),
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_sse(reply: SSE, send: Send) -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for index, event in enumerate(reply.events):
        if index == reply.gate_after:
            await _wait_gate(reply.gate)
        if reply.comment_pause_s and event.startswith(b":"):
            await asyncio.sleep(reply.comment_pause_s)
        await send({"type": "http.response.body", "body": event, "more_body": True})
    if reply.gate_after >= len(reply.events):
        await _wait_gate(reply.gate)
    if reply.break_after:
        # Returning without the final body message makes uvicorn close the transport
        # mid-body: the client sees the chunked body end without its terminating chunk.
        return
    if reply.end_pause_s:
        await asyncio.sleep(reply.end_pause_s)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


_SSE_EVENT = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r)|.+\Z", re.S)


def replay(path: Path, renames: Mapping[str, str] | None = None) -> SSE | Raw:
    """A recorded answer (a wire-corpus file): an ``.sse`` file's events, each flushed as
    its own body chunk, whatever the request's ``stream``; else the file as a 200 JSON
    body. Each key of ``renames`` is replaced by its value in the bytes first."""
    raw = path.read_bytes()
    for old, new in (renames or {}).items():
        raw = raw.replace(old.encode(), new.encode())
    if path.suffix == ".sse":
        return SSE([match.group(0) for match in _SSE_EVENT.finditer(raw) if match.group(0)])
    return Raw(200, raw)


def chat_events(reply: Chat, request: dict[str, Any]) -> list[bytes]:
    """The SSE events this upstream plays for ``reply`` to a streamed ``request`` (to
    script them with a gate: ``SSE(chat_events(...), gate=...)``)."""
    return reply.events(request, len(_json_bytes(request)))


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def _body_bytes(body: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return _json_bytes(body)
