"""The proxy ``toolprune eval --live`` sends its cases through: the app of ``toolprune
serve`` (:func:`proxy.app.create_app`, the settings given) under uvicorn on a free loopback
port, in front of a relay that forwards every request to the model server and meters the
chat-completion rounds it carries (:class:`Meter`); and the proxy's own log lines of each
request (:class:`DecisionLines`). Both servers run in threads of their own, each with its
event loop.

The relay is what shows the first round's tools exactly as the server got them, and the
server's costs of every round, hidden ones too; the ``pruning_decision`` line says what
the proxy's meta-calls loaded (docs/metrics-and-logs.md).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from config.settings import Settings
from proxy.app import create_app
from proxy.log import LOGGER_NAME, JsonFormatter

#: How long the servers may take to start, and the proxy to be ready (its embedder
#: loaded, the upstream answering), seconds.
STARTUP_TIMEOUT_S = 120.0
#: How long a request's log lines may trail its response, seconds.
LOG_LINES_TIMEOUT_S = 30.0
_POLL_S = 0.05
#: Headers not relayed: the connection's own, and those httpx sets for the body it sends
#: or has decoded.
_HOP_HEADERS = frozenset({
    "host", "connection", "keep-alive", "transfer-encoding", "content-length",
    "content-encoding", "accept-encoding", "upgrade", "te", "trailer",
})
CHAT_SUFFIX = "/chat/completions"


class LiveProxyError(OSError):
    """A server of the live run did not start, or the proxy did not get ready (an OSError:
    ``toolprune eval`` reports it as it reports a file it cannot read)."""


@dataclass
class Round:
    """One chat-completion request the server got: the function ``tools`` it offered
    (names), the answer's ``status``, its ``usage`` and llama-server's ``timings`` (None
    when absent)."""

    tools: list[str]
    status: int
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None


@dataclass
class Meter:
    """The chat-completion rounds the relay carried, by the request's ``X-Request-Id``
    (the proxy forwards the client's)."""

    rounds: dict[str, list[Round]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request_id: str, one: Round) -> None:
        with self._lock:
            self.rounds.setdefault(request_id, []).append(one)

    def of(self, request_id: str) -> list[Round]:
        """The rounds of request ``request_id``, in order."""
        with self._lock:
            return list(self.rounds.get(request_id, ()))


def _function_names(body: Any) -> list[str]:
    tools = body.get("tools") if isinstance(body, dict) else None
    names = []
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def answer_costs(content: bytes, content_type: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``usage`` and ``timings`` of a chat-completion answer: a JSON body, or the last
    of each in an event stream's chunks; None where absent."""
    if "text/event-stream" in content_type:
        chunks = [line[5:].strip() for line in content.decode("utf-8", "replace").splitlines()
                  if line.startswith("data:")]
    else:
        chunks = [content.decode("utf-8", "replace")]
    usage = timings = None
    for chunk in chunks:
        try:
            parsed = json.loads(chunk)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(parsed, dict):
            usage = parsed["usage"] if isinstance(parsed.get("usage"), dict) else usage
            timings = parsed["timings"] if isinstance(parsed.get("timings"), dict) else timings
    return usage, timings


def relay_app(origin: str, meter: Meter, timeout_s: float) -> Starlette:
    """An app that forwards every request to ``origin`` (scheme and host of the model
    server: the path is kept) and meters its chat-completion rounds in ``meter``; a server
    that does not answer (``timeout_s``, or a transport error) is a 502."""
    clients: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            clients.append(client)
            yield

    async def relay(request: Request) -> Response:
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS]
        url = origin + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            answer = await clients[0].request(request.method, url, content=body, headers=headers)
        except httpx.HTTPError as error:  # the proxy answers its client as for any upstream
            failed = {"error": {"message": f"the model server did not answer: {type(error).__name__}",
                                "type": "server_error"}}
            return Response(json.dumps(failed), 502, media_type="application/json")
        if request.method == "POST" and request.url.path.endswith(CHAT_SUFFIX):
            try:
                sent = json.loads(body)
            except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
                sent = None
            usage, timings = answer_costs(answer.content, answer.headers.get("content-type", ""))
            meter.add(request.headers.get("x-request-id", ""),
                      Round(_function_names(sent), answer.status_code, usage, timings))
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS}
        return Response(answer.content, answer.status_code, headers=kept)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", relay, methods=methods)], lifespan=lifespan)


class DecisionLines(logging.Handler):
    """The proxy's ``pruning_decision`` and ``request`` log lines, by request id."""

    def __init__(self) -> None:
        super().__init__()
        self._lines: dict[tuple[str, str], dict[str, Any]] = {}
        self._added = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        event = record.getMessage()
        if event in ("pruning_decision", "request") and isinstance(fields, dict):
            with self._added:
                self._lines[(event, str(fields.get("request_id")))] = dict(fields)
                self._added.notify_all()

    def decision(self, request_id: str) -> dict[str, Any] | None:
        """The request's ``pruning_decision`` fields once its ``request`` line is written
        (the last line of every request; None: the request was not planned). Raises
        TimeoutError when no ``request`` line comes within :data:`LOG_LINES_TIMEOUT_S`."""
        with self._added:
            if not self._added.wait_for(lambda: ("request", request_id) in self._lines,
                                        LOG_LINES_TIMEOUT_S):
                raise TimeoutError(f"the proxy wrote no request line for {request_id}")
            self._lines.pop(("request", request_id))
            return self._lines.pop(("pruning_decision", request_id), None)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` under uvicorn on a free loopback port in a thread of its own; yield
    its origin (``http://127.0.0.1:PORT``); stop it on exit. Raises LiveProxyError when it
    does not start within :data:`STARTUP_TIMEOUT_S`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", log_config=None,
        access_log=False, lifespan="on", timeout_graceful_shutdown=1,
    ))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"eval-live-{port}")
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise LiveProxyError(f"a server of the live run did not start on port {port}")
            time.sleep(_POLL_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_TIMEOUT_S)
        sock.close()


@dataclass
class LiveProxy:
    """The running proxy: its ``origin``, the relay's ``meter`` and the proxy's ``lines``."""

    origin: str
    meter: Meter
    lines: DecisionLines


def _wait_ready(origin: str) -> None:
    """Wait until the proxy's ``/readyz`` says ready. Raises LiveProxyError with its checks
    when it does not within :data:`STARTUP_TIMEOUT_S`."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    checks: Any = None
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(origin + "/readyz", timeout=STARTUP_TIMEOUT_S)
            if answer.status_code == 200:
                return
            checks = answer.json().get("checks")
        except (httpx.HTTPError, ValueError) as error:
            checks = str(error)
        time.sleep(_POLL_S)
    raise LiveProxyError(f"the proxy did not get ready in {STARTUP_TIMEOUT_S:.0f} s: {checks}")


@contextmanager
def live_proxy(settings: Settings, base_url: str, *, log: logging.Handler,
               timeout_s: float) -> Iterator[LiveProxy]:
    """The proxy of ``settings`` (its ``upstream_url`` replaced by the relay's) in front of
    the server at ``base_url``, ready; ``log``: where the proxy's own log lines go (JSON
    lines; the ``pruning_decision`` and ``request`` ones are also read here); ``timeout_s``:
    the relay's wait for the server, per request. Raises LiveProxyError when it does not get
    ready (the checks of ``/readyz`` said why)."""
    parts = urlsplit(base_url.rstrip("/"))
    meter, lines = Meter(), DecisionLines()
    logger = logging.getLogger(LOGGER_NAME)
    log.setFormatter(JsonFormatter())  # the proxy's start-up adds no stderr handler then
    logger.addHandler(log)
    logger.addHandler(lines)
    try:
        with serving(relay_app(f"{parts.scheme}://{parts.netloc}", meter, timeout_s)) as relay:
            proxied = settings.model_copy(update={"upstream_url": relay + parts.path})
            with serving(create_app(proxied)) as origin:
                _wait_ready(origin)
                yield LiveProxy(origin, meter, lines)
    finally:
        logger.removeHandler(lines)
        logger.removeHandler(log)
