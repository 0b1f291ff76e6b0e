"""No upstream work outlives its client (issue #28, item 3): once the client is gone, no
new upstream round starts (a first round, a hidden re-issue), and what is in flight is
closed at once. The same for Chat Completions, Responses and Messages.

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

from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_stream_faults import APIS, PATHS, SUFFIX, request_body
from benchmarks.support.api_replies import Message, Responses
from tests.support.fault_matrix import proves
from benchmarks.support.upstream import SSE, Chat, Raw, Slow, chat_events

LOADED = "browser_cookie_set"


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def load_reply(api: str) -> Any:
    arguments = json.dumps({"names": [LOADED]})
    if api == "chat":
        return Chat(content=None, tool_calls=[{"id": "call_meta", "name": "load_tools", "arguments": arguments}])
    if api == "responses":
        return Responses(text=None, calls=[{"call_id": "call_meta", "name": "load_tools", "arguments": arguments}])
    return Message(text=None, calls=[{"id": "toolu_meta", "name": "load_tools", "input": {"names": [LOADED]}}])


def events_of(reply: Any, api: str, body: dict[str, Any]) -> list[bytes]:
    """The SSE events the scripted upstream would play for ``reply``."""
    if api == "chat":
        return chat_events(reply, body)
    return reply.render(body, 100)


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


@proves(
    fault="the client leaves while a hidden `load_tools` round is being read",
    phase="after the client left",
    client="nothing more; the round in flight is closed and no re-issue is sent",
)
@pytest.mark.parametrize("api", APIS)
def test_a_client_gone_during_a_hidden_round_gets_no_reissue(
    upstream: RunningUpstream, proxy: str, api: str
) -> None:
    gate = threading.Event()
    events = events_of(load_reply(api), api, request_body(api))
    upstream.upstream.script(SSE(events, gate=gate, gate_after=len(events) - 1), path=SUFFIX[api])
    sock = raw_request(proxy, api)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")  # the stream started
    upstream.upstream.wait_for(lambda records: bool(sent(upstream, api)))
    sock.close()  # the client leaves before the hidden call's round ends
    assert upstream.upstream.wait_cancelled(upstream.upstream.requests.index(sent(upstream, api)[0]))
    gate.set()
    barrier(upstream, proxy, api)
    assert len(sent(upstream, api)) == 2  # the first round and the barrier: no re-issue
