"""One request must not stall, bloat or reach into what other requests own: header and
body limits, read deadlines, the connection bound, the conversation-id bound, state keyed
by credential, and the retry of a request that never reached the upstream.

Real servers on loopback: the proxy under uvicorn with the guarded protocol
(``proxy.server``), in front of the scripted upstream (or, for the stale-connection
retry, a raw socket upstream that closes a reused connection without answering).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Chat
from config.settings import Settings
from proxy.app import create_app
from proxy.http.server import configure
from tests.conftest import RunningUpstream
from tests.support.fault_matrix import proves

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
#: Not among what the first turn of ASK forwards: it arrives only by a load.
LOADED = "browser_sessionstorage_delete"
CHAT = "/v1/chat/completions"
SOCKET_TIMEOUT_S = 10.0


def guarded_proxy(stack: ExitStack, upstream_url: str, **overrides: Any) -> str:
    """A proxy served as ``toolprune serve`` serves it (guarded protocol)."""
    # A gateway to the proxy (``upstream_kind`` other): the upstream gets what the tests
    # send and nothing else, not the proxy's own questions about which server it is.
    settings = Settings(upstream_url=upstream_url, index_timeout_s=300.0, upstream_kind="other",
                        **overrides)
    return stack.enter_context(serve_in_thread(create_app(settings), http=configure(settings)))


@pytest.fixture
def start_guarded(upstream: RunningUpstream) -> Iterator[Any]:
    with ExitStack() as stack:
        yield lambda **overrides: guarded_proxy(stack, upstream.base_url, **overrides)


def chat_body(stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": stream}


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith(CHAT)]


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def raw_exchange(origin: str, data: bytes) -> bytes:
    """Send ``data`` on a new connection and read until the server closes it."""
    host, port = origin.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def error_of(response: httpx.Response) -> dict[str, Any]:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


# --- 1. headers ---------------------------------------------------------------------------
@proves(
    fault="more request headers, or header bytes, than the limits",
    phase="request",
    client="431 `request_headers_too_large`; nothing forwarded",
)
def test_too_many_headers_are_refused_with_431_before_forwarding(
    upstream: RunningUpstream, start_guarded: Any
) -> None:
    proxy = start_guarded()
    headers = [(f"x-filler-{i}", "v") for i in range(150)]
    response = httpx.post(proxy + CHAT, json=chat_body(), headers=headers, timeout=30)
    assert response.status_code == 431
    assert error_of(response)["code"] == "request_headers_too_large"
    oversized = httpx.get(proxy + "/v1/models", headers={"x-big": "a" * 40_000}, timeout=30)
    assert oversized.status_code == 431
    assert upstream.upstream.requests == []


# --- 4. conversation id -------------------------------------------------------------------
def test_an_oversized_conversation_id_is_a_400(
    upstream: RunningUpstream, start_guarded: Any
) -> None:
    proxy = start_guarded()
    response = httpx.post(
        proxy + CHAT, json=chat_body(), headers={"X-Conversation-Id": "c" * 1024}, timeout=30
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_toolprune_header"
    assert upstream.upstream.requests == []


# --- 5. slow clients ----------------------------------------------------------------------
@proves(
    fault="request headers that trickle past `header_timeout_s`",
    phase="request",
    client="408 `request_timeout`, and the connection closed",
)
def test_headers_that_trickle_past_the_deadline_get_408_and_the_connection_closes(
    start_guarded: Any,
) -> None:
    proxy = start_guarded(header_timeout_s=0.5)
    answer = raw_exchange(proxy, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"


def test_a_body_that_trickles_past_the_deadline_gets_408(
    upstream: RunningUpstream, start_guarded: Any
) -> None:
    proxy = start_guarded(body_timeout_s=0.5)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 1000\r\n\r\n{\"model\":"
    )
    answer = raw_exchange(proxy, head)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert upstream.upstream.requests == []


@proves(
    fault="a connection beyond `max_connections`",
    phase="request",
    client="503 `too_many_connections`, and the connection closed",
)
def test_connections_past_the_bound_are_answered_503_and_closed(start_guarded: Any) -> None:
    proxy = start_guarded(max_connections=3)
    host, port = proxy.removeprefix("http://").split(":")
    held = []
    try:
        for _ in range(3):  # kept-alive connections, each accepted and counted
            sock = socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            held.append(sock)
        answer = raw_exchange(proxy, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in held:
            sock.close()


# --- 7. isolation -------------------------------------------------------------------------
def load_call(tool: str) -> dict[str, str]:
    return {"id": "meta_1", "name": "load_tools", "arguments": json.dumps({"names": [tool]})}


@pytest.mark.parametrize("shared", [False, True])
def test_another_credential_cannot_plant_loads_in_a_conversation_unless_sharing_is_on(
    upstream: RunningUpstream, start_guarded: Any, shared: bool
) -> None:
    proxy = start_guarded(state_shared_across_credentials=shared)
    upstream.upstream.script(Chat(content=None, tool_calls=[load_call(LOADED)]), Chat(content="ok"))
    attacker = {"X-Conversation-Id": "victim", "Authorization": "Bearer key-of-mallory"}
    assert httpx.post(proxy + CHAT, json=chat_body(), headers=attacker, timeout=300).status_code == 200
    assert LOADED in names(chat_requests(upstream)[-1].json()["tools"])
    assert LOADED not in names(chat_requests(upstream)[-2].json()["tools"])  # not selected
    victim = {"X-Conversation-Id": "victim", "Authorization": "Bearer key-of-alice"}
    assert httpx.post(proxy + CHAT, json=chat_body(), headers=victim, timeout=300).status_code == 200
    assert (LOADED in names(chat_requests(upstream)[-1].json()["tools"])) is shared


# --- 9. stale pooled connection -----------------------------------------------------------
class ClosingUpstream:
    """A raw HTTP/1.1 upstream on loopback: answers each connection's first request (with
    keep-alive), and closes the connection without a byte of answer when a request comes
    on a reused connection (``close_reused``) or on any connection (``close_all``)."""

    OK = b'{"object":"list","data":[]}'

    def __init__(self, *, close_all: bool = False) -> None:
        self.close_all = close_all
        self.requests = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.origin = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            served = 0
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                self.requests += 1
                if self.close_all or served >= 1:
                    return  # closed without answering
                served += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(self.OK), self.OK))

    def close(self) -> None:
        self._server.close()


@proves(
    fault="the upstream closed a pooled connection as the proxy reused it (no response byte)",
    phase="before the upstream answers",
    client="the answer: the request is sent again once, on a new connection",
)
def test_a_request_on_a_pooled_connection_the_upstream_closed_is_sent_again_once() -> None:
    closing = ClosingUpstream()
    try:
        with ExitStack() as stack:
            proxy = guarded_proxy(stack, closing.origin + "/v1")
            with httpx.Client(timeout=30) as client:
                assert client.get(proxy + "/v1/models").status_code == 200
                # the proxy's pooled connection is reused; the upstream drops it unanswered
                second = client.post(proxy + "/v1/models", content=b"{}")
            assert second.status_code == 200
            assert closing.requests == 3  # first, dropped, retried on a new connection
    finally:
        closing.close()


@pytest.mark.parametrize("method", ["POST", "GET"])  # GET: idempotent, still sent once
def test_a_fresh_connection_closed_unanswered_is_not_retried(method: str) -> None:
    closing = ClosingUpstream(close_all=True)
    try:
        with ExitStack() as stack:
            proxy = guarded_proxy(stack, closing.origin + "/v1")
            response = httpx.request(method, proxy + "/v1/models", content=b"{}", timeout=30)
            assert response.status_code == 502
            assert error_of(response)["code"] == "upstream_unavailable"
            assert "closed the connection before answering" in error_of(response)["message"]
            assert closing.requests == 1
    finally:
        closing.close()
