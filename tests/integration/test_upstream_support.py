"""The scriptable test upstream behaves like an OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI

from benchmarks.support.replies import unit_vector
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import SSE, Chat, Hang, Raw, Slow, Upstream
from tests.support.sse import chat_chunks, parse_sse

CHAT_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def upstream() -> Upstream:
    """A fresh upstream with an empty script."""
    return Upstream()


@pytest.fixture
def origin(upstream: Upstream) -> Iterator[str]:
    """The upstream served on loopback."""
    with serve_in_thread(upstream.app) as base:
        yield base


@pytest.fixture
def client(origin: str) -> Iterator[OpenAI]:
    """The official SDK pointed at the upstream, without retries."""
    with OpenAI(base_url=origin + "/v1", api_key="test", max_retries=0) as sdk:
        yield sdk


def test_plain_chat_default_reply(upstream: Upstream, client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "ok"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens == 5
    (record,) = upstream.wait_for_requests(1)
    assert record.completed and not record.cancelled
    assert record.json()["messages"][0]["content"] == "hi"


def test_requests_recorded_byte_exact(upstream: Upstream, origin: str) -> None:
    body = b'{"model":"m",  "messages":[],"tools":[{"x":"\\u00e9"}]}'
    response = httpx.post(
        origin + "/api/v1/chat/completions?a=1&b=2",
        content=body,
        headers={"X-Conversation-Id": "c1", "Content-Type": "application/json"},
    )
    assert response.json()["object"] == "chat.completion"
    (record,) = upstream.wait_for_requests(1)
    assert (record.method, record.path) == ("POST", "/api/v1/chat/completions")
    assert record.query == "a=1&b=2"
    assert record.body == body
    assert ("x-conversation-id", "c1") in record.headers
    assert record.header("Content-Type") == "application/json"


def test_streaming_tool_calls_reassemble(upstream: Upstream, client: OpenAI) -> None:
    calls = [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'},
        {"id": "call_b", "name": "search_docs", "arguments": '{"query": "faiss index"}'},
    ]
    upstream.script(Chat(content=None, tool_calls=calls))
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assembled: dict[int, dict[str, str]] = {}
    fragments = 0
    finish_reasons = []
    for chunk in stream:
        choice = chunk.choices[0]
        finish_reasons.append(choice.finish_reason)
        for delta in choice.delta.tool_calls or []:
            entry = assembled.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                entry["id"] = delta.id
            if delta.function and delta.function.name:
                entry["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                entry["arguments"] += delta.function.arguments
                fragments += 1
    assert [assembled[i] for i in sorted(assembled)] == calls
    assert fragments >= 4
    assert finish_reasons[-1] == "tool_calls" and set(finish_reasons[:-1]) == {None}


def test_stream_include_usage_chunk(upstream: Upstream, origin: str) -> None:
    upstream.script(Chat(content="Hello there, world", usage={"prompt_tokens": 7}))
    request = {**CHAT_BODY, "stream": True, "stream_options": {"include_usage": True}}
    raw = httpx.post(origin + "/v1/chat/completions", json=request).content
    assert parse_sse(raw)[-1] == "[DONE]"
    chunks = chat_chunks(raw)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello there, world"
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 2
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 7}
    assert all(c["usage"] is None for c in chunks[:-1])


def test_stream_without_include_usage_has_no_usage(origin: str) -> None:
    raw = httpx.post(origin + "/v1/chat/completions", json={**CHAT_BODY, "stream": True}).content
    assert all("usage" not in c and c["choices"] for c in chat_chunks(raw))


def test_raw_429_with_retry_after(upstream: Upstream, origin: str) -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    upstream.script(Raw(429, error, headers={"Retry-After": "3"}))
    response = httpx.post(origin + "/v1/chat/completions", json=CHAT_BODY)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json() == error


def test_sse_gate_relays_chunk_by_chunk(upstream: Upstream, origin: str) -> None:
    gate = threading.Event()
    events = [b": ping\n\n", b"data: 1\n\n", b"data: 2\n\n"]
    upstream.script(SSE(events, gate=gate, gate_after=1))
    with httpx.stream("POST", origin + "/v1/chat/completions", json=CHAT_BODY) as response:
        assert response.headers["content-type"] == "text/event-stream"
        chunks = response.iter_raw()
        assert next(chunks) == b": ping\n\n"
        assert not upstream.requests[0].completed
        gate.set()
        assert b"".join(chunks) == b"data: 1\n\ndata: 2\n\n"
    assert upstream.requests[0].completed


def test_sse_break_after_is_a_broken_stream(upstream: Upstream, origin: str) -> None:
    upstream.script(SSE([b'data: {"partial": true}\n\n'], break_after=True))
    received = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", origin + "/v1/chat/completions", json=CHAT_BODY) as response,
    ):
        for chunk in response.iter_raw():
            received += chunk
    assert received == b'data: {"partial": true}\n\n'
    record = upstream.requests[0]
    assert not record.completed and not record.cancelled


def test_hang_client_timeout_marks_cancelled(upstream: Upstream, origin: str) -> None:
    upstream.script(Hang())
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(origin + "/v1/chat/completions", json=CHAT_BODY, timeout=0.2)
    assert upstream.wait_cancelled(0)
    assert not upstream.requests[0].completed


def test_ungated_stream_close_marks_cancelled(upstream: Upstream, origin: str) -> None:
    upstream.script(SSE([b"data: 1\n\n", b"data: 2\n\n"], gate=threading.Event(), gate_after=1))
    with httpx.stream("POST", origin + "/v1/chat/completions", json=CHAT_BODY) as response:
        assert next(response.iter_raw()) == b"data: 1\n\n"
    assert upstream.wait_cancelled(0)


async def test_slow_reply_waits_for_gate(upstream: Upstream, origin: str) -> None:
    gate = threading.Event()
    upstream.script(Slow(gate, Chat(content="late")))
    async with httpx.AsyncClient(base_url=origin) as http:
        pending = asyncio.create_task(http.post("/v1/chat/completions", json=CHAT_BODY))
        await asyncio.to_thread(upstream.wait_for_requests, 1)
        assert not pending.done()
        gate.set()
        response = await pending
    assert response.json()["choices"][0]["message"]["content"] == "late"
    assert upstream.requests[0].completed


def test_builtin_routes(upstream: Upstream, client: OpenAI, origin: str) -> None:
    embeddings = client.embeddings.create(model="e", input=["alpha", "beta"]).data
    assert [e.index for e in embeddings] == [0, 1]
    assert embeddings[0].embedding == pytest.approx(unit_vector("alpha"))
    assert math.isclose(sum(v * v for v in embeddings[1].embedding), 1.0)
    assert len(embeddings[1].embedding) == 8
    assert [m.id for m in client.models.list()] == ["test-model"]
    assert httpx.get(origin + "/health").json() == {"status": "ok"}
    tokens = httpx.post(origin + "/tokenize", json={"content": "one two  three"}).json()["tokens"]
    assert len(tokens) == 3
    missing = httpx.post(origin + "/v1/nope", content=b"x")
    assert missing.status_code == 404 and "error" in missing.json()
    assert upstream.wait_for_requests(5)[-1].body == b"x"


def test_script_by_path_suffix(upstream: Upstream, origin: str) -> None:
    upstream.script(Raw(503, "down", media_type="text/plain"), path="/models")
    assert httpx.get(origin + "/v1/models").status_code == 503
    assert httpx.get(origin + "/v1/models").status_code == 200
    chat = httpx.post(origin + "/v1/chat/completions", json=CHAT_BODY).json()
    assert chat["choices"][0]["message"]["content"] == "ok"
