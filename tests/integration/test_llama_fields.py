"""llama-server's own request field the proxy adds (``n_cache_reuse``) on each API's route,
through the proxy in front of the scripted upstream (which answers llama-server's
``/props``). llama-server reads it on chat completions (tests/integration/
test_prefix_cache.py) and Responses; its Messages route drops it (its Anthropic
conversion keeps only the sampling fields), so it is not sent there, and a block there
at ``max_tools`` grows instead of evicting."""

from __future__ import annotations

import httpx
import pytest

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import Recorded
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_api_adapters import (
    ASK,
    MESSAGES_TOOLS,
    RESPONSES_TOOLS,
    load,
    sent,
    tool_names,
)


def llama_proxy(upstream: RunningUpstream, start_proxy: ProxyFactory, **overrides: object) -> str:
    """A proxy in front of the upstream as llama-server (it answers ``/props``)."""
    upstream.upstream.n_ctx = 32768
    return start_proxy(max_tools=6, top_k=4, threshold=0.0, readiness_timeout_s=30, **overrides)


@pytest.fixture
def proxy(upstream: RunningUpstream, start_proxy: ProxyFactory) -> str:
    return llama_proxy(upstream, start_proxy)


def test_responses_requests_carry_n_cache_reuse_every_round(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[load()]), Responses(text="done"), Responses(text="again"),
        path="/responses",
    )
    body = {"model": "m", "input": ASK, "tools": RESPONSES_TOOLS}
    headers = {"X-Conversation-Id": "r1"}
    httpx.post(proxy + "/v1/responses", json=body, headers=headers, timeout=120).raise_for_status()
    first, reissued = sent(upstream, "/responses")
    assert "load_tools" in tool_names(first["tools"])  # a meta round, re-issued
    assert [first["n_cache_reuse"], reissued["n_cache_reuse"]] == [64, 64]
    # The client's own value is kept.
    mine = {**body, "n_cache_reuse": 16}
    httpx.post(proxy + "/v1/responses", json=mine, headers=headers, timeout=120).raise_for_status()
    assert sent(upstream, "/responses")[-1]["n_cache_reuse"] == 16


def test_messages_requests_carry_no_n_cache_reuse(upstream: RunningUpstream, proxy: str) -> None:
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": ASK}],
            "tools": MESSAGES_TOOLS}
    response = httpx.post(proxy + "/v1/messages", json=body, timeout=120)
    assert response.status_code == 200 and response.headers["x-tool-pruning-tools"].endswith("/69")
    assert any(r.path == "/props" for r in upstream.upstream.requests)
    (message,) = sent(upstream, "/messages")
    assert "n_cache_reuse" not in message


def _load_four(record: Recorded) -> Message | None:
    """The model's answer: load the first four tools ``load_tools`` offers, then done."""
    if not record.path.endswith("/messages"):
        return None  # /props, /tokenize: the upstream's own answers
    body = record.json()
    if body["messages"][-1]["role"] == "user" and len(body["messages"]) > 1:
        return Message(text="done")
    (meta,) = [tool for tool in body["tools"] if tool["name"] == "load_tools"]
    offered = meta["input_schema"]["properties"]["names"]["items"]["enum"]
    return Message(text=None, calls=[{"id": "toolu_load", "name": "load_tools",
                                      "input": {"names": offered[:4]}}])


def test_a_messages_block_at_its_cap_grows_at_its_end(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """llama-server's Messages route reuses no chunk of its cached prompt after a change:
    a tool evicted from the block would make it evaluate every tool after it again. A
    block at ``max_tools`` (6) there keeps its tools and grows at its end; the token cap
    from ``/props`` still bounds it. (The block grows: TOOLPRUNE_LATE_TOOLS=block;
    delivered in the conversation it stays: tests/integration/test_conversation_delivery.py.)"""
    proxy = llama_proxy(upstream, start_proxy, late_tools="block")
    upstream.upstream.behaviour = _load_four
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": ASK}],
            "tools": MESSAGES_TOOLS}
    httpx.post(proxy + "/v1/messages", json=body, timeout=120).raise_for_status()
    first, reissued = sent(upstream, "/messages")
    block = [name for name in tool_names(first["tools"]) if name != "load_tools"]
    grown = [name for name in tool_names(reissued["tools"]) if name != "load_tools"]
    assert len(block) >= 4 and len(grown) == len(block) + 4 > 6
    assert grown[: len(block)] == block
