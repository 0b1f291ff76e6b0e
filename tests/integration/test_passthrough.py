"""The proxy is invisible when it has nothing to do (issue #2): real uvicorn servers on
loopback, the official ``openai`` SDK and httpx as clients."""

from __future__ import annotations

import gzip
import http.client
import json
import threading

import httpx
import openai
import pytest

from benchmarks.support.servers import free_port
from benchmarks.support.upstream import SSE, Chat, Hang, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.fault_matrix import proves
from tests.support.sse import chat_chunks, parse_sse

MESSAGES = [{"role": "user", "content": "Say hi"}]


def test_sdk_plain_result_equals_calling_the_upstream_directly(
    upstream: RunningUpstream, proxy: str
) -> None:
    scripted = Chat(content="hello there", id="chatcmpl-fixed")
    upstream.upstream.script(scripted, scripted)
    direct = openai.OpenAI(base_url=upstream.base_url, api_key="k").chat.completions.create(
        model="m", messages=MESSAGES
    )
    proxied = openai.OpenAI(base_url=proxy + "/v1", api_key="k").chat.completions.create(
        model="m", messages=MESSAGES
    )
    assert proxied.choices[0].message.content == "hello there"
    assert proxied.model_dump(exclude={"created"}) == direct.model_dump(exclude={"created"})


def test_sdk_streaming_result_equals_calling_the_upstream_directly(
    upstream: RunningUpstream, proxy: str
) -> None:
    call = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}
    scripted = Chat(content="checking", tool_calls=[call], id="chatcmpl-fixed")
    upstream.upstream.script(scripted, scripted)

    def collect(base_url: str) -> list[dict]:
        client = openai.OpenAI(base_url=base_url, api_key="k")
        stream = client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        return [chunk.model_dump(exclude={"created"}) for chunk in stream]

    direct, proxied = collect(upstream.base_url), collect(proxy + "/v1")
    assert proxied == direct
    arguments = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for c in proxied
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    )
    assert json.loads(arguments) == {"city": "Oslo"}
    assert proxied[-1]["usage"] is not None


def test_untouched_bodies_arrive_byte_identical(upstream: RunningUpstream, proxy: str) -> None:
    raw = b'{"model":"m",  "messages":[{"role":"user","content":"caf\\u00e9 \xe2\x98\x95"}] }'
    response = httpx.post(
        proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert upstream.upstream.requests[-1].body == raw


def test_paths_outside_v1_go_to_the_upstream_origin_with_their_query(
    upstream: RunningUpstream, proxy: str
) -> None:
    response = httpx.get(proxy + "/health?verbose=1&x=%2F")
    assert response.json() == {"status": "ok"}
    recorded = upstream.upstream.requests[-1]
    assert (recorded.path, recorded.query) == ("/health", "verbose=1&x=%2F")
    tokenized = httpx.post(proxy + "/tokenize", json={"content": "a b c"})
    assert len(tokenized.json()["tokens"]) == 3


def test_v1_paths_map_under_the_upstream_base(upstream: RunningUpstream, start_proxy: ProxyFactory) -> None:
    proxy = start_proxy(upstream_url=upstream.origin + "/api/v1")
    models = openai.OpenAI(base_url=proxy + "/v1", api_key="k").models.list()
    assert models.data
    assert upstream.upstream.requests[-1].path == "/api/v1/models"


def test_hop_by_hop_and_proxy_headers_are_not_forwarded(
    upstream: RunningUpstream, proxy: str
) -> None:
    httpx.post(
        proxy + "/v1/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={
            "Connection": "keep-alive, X-Private",
            "X-Private": "secret",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "X-Tool-Pruning": "on",
            "X-Conversation-Id": "conv-1",
            "X-Custom": "kept",
            "Authorization": "Bearer sk-test",
        },
    )
    recorded = upstream.upstream.requests[-1]
    names = {name for name, _ in recorded.headers}
    assert not names & {"x-private", "keep-alive", "te", "x-tool-pruning", "x-conversation-id"}
    assert recorded.header("x-custom") == "kept"
    assert recorded.header("authorization") == "Bearer sk-test"
    assert recorded.header("host") == upstream.origin.removeprefix("http://")
    assert recorded.header("content-length") == str(len(recorded.body))


def test_the_proxy_adds_no_request_headers_of_its_own(
    upstream: RunningUpstream, proxy: str
) -> None:
    origin = httpx.URL(proxy)
    connection = http.client.HTTPConnection(origin.host, origin.port, timeout=30)
    try:  # http.client sends Host and Accept-Encoding: identity only
        connection.request("GET", "/v1/models")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    names = sorted(name for name, _ in upstream.upstream.requests[-1].headers)
    assert names == ["accept-encoding", "host", "x-request-id"]


def test_expect_100_continue_is_answered_by_the_proxy_not_forwarded(
    upstream: RunningUpstream, proxy: str
) -> None:
    body = json.dumps({"model": "m", "messages": MESSAGES, "padding": "x" * 2_000_000})
    response = httpx.post(
        proxy + "/v1/chat/completions", content=body, timeout=30,
        headers={"content-type": "application/json", "expect": "100-continue"},
    )
    assert response.status_code == 200
    recorded = upstream.upstream.requests[-1]
    assert recorded.header("expect") is None
    assert recorded.body == body.encode()


def test_a_compressed_request_body_is_forwarded_with_its_encoding(
    upstream: RunningUpstream, proxy: str
) -> None:
    compressed = gzip.compress(json.dumps({"model": "m", "messages": MESSAGES}).encode())
    httpx.post(
        proxy + "/v1/chat/completions",
        content=compressed,
        headers={"content-encoding": "gzip", "content-type": "application/json"},
    )
    recorded = upstream.upstream.requests[-1]
    assert recorded.body == compressed
    assert recorded.header("content-encoding") == "gzip"


def test_request_id_is_forwarded_or_generated(upstream: RunningUpstream, proxy: str) -> None:
    given = httpx.get(proxy + "/v1/models", headers={"X-Request-Id": "req-123"})
    assert given.headers["x-request-id"] == "req-123"
    assert upstream.upstream.requests[-1].header("x-request-id") == "req-123"
    generated = httpx.get(proxy + "/v1/models")
    assert len(generated.headers["x-request-id"]) == 32
    assert upstream.upstream.requests[-1].header("x-request-id") == generated.headers["x-request-id"]


@proves(
    fault="an upstream error status (4xx, 5xx) before any byte was relayed",
    phase="before the upstream answers",
    client="the upstream's status, headers and body unchanged",
)
def test_upstream_errors_pass_through_with_status_headers_and_body(
    upstream: RunningUpstream, proxy: str
) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit", "param": None, "code": "429"}}
    upstream.upstream.script(Raw(429, body, headers={"Retry-After": "7"}))
    response = httpx.post(proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.json() == body
    with pytest.raises(openai.InternalServerError):
        upstream.upstream.script(Raw(500, {"error": {"message": "boom"}}))
        openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0).chat.completions.create(
            model="m", messages=MESSAGES
        )


@proves(
    fault="an error answer in a Content-Encoding the proxy does not decode (brotli)",
    phase="before the upstream answers",
    client="the upstream's status, encoding and bytes unchanged (not a 502 of the proxy's)",
)
def test_an_error_in_an_encoding_the_proxy_does_not_decode_passes_through(
    upstream: RunningUpstream, proxy: str
) -> None:
    encoded = b"\x1b\x0f\x00\xf8brotli-compressed-error"
    upstream.upstream.script(Raw(429, encoded, headers={"Content-Encoding": "br"}))
    host, port = proxy.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(
            {"model": "m", "messages": MESSAGES}), {"content-type": "application/json"})
        response = connection.getresponse()
        assert response.status == 429
        assert response.getheader("content-encoding") == "br"
        assert response.read() == encoded
    finally:
        connection.close()


@proves(
    fault="the upstream cannot be reached",
    phase="before the upstream answers",
    client="502 `upstream_unavailable` in the API's error shape",
)
def test_unreachable_upstream_is_a_502_in_openai_error_shape(start_proxy: ProxyFactory) -> None:
    proxy = start_proxy(upstream_url=f"http://127.0.0.1:{free_port()}/v1", connect_retries=0)
    response = httpx.post(proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert response.status_code == 502
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "upstream_unavailable"
    ready = httpx.get(proxy + "/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["upstream"] is False


@proves(
    fault="the upstream sends nothing for `idle_timeout_s`",
    phase="before the upstream answers",
    client="504 `upstream_timeout`; the upstream request is closed",
)
def test_upstream_idle_timeout_is_a_504_and_cancels_the_upstream_request(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(idle_timeout_s=0.3, upstream_kind="other")  # the only request: the client's
    upstream.upstream.script(Hang())
    response = httpx.post(proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert upstream.upstream.wait_cancelled(0)


def test_a_body_over_the_limit_is_a_413(upstream: RunningUpstream, start_proxy: ProxyFactory) -> None:
    proxy = start_proxy(max_request_bytes=1000)
    response = httpx.post(proxy + "/v1/chat/completions", content=b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert not [r for r in upstream.upstream.requests if r.method == "POST"]


def test_sse_is_relayed_chunk_by_chunk_with_comments(upstream: RunningUpstream, proxy: str) -> None:
    gate = threading.Event()
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    upstream.upstream.script(
        SSE([b": ping\n\n", first, b"data: [DONE]\n\n"], gate=gate, gate_after=2)
    )
    with httpx.stream(
        "POST", proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
    ) as response:
        chunks = response.iter_raw()
        received = b""
        while first not in received:  # arrives while the upstream still holds the rest
            received += next(chunks)
        assert received.startswith(b": ping\n\n")
        gate.set()
        received += b"".join(chunks)
    assert received == b": ping\n\n" + first + b"data: [DONE]\n\n"


@proves(
    fault="the upstream's stream breaks (connection lost mid-body)",
    phase="while the answer streams",
    client="what was relayed, then the error event `upstream_stream_broken`; never `[DONE]`",
)
def test_a_stream_that_breaks_ends_with_an_error_event_and_no_done(
    upstream: RunningUpstream, proxy: str
) -> None:
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    upstream.upstream.script(SSE([first], break_after=True))
    response = httpx.post(
        proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
    )
    events = parse_sse(response.content)
    assert events[0] == first.decode()[6:-2]
    assert "[DONE]" not in events
    assert json.loads(events[-1])["error"]["code"] == "upstream_stream_broken"
    assert b"event: error" in response.content


@proves(
    fault="the client leaves mid-stream",
    phase="after the client left",
    client="nothing more; the upstream request is closed",
)
def test_client_disconnect_mid_stream_cancels_the_upstream(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(upstream_kind="other")  # the only request: the client's
    gate = threading.Event()  # never set: the upstream holds the stream open
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    upstream.upstream.script(SSE([first, b"data: [DONE]\n\n"], gate=gate, gate_after=1))
    with httpx.stream(
        "POST", proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
    ) as response:
        assert first in next(response.iter_raw())
    assert upstream.upstream.wait_cancelled(0)


@proves(
    fault="the client leaves while waiting for a plain answer",
    phase="after the client left",
    client="nothing; the upstream request is closed",
)
def test_client_disconnect_while_waiting_for_a_plain_answer_cancels_the_upstream(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(upstream_kind="other")  # the only request: the client's
    upstream.upstream.script(Hang())
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES}, timeout=0.5
        )
    assert upstream.upstream.wait_cancelled(0)


def test_health_ready_and_metrics(upstream: RunningUpstream, proxy: str) -> None:
    assert httpx.get(proxy + "/healthz").json() == {"status": "ok"}
    httpx.get(proxy + "/v1/models")
    metrics = httpx.get(proxy + "/metrics").text
    assert 'toolprune_http_requests_total{route="models",status="200"} 1.0' in metrics
    assert "toolprune_upstream_seconds_count" in metrics
    assert "toolprune_http_in_flight_requests" in metrics


def test_sse_chunks_parse_as_chat_chunks(upstream: RunningUpstream, proxy: str) -> None:
    response = httpx.post(
        proxy + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
    )
    chunks = chat_chunks(response.content)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "ok"
