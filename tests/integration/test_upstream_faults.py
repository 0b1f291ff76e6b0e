"""Upstream answers the proxy cannot interpret never crash an acting request (a tool-call
delta with an object for ``index`` is served; an event nested 50,000 deep ends the stream
with an error event that says so; a plain answer nested 50,000 deep, which the proxy must
read for its meta-calls, is a 502 ``upstream_invalid_response``; with pruning off it is
relayed as it came)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.fault_matrix import proves

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
CHAT = "/v1/chat/completions"
DEEP = '{"a":' + "[" * 50_000 + "]" * 50_000 + "}"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def stream(proxy: str) -> httpx.Response:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": True}
    return httpx.post(proxy + CHAT, json=body, timeout=300)


def test_a_tool_call_delta_with_an_object_index_is_relayed(
    upstream: RunningUpstream, proxy: str
) -> None:
    odd = chunk({"tool_calls": [{"index": {"a": 1}, "function": {"name": "browser_click"}}]})
    upstream.upstream.script(SSE([chunk({"role": "assistant"}), odd,
                                  chunk({}, "stop"), b"data: [DONE]\n\n"]))
    response = stream(proxy)
    assert response.status_code == 200
    assert "x-tool-pruning-tools" in response.headers  # the acting path served it
    assert b"event: error" not in response.content
    # relayed (how it is framed is the serving loop's business), never a crash
    assert b'"name": "browser_click"' in response.content
    assert response.content.endswith(b"data: [DONE]\n\n")


@proves(
    fault="an event nested 50,000 deep",
    phase="while the answer streams",
    client="the error event `upstream_invalid_response`; never an internal error",
)
def test_an_event_nested_50000_deep_ends_the_stream_with_an_error_event(
    upstream: RunningUpstream, proxy: str
) -> None:
    deep = b"data: " + DEEP.encode() + b"\n\n"
    upstream.upstream.script(SSE([chunk({"role": "assistant"}), deep,
                                  chunk({}, "stop"), b"data: [DONE]\n\n"]))
    response = stream(proxy)
    assert response.status_code == 200
    assert b"proxy_internal_error" not in response.content  # never a crash
    # an event the proxy cannot read is said so, never silently dropped
    assert response.content.endswith(b"\n\n") and b"[DONE]" not in response.content
    assert b'"code": "upstream_invalid_response"' in response.content.rsplit(b"event: error", 1)[1]


@proves(
    fault="a plain answer nested 50,000 deep (not a completion the proxy can read) to a pruned request offering `load_tools`",
    phase="in a plain answer",
    client="502 `upstream_invalid_response`: the proxy must read the answer for its meta-calls and cannot (the rule of any answer in no shape of the API); never an internal error",
)
def test_a_plain_answer_nested_50000_deep_is_an_invalid_response(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(Raw(200, DEEP))
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    response = httpx.post(proxy + CHAT, json=body, timeout=300)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_invalid_response"


def test_the_same_answers_pass_with_pruning_off_too(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(enabled=False)
    upstream.upstream.script(Raw(200, DEEP))
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    assert httpx.post(proxy + CHAT, json=body, timeout=60).content == DEEP.encode()
