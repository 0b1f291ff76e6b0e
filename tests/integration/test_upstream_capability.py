"""Servers that cannot stream tool calls (issue #28, item 4): an upstream that names itself
Ollama before v0.8.0 gets streamed acting requests non-streamed, and the client still
gets its SSE, tool call included; a streamed answer to a request with tools that ends
``stop`` with no content nor call is logged as suspicious and counted, for Chat
Completions, Responses and Messages alike.

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream.
"""

from __future__ import annotations

import json

import httpx
import pytest

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import SSE, Chat, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_stream_faults import APIS, PATHS, SUFFIX, chunk, request_body
from tests.support.fault_matrix import proves
from tests.support.logs import Lines
from tests.support.sse import chat_chunks

CALL = {"id": "call_1", "name": "browser_navigate", "arguments": json.dumps({"url": "https://example.com"})}


def chat_requests(upstream: RunningUpstream) -> list[dict[str, object]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


@proves(
    fault="an Ollama before v0.8.0 (it drops streamed tool calls), named at `GET /api/version`",
    phase="before the upstream answers",
    client="its SSE as from any server, tool calls included: the proxy asks the upstream without streaming",
)
def test_an_old_ollama_gets_streamed_requests_non_streamed(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    upstream.upstream.script(Raw(200, {"version": "0.6.8"}), path="/api/version")
    upstream.upstream.script(Chat(content=None, tool_calls=[CALL]))
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0)
    response = httpx.post(proxy + PATHS["chat"], json=request_body("chat"), timeout=300)
    assert response.headers["content-type"].startswith("text/event-stream")
    (sent,) = chat_requests(upstream)
    assert sent["stream"] is False and "stream_options" not in sent
    calls = [c["choices"][0]["delta"]["tool_calls"] for c in chat_chunks(response.content)
             if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert calls[0][0]["function"] == {"name": "browser_navigate", "arguments": CALL["arguments"]}
    assert response.content.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("answer", [Raw(200, {"version": "0.9.2"}), Raw(404, "404 page not found")])
def test_other_servers_keep_streaming(
    upstream: RunningUpstream, start_proxy: ProxyFactory, answer: Raw
) -> None:
    upstream.upstream.script(answer, path="/api/version")
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0)
    assert httpx.post(proxy + PATHS["chat"], json=request_body("chat"), timeout=300).status_code == 200
    assert chat_requests(upstream)[0]["stream"] is True


def test_the_setting_overrides_what_the_server_says(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    upstream.upstream.script(Raw(200, {"version": "0.6.8"}), path="/api/version")
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, upstream_stream=True)
    assert httpx.post(proxy + PATHS["chat"], json=request_body("chat"), timeout=300).status_code == 200
    assert chat_requests(upstream)[0]["stream"] is True
    # The server is still known for what it is (/readyz), its streaming overridden.
    server = httpx.get(proxy + "/readyz").json()["server"]
    assert (server["kind"], server["version"], server["streams_tool_calls"]) == ("ollama", "0.6.8", False)


def empty_stop(api: str) -> object:
    if api == "chat":
        return SSE([chunk({"role": "assistant", "content": ""}), chunk({}, "stop"), b"data: [DONE]\n\n"])
    if api == "responses":
        return Responses(text=None)
    return Message(text=None)


@proves(
    fault="a streamed answer to a request with tools that ends `stop` with no content nor call (a server dropping streamed tool calls)",
    phase="while the answer streams",
    client="the answer as it came; the proxy logs `upstream_suspicious_stop` and counts `toolprune_upstream_suspicious_stops_total`",
)
@pytest.mark.parametrize("api", APIS)
def test_an_empty_stop_after_tools_is_logged_as_suspicious(
    upstream: RunningUpstream, start_proxy: ProxyFactory, log_lines: Lines, api: str
) -> None:
    upstream.upstream.script(empty_stop(api), path=SUFFIX[api])
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, upstream_stream=True)
    response = httpx.post(proxy + PATHS[api], json=request_body(api), timeout=300)
    assert response.status_code == 200
    line = log_lines.wait_for("upstream_suspicious_stop", response.headers["x-request-id"])
    api_label = {"chat": "chat_completions"}.get(api, api)
    assert line["api"] == api_label
    metrics = httpx.get(proxy + "/metrics").text
    assert f'toolprune_upstream_suspicious_stops_total{{api="{api_label}"}} 1.0' in metrics
