"""No upstream work outlives its client (issue #28, item 3): a client gone while its request
is planned gets no upstream round started for it. The same for Chat Completions, Responses
and Messages (a client gone during a hidden round: ``test_turn_faults.py``).

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream,
which records each request's arrival and whether its client went away; the test holds
the upstream at gates and waits on those records, never on a clock.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import httpx
import pytest

from benchmarks.support.upstream import Raw, Slow
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_stream_faults import APIS, PATHS, SUFFIX, request_body
from tests.support.fault_matrix import proves


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def raw_request(proxy: str, api: str) -> socket.socket:
    """Send the API's streamed request on a raw socket (so the test decides when it closes)."""
    body = json.dumps(request_body(api)).encode()
    host, port = proxy.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = (f"POST {PATHS[api]} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body)
    return sock


def barrier(upstream: RunningUpstream, proxy: str, api: str) -> None:
    """A second, pruned request with the same catalogue served to its end: its planning
    came after the first request's, so whatever the first was going to send upstream was
    sent by then."""
    upstream.upstream.script(Raw(200, {"error": {"message": "barrier"}}), path=SUFFIX[api])
    httpx.post(proxy + PATHS[api], json={**request_body(api), "stream": False}, timeout=300)


def sent(upstream: RunningUpstream, api: str) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith(SUFFIX[api])]


@proves(
    fault="the client leaves while its request is being planned",
    phase="after the client left",
    client="nothing; no upstream round is started for it",
)
@pytest.mark.parametrize("api", APIS)
def test_a_client_gone_during_planning_starts_no_round(
    upstream: RunningUpstream, start_proxy: ProxyFactory, api: str
) -> None:
    # Planning waits for the upstream's context size (llama-server's /props), held here.
    props = threading.Event()
    answer = Raw(200, {"default_generation_settings": {"n_ctx": 65536}, "total_slots": 1})
    upstream.upstream.script(Slow(props, answer), path="/props")
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, readiness_timeout_s=300.0)
    sock = raw_request(proxy, api)
    upstream.upstream.wait_for(lambda records: any(r.path == "/props" for r in records))
    sock.close()  # the client leaves while its request is being planned
    props.set()
    barrier(upstream, proxy, api)
    assert len(sent(upstream, api)) == 1  # the barrier's only
