"""No upstream round for a client that has left, wherever its request is suspended
(issue #34, item 1): the cancellation of a request's serving task, landing at any await
before the first upstream byte, and in any loop step after that await's result arrives,
ends the request with nothing sent upstream. On Python 3.11, ``asyncio.wait_for`` returned
the awaited result instead of raising when the cancellation landed in the same loop step
as that result (CPython gh-86296), and the request went on to run its rounds for nobody.

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream. The
test holds the request at one await point at a time — the upstream's context size
(``/props``), the conversation state's load, the catalogue's index build, the query's
embedding, the state's save — by wrapping that component of the live app so that it
returns its real result only once released. Then, in the proxy's event loop, one callback
releases it and, ``steps`` loop iterations later, cancels the serving task, as the
disconnect watcher does (:func:`proxy.http.asgi.run_until_disconnect`). The sweep over
``steps`` stops once the task has begun sending upstream: from there on a cancellation is
not "before the first upstream byte". Events drive everything; nothing sleeps.

A client that leaves while its body is still being read is a real early close on a raw
socket; so is one whose close reaches the proxy while its event loop is busy with the
request (the close is not read before the request's task yields, which is after its
upstream round was written): the proxy peeks at the connection before each round.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import queue
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import proxy.app
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream
from config.settings import Settings
from proxy.app import Services, create_app
from proxy.http.server import configure
from tests.integration.test_stream_faults import APIS, PATHS, SUFFIX, request_body
from tests.support.fault_matrix import proves
from tests.support.logs import Lines

POINTS = ("props", "state_load", "index", "embedding", "state_save")
#: Loop iterations swept between the release and the cancellation (the query embedding's
#: result reaches the serving task through three tasks: the batch, the request's embedding
#: and ``wait_for``'s own).
MAX_STEPS = 8
SOCKET_TIMEOUT_S = 60.0
_cases = itertools.count()


class Gates:
    """Holds one request at one await point of the live proxy (see the module docstring).

    Each gate holds after the component's real work, so a release hands the awaiting task
    its real result."""

    def __init__(self) -> None:
        self.point: str | None = None
        self.marker = ""
        self.entered = threading.Event()
        self.outcome: queue.Queue[bool] = queue.Queue()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.release: asyncio.Event | None = None
        self.serving: asyncio.Task[Any] | None = None
        self.sending = False

    def arm(self, point: str, marker: str) -> None:
        self.point, self.marker = point, marker
        self.entered.clear()
        self.serving, self.sending = None, False

    async def hold(self, point: str, texts: Sequence[str] = ()) -> None:
        """Hold here when armed for ``point`` (and, with ``texts``, when one of them
        carries the request's marker)."""
        if self.point != point or (texts and not any(self.marker in text for text in texts)):
            return
        self.point = None
        self.loop = asyncio.get_running_loop()
        self.release = asyncio.Event()
        self.entered.set()
        await self.release.wait()

    def fire(self, steps: int) -> None:
        """In the proxy's loop: release the held await, and cancel the serving task
        ``steps`` iterations later (at once with 0, in the same callback)."""
        assert self.release is not None and self.loop is not None
        self.release.set()
        self._cancel_after(steps)

    def close_and_release(self, client: socket.socket) -> None:
        """In the proxy's loop: the client closes, and in the same callback the held await
        is released, so the request's task runs on before the loop reads the close."""
        assert self.release is not None
        client.shutdown(socket.SHUT_RDWR)
        self.release.set()

    def _cancel_after(self, steps: int) -> None:
        assert self.loop is not None and self.serving is not None
        if steps:
            self.loop.call_soon(self._cancel_after, steps - 1)
            return
        late = self.sending or self.serving.done()
        if not late:
            self.serving.cancel()
        self.outcome.put(late)


class GatedEmbedder:
    """The configured embedder; its calls for a catalogue build (``index``) or a query
    (``embedding``) hold after embedding."""

    def __init__(self, inner: Any, gates: Gates) -> None:
        self.inner, self.gates = inner, gates

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = await self.inner.embed(texts)
        await self.gates.hold("index", texts)
        await self.gates.hold("embedding", texts)
        return vectors


class GatedStore:
    """The conversation state store; a load or a save of the serving task holds after it
    was done."""

    def __init__(self, inner: Any, gates: Gates) -> None:
        self.inner, self.gates = inner, gates

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, conversation_id: str) -> Any:
        state = await self.inner.get(conversation_id)
        if asyncio.current_task() is self.gates.serving:
            await self.gates.hold("state_load")
        return state

    async def put(self, conversation_id: str, state: Any) -> None:
        await self.inner.put(conversation_id, state)
        if asyncio.current_task() is self.gates.serving:
            await self.gates.hold("state_save")


def instrument(services: Services, gates: Gates) -> None:
    """Record each acting request's serving task and when it begins sending upstream;
    hold the state store's calls and the answer of ``GET /props``."""

    def recording(handle: Any) -> Any:
        async def handle_recorded(request: Any, send: Any) -> None:
            gates.serving = asyncio.current_task()
            await handle(request, send)

        return handle_recorded

    for api in services.apis.values():
        api.handle = recording(api.handle)  # type: ignore[method-assign]
    upstream = services.upstream
    send = upstream.send

    async def send_watched(method: str, url: str, headers: Any, content: bytes) -> Any:
        if asyncio.current_task() is gates.serving:
            gates.sending = True
        answer = await send(method, url, headers, content)
        if url.endswith("/props"):
            await gates.hold("props")
        return answer

    upstream.send = send_watched  # type: ignore[method-assign]
    (planner,) = {id(api.planner): api.planner for api in services.apis.values()}.values()
    planner.store = GatedStore(planner.store, gates)  # type: ignore[assignment]


@dataclass
class Served:
    upstream: Upstream
    proxy: str
    gates: Gates
    log: Lines


@contextmanager
def serving(**overrides: Any) -> Iterator[Served]:
    """The scripted upstream and the instrumented proxy (under the guarded protocol, as
    ``toolprune serve`` runs it); ``overrides``: ``Settings`` fields."""
    gates = Gates()
    log = Lines()
    logger = logging.getLogger("toolprune")
    logger.addHandler(log)
    fake = Upstream()
    build = proxy.app.build_embedder
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proxy.app, "build_embedder",
                      lambda *args, **kw: GatedEmbedder(build(*args, **kw), gates))
        try:
            with serve_in_thread(fake.app) as origin:
                # The catalogue is indexed however long it takes.
                settings = Settings(
                    upstream_url=origin + "/v1", max_tools=6, top_k=4, threshold=0.0,
                    index_timeout_s=300.0, upstream_stream=True, **overrides,
                )
                app = create_app(settings)
                with serve_in_thread(app, http=configure(settings)) as origin_proxy:
                    instrument(app.state.services, gates)
                    yield Served(fake, origin_proxy, gates, log)
        finally:
            logger.removeHandler(log)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    # /props answers 404 (no n_ctx) and is asked again at every request, so every request
    # waits for it.
    with serving(upstream_props_refresh_s=1e-6) as running:
        yield running


@pytest.fixture(scope="module")
def served_once() -> Iterator[Served]:
    """/props asked once: between two requests, nothing else takes a pooled upstream
    connection."""
    with serving() as running:
        yield running


def body_for(api: str, stream: bool, marker: str, point: str) -> bytes:
    body = {**request_body(api), "stream": stream}
    ask = f"{marker} open https://example.com in the browser and take a screenshot"
    if api == "responses":
        body["input"] = ask
    else:
        body["messages"] = [{"role": "user", "content": ask}]
    if point == "index":  # a catalogue not indexed yet: its build is awaited
        tools = [dict(tool) for tool in body["tools"]]
        first = tools[0]["function"] if api == "chat" else tools[0]
        first = dict(first, description=f"{first.get('description', '')} {marker}")
        if api == "chat":
            tools[0] = {**tools[0], "function": first}
        else:
            tools[0] = first
        body["tools"] = tools
    return json.dumps(body).encode()


def connect(origin: str) -> socket.socket:
    host, port = origin.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)


def request_head(api: str, length: int, request_id: str) -> bytes:
    return (f"POST {PATHS[api]} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def read_all(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def rounds_of(served: Served, api: str, marker: str) -> list[Any]:
    """The upstream rounds of the request whose ``X-Request-Id`` is ``marker`` (also one
    whose body the proxy did not send to its end)."""
    return [r for r in served.upstream.requests
            if r.path.endswith(SUFFIX[api]) and r.header("x-request-id") == marker]


def abort_at(served: Served, api: str, stream: bool, point: str, steps: int) -> tuple[bool, bytes, str]:
    """One request held at ``point`` and cancelled ``steps`` iterations after its
    release; (whether the cancellation came after sending had begun, the client's bytes,
    the request's marker)."""
    marker = f"case{next(_cases)}x"
    body = body_for(api, stream, marker, point)
    gates = served.gates
    gates.arm(point, marker)
    with connect(served.proxy) as sock:
        sock.sendall(request_head(api, len(body), marker) + body)
        assert gates.entered.wait(SOCKET_TIMEOUT_S), f"the request never reached {point}"
        assert gates.loop is not None
        gates.loop.call_soon_threadsafe(gates.fire, steps)
        late = gates.outcome.get(timeout=SOCKET_TIMEOUT_S)
        answer = read_all(sock)
    served.log.wait_for("request", marker)
    return late, answer, marker


@proves(
    fault="the client leaves at any await before the first upstream byte (the upstream's `/props`, the state's load, the index build, the query embedding, the state's save), in any loop step after that await's result",
    phase="after the client left",
    client="nothing; no upstream round is started for it (chat completions, Responses, Messages; streamed and plain)",
)
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("api", APIS)
def test_a_cancellation_at_any_await_before_the_first_upstream_byte_starts_no_round(
    served: Served, api: str, stream: bool, point: str
) -> None:
    before_sending = 0
    for steps in range(MAX_STEPS):
        late, answer, marker = abort_at(served, api, stream, point, steps)
        if late:  # the task was sending already: not a cancellation before the round
            break
        before_sending += 1
        assert rounds_of(served, api, marker) == [], (
            f"an upstream round started after the cancellation at {point}, step {steps}"
        )
        assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert before_sending >= 1


@proves(
    fault="the client leaves while its request body is being read",
    phase="after the client left",
    client="nothing; the request is never planned nor sent upstream",
)
@pytest.mark.parametrize("api", APIS)
def test_a_client_gone_while_its_body_is_read_starts_no_round(served: Served, api: str) -> None:
    marker = f"case{next(_cases)}x"
    body = body_for(api, True, marker, "body")
    with connect(served.proxy) as sock:
        sock.sendall(request_head(api, len(body), marker) + body[: len(body) // 2])
    line = served.log.wait_for("request", marker)
    assert line["status"] == 0 and line["upstream_rounds"] == 0
    assert rounds_of(served, api, marker) == []


@proves(
    fault="the client closes while the proxy's event loop is busy planning its request (the close not read yet when the round would be sent)",
    phase="after the client left",
    client="nothing; the connection is peeked before each upstream round, and no round is sent",
)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("api", APIS)
def test_a_close_the_event_loop_has_not_read_yet_starts_no_round(
    served_once: Served, api: str, stream: bool
) -> None:
    served = served_once
    # A request served first leaves a pooled upstream connection, on which the next round
    # would be written in the same loop step as the planning's end.
    warm = f"case{next(_cases)}x"
    with connect(served.proxy) as sock:
        body = body_for(api, stream, warm, "warm")
        sock.sendall(request_head(api, len(body), warm) + body)
        assert read_all(sock).startswith(b"HTTP/1.1 200")
    served.log.wait_for("request", warm)  # written once its upstream connection was released
    assert len(rounds_of(served, api, warm)) == 1
    marker = f"case{next(_cases)}x"
    body = body_for(api, stream, marker, "state_save")
    gates = served.gates
    gates.arm("state_save", marker)
    with connect(served.proxy) as sock:
        sock.sendall(request_head(api, len(body), marker) + body)
        assert gates.entered.wait(SOCKET_TIMEOUT_S)
        assert gates.loop is not None
        gates.loop.call_soon_threadsafe(gates.close_and_release, sock)
        assert read_all(sock) == b""
    line = served.log.wait_for("request", marker)
    assert not gates.sending, "the proxy began sending an upstream round"
    assert line["upstream_rounds"] == 0 and line["status"] == 0
    assert rounds_of(served, api, marker) == []
