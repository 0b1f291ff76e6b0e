"""Limits answer in the API's shape, and paths are normalised before forwarding (issue
#28, items 5 and 6): a body over the limit gets 413 (never a connection reset), a body
that trickles gets 408, a body nested deeper than 900 levels (``MAX_JSON_DEPTH``), with tools
or without, gets 400 with a decision-log reason (never a RecursionError), and only normalised paths under the
upstream's base are forwarded (400 otherwise).

Real servers on loopback: the proxy under uvicorn as ``toolprune serve`` runs it (the
guarded protocol), in front of the scripted upstream.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app
from proxy.http.server import configure
from tests.conftest import RunningUpstream
from tests.integration.test_stream_faults import APIS, PATHS, SUFFIX, request_body
from tests.support.fault_matrix import proves
from tests.support.logs import Lines

SOCKET_TIMEOUT_S = 30.0


@pytest.fixture
def start_served(upstream: RunningUpstream) -> Iterator[Any]:
    with ExitStack() as stack:

        def start(**overrides: Any) -> str:
            # ``upstream_kind`` other: the upstream gets only what the tests send (not the
            # proxy's questions about which server it is).
            settings = Settings(upstream_url=upstream.base_url, index_timeout_s=300.0,
                                upstream_kind="other", **overrides)
            return stack.enter_context(serve_in_thread(create_app(settings), http=configure(settings)))

        yield start


def raw_connection(origin: str) -> socket.socket:
    host, port = origin.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)


def read_all(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def posts(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.method == "POST"]


# --- item 5: body size ----------------------------------------------------------------------
@proves(
    fault="a request body over `max_request_bytes` (declared by Content-Length)",
    phase="request",
    client="413 `request_too_large` in the API's error shape, read whole (never a connection reset); nothing forwarded",
)
def test_a_33_mb_body_gets_a_413_not_a_reset(upstream: RunningUpstream, start_served: Any) -> None:
    proxy = start_served()
    body = b'{"model": "m", "messages": [], "pad": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    response = httpx.post(proxy + "/v1/chat/completions", content=body,
                          headers={"content-type": "application/json"}, timeout=120)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert posts(upstream) == []


@proves(
    fault="a chunked request body that grows over `max_request_bytes`",
    phase="request",
    client="413 `request_too_large` (Anthropic's shape on `/v1/messages`), never a connection reset",
)
def test_a_chunked_body_over_the_limit_gets_a_413(upstream: RunningUpstream, start_served: Any) -> None:
    proxy = start_served(max_request_bytes=1_000_000)

    def pieces() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * 100_000

    response = httpx.post(proxy + "/v1/messages", content=pieces(), timeout=120)
    assert response.status_code == 413
    assert response.json() == {"type": "error", "error": {
        "type": "request_too_large", "message": "request body exceeds 1000000 bytes"}}
    assert posts(upstream) == []


# --- item 5: a body that trickles ---------------------------------------------------------------
@proves(
    fault="a request body that trickles (1 byte at a time, below 500 B/s)",
    phase="request",
    client="408 `request_timeout` once `body_timeout_s` and the second per 500 bytes received are spent, and the connection closed",
)
def test_a_trickled_body_gets_a_408_and_its_connection_closes(
    upstream: RunningUpstream, start_served: Any
) -> None:
    proxy = start_served(body_timeout_s=0.5)
    sock = raw_connection(proxy)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: 100000\r\n\r\n")
    sock.settimeout(0.05)  # paces the trickle: one byte per wait for the proxy's answer
    answer = b""
    for _ in range(100_000):
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            sock.sendall(b" ")
            continue
        break
    sock.settimeout(SOCKET_TIMEOUT_S)
    answer += read_all(sock)  # the proxy closes the connection
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert posts(upstream) == []


# --- item 5: nesting depth --------------------------------------------------------------------
PLACE = "@nested@"


def containers_above(value: Any, target: str) -> int | None:
    """How many objects and arrays hold the string ``target`` in ``value`` (None: absent)."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if children is None:
        return 0 if value == target else None
    for child in children:
        found = containers_above(child, target)
        if found is not None:
            return found + 1
    return None


def nested(api: str, depth: int, *, tools: bool = True, stream: bool = False) -> bytes:
    """A request of ``api`` nesting JSON exactly ``depth`` levels (the body's object is
    1): with tools, inside the first tool's parameter schema (the deepest path through
    the proxy: the catalogue is parsed, ranked and its body written again); without, in a
    field of a body that has none."""
    body = request_body(api)
    body["stream"] = stream
    if tools:
        tool = body["tools"][0]
        schema = tool["function"]["parameters"] if api == "chat" else (
            tool["input_schema"] if api == "messages" else tool["parameters"])
        schema["properties"] = {**schema.get("properties", {}), "deep": PLACE}
    else:
        body.pop("tools")
        body["metadata_extra"] = PLACE
    arrays = depth - containers_above(body, PLACE)
    text = json.dumps(body).replace(json.dumps(PLACE), "[" * arrays + "]" * arrays)
    return text.encode()


@proves(
    fault="a request body nested deeper than 900 levels, with tools or without (901 and 5,000 levels)",
    phase="request",
    client="400 `request_too_deeply_nested` in the API's error shape, naming the 900 levels; one decision line, decision `rejected`, reason `json_too_deep`; never a RecursionError nor an internal error",
)
@pytest.mark.parametrize(("api", "depth"), [*((api, 901) for api in APIS), *((api, 5000) for api in APIS)])
@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
def test_a_body_nested_too_deep_gets_a_400_with_a_logged_reason(
    upstream: RunningUpstream, start_served: Any, log_lines: Lines, api: str, depth: int,
    tools: bool,
) -> None:
    proxy = start_served()
    response = httpx.post(proxy + PATHS[api], content=nested(api, depth, tools=tools),
                          headers={"content-type": "application/json"}, timeout=120)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == ("the request body nests JSON deeper than 900 levels, the most "
                                "the proxy reads")
    if api == "messages":
        assert error["type"] == "invalid_request_error"
    else:
        assert error["code"] == "request_too_deeply_nested"
    assert [r for r in upstream.upstream.requests if r.path.endswith(SUFFIX[api])] == []
    request_id = response.headers["x-request-id"]
    decision = log_lines.wait_for("pruning_decision", request_id)
    assert (decision["decision"], decision["reason"]) == ("rejected", "json_too_deep")
    assert len(log_lines.events("pruning_decision")) == 1
    assert not [f for e, f in log_lines.lines if e in ("internal_error", "fallback_full_catalog")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("api", APIS)
def test_a_body_nested_900_deep_is_served_with_tools_or_without(
    upstream: RunningUpstream, start_served: Any, log_lines: Lines, api: str, stream: bool
) -> None:
    """900 levels, the limit the error names, is read on every path: a body without tools
    is passed through, one whose tool schema nests that deep is pruned and served."""
    proxy = start_served(max_tools=6, top_k=4, threshold=0.0)
    for tools, decision in ((False, "passthrough"), (True, "pruned")):
        response = httpx.post(proxy + PATHS[api], content=nested(api, 900, tools=tools, stream=stream),
                              headers={"content-type": "application/json"}, timeout=120)
        assert response.status_code == 200, response.text[:300]
        line = log_lines.wait_for("request", response.headers["x-request-id"])
        assert line["decision"] == decision


# --- item 6: paths ----------------------------------------------------------------------------
@proves(
    fault="a path that leaves the upstream's base (`/v1/../../etc/passwd`, `//host/x`, `/v1/%2e%2e/x`)",
    phase="request",
    client="400 `invalid_path`; nothing forwarded",
)
@pytest.mark.parametrize("path", ["/v1/../../etc/passwd", "//host/x", "/v1/%2e%2e/%2e%2e/etc/passwd",
                                  "/v1/./models", "/v1//models", "/v1/a/../../x", "/v1/%2F%2E%2E"])
def test_paths_that_are_not_normalised_are_refused(
    upstream: RunningUpstream, start_served: Any, path: str
) -> None:
    proxy = start_served()
    sock = raw_connection(proxy)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "invalid_path"
    assert upstream.upstream.requests == []


def test_normalised_paths_are_forwarded_as_sent(upstream: RunningUpstream, start_served: Any) -> None:
    proxy = start_served()
    for path in ("/v1/models", "/v1/models/some%2Fmodel", "/health", "/v1/files/a.b"):
        httpx.get(proxy + path)
    assert [(r.path, r.method) for r in upstream.upstream.requests] == [
        ("/v1/models", "GET"), ("/v1/models/some/model", "GET"), ("/health", "GET"), ("/v1/files/a.b", "GET")]
