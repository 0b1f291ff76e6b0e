"""The proxy's upstream connections: a streamed round read to its ``[DONE]`` gives its
connection back to the pool (the test upstream, like llama-server, writes ``[DONE]`` and
the end of the chunked body apart), and a body that does not end after ``[DONE]`` costs
its client nothing."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE
from tests.conftest import RunningUpstream

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
CHAT = "/v1/chat/completions"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


EVENTS = [chunk({"role": "assistant"}), chunk({"content": "done"}), chunk({}, "stop"),
          b"data: [DONE]\n\n"]


def stream(proxy: str, i: int) -> httpx.Response:
    ask = [{"role": "user", "content": f"Take screenshot number {i} of the browser page"}]
    body = {"model": "m", "messages": ask, "tools": PLAYWRIGHT, "stream": True}
    return httpx.post(proxy + CHAT, json=body, timeout=60)


def test_streamed_rounds_reuse_one_upstream_connection(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(*(SSE(list(EVENTS), end_pause_s=0.05) for _ in range(4)))
    for i in range(4):
        response = stream(proxy, i)
        assert response.status_code == 200 and "x-tool-pruning-tools" in response.headers
        assert response.content.endswith(b"data: [DONE]\n\n")
    chats = [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 4
    assert len({r.client_port for r in chats}) == 1, [r.client_port for r in chats]


def test_a_body_that_goes_on_after_done_is_closed_not_waited_for(
    upstream: RunningUpstream, proxy: str
) -> None:
    never = threading.Event()  # the upstream holds the body open after [DONE] for good
    upstream.upstream.script(SSE(list(EVENTS), gate=never, gate_after=len(EVENTS)))
    response = stream(proxy, 0)
    assert response.status_code == 200
    assert response.content.endswith(b"data: [DONE]\n\n")
    assert upstream.upstream.wait_cancelled(-1, timeout=30)  # its connection was closed
