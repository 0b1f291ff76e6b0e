"""A body over the limit gets its 413 also from a client that writes the whole body before
it reads (issue #34, item 5): the proxy answers, stops reading the body, and drains
(discards) what still arrives for a bounded time and number of bytes before it closes —
a lingering close (RFC 9112 §9.6), as for a request whose headers came too late. Before,
a body sent in one write with ``Connection: close`` got the 413 and an immediate close
with the body unread: the client's write failed with a reset.

Real servers on loopback: the proxy under uvicorn as ``toolprune serve`` runs it (the
guarded protocol), in front of the scripted upstream; a raw socket as the client.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from proxy.http.server import LINGER_BYTES
from tests.conftest import RunningUpstream
from tests.integration.test_limits import posts, raw_connection, read_all, start_served
from tests.support.fault_matrix import proves

__all__ = ["start_served"]  # the fixture, shared with test_limits

MIB = 1024 * 1024


def head(length: int) -> bytes:
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length: {length}\r\n\r\n").encode()


@proves(
    fault="a 33 MB body sent in one write with `Connection: close`, the client reading only once it was written",
    phase="request",
    client="413 `request_too_large`: the rest of the body is drained (discarded, at most 1 s and 64 MiB), then the connection closed; never a reset",
)
def test_a_33_mb_body_in_one_write_gets_its_413_read_after_the_write(
    upstream: RunningUpstream, start_served: Any
) -> None:
    proxy = start_served()
    body = b'{"model": "m", "messages": [], "pad": "' + b"x" * (33 * MIB) + b'"}'
    with raw_connection(proxy) as sock:
        sock.sendall(head(len(body)) + body)  # a reset here: the body was not drained
        answer = read_all(sock)
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 413 "), answer[:300]
    headers, _, payload = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in headers.lower()
    assert json.loads(payload)["error"]["code"] == "request_too_large"
    assert posts(upstream) == []


def test_the_drain_after_a_413_is_bounded(upstream: RunningUpstream, start_served: Any) -> None:
    proxy = start_served()
    declared = 4 * LINGER_BYTES
    piece = b"x" * MIB
    with raw_connection(proxy) as sock:
        sock.sendall(head(declared))
        with pytest.raises(OSError):  # the proxy closes before the body's end
            for _ in range(declared // MIB):
                sock.sendall(piece)
            sock.shutdown(socket.SHUT_WR)
            assert read_all(sock) == b""
    assert posts(upstream) == []
