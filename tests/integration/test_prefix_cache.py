"""Forwarding priced by the upstream's prefix cache, through the proxy (real servers on
loopback: the proxy with its embedded embedder, the scripted upstream serving llama-server's
``/props`` and ``/tokenize``)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import httpx

from benchmarks.support.data import REAL_CATALOGS
from selection.catalog.catalog import parse_tools
from selection.catalog.tokens import estimated_tokens
from selection.choosing.prefix import estimated_text_tokens
from tests.conftest import ProxyFactory, RunningUpstream

GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())[:25]
SYSTEM = {"role": "system", "content": "You are a GitHub assistant for octocat."}
REPO = {"owner": "octocat", "repo": "hello-world"}


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def post(proxy: str, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "m", "messages": messages, "tools": GITHUB}
    return httpx.post(proxy + "/v1/chat/completions", json=body, timeout=120)


def chat_bodies(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def forwarded(upstream: RunningUpstream) -> list[str]:
    return names(chat_bodies(upstream)[-1]["tools"])


def called(call_id: str, name: str, result: Any) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(REPO)}}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
    ]


class DecisionLog(logging.Handler):
    """Collects the proxy's ``pruning_decision`` log fields."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.fields: list[dict[str, Any]] = []
        self.logged = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "pruning_decision":
            with self.logged:
                self.fields.append(record.fields)  # type: ignore[attr-defined]
                self.logged.notify_all()

    def wait(self, count: int) -> list[dict[str, Any]]:
        with self.logged:
            assert self.logged.wait_for(lambda: len(self.fields) >= count, 10)
            return list(self.fields)


def test_a_session_grows_the_block_at_its_end_and_the_next_conversation_starts_from_it(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    upstream.upstream.n_ctx = 32768
    # readiness_timeout_s bounds the first wait for /props: generous on a loaded machine.
    # The block grows (TOOLPRUNE_LATE_TOOLS=block); delivered in the conversation it stays:
    # tests/integration/test_conversation_delivery.py.
    proxy = start_proxy(top_k=4, threshold=0.0, readiness_timeout_s=30, index_timeout_s=300,
                        late_tools="block")
    log = DecisionLog()
    logging.getLogger("toolprune").addHandler(log)
    try:
        first = [SYSTEM, {"role": "user", "content": "Create a branch fix-login from main."}]
        assert post(proxy, first).status_code == 200
        turn1 = forwarded(upstream)
        assert turn1[-1] == "load_tools"  # the meta-tool comes after the first block
        block = turn1[:-1]
        # A follow-up the block serves: the same tools, byte for byte.
        follow = [*first, {"role": "assistant", "content": "Which repository?"},
                  {"role": "user", "content": "Create the branch fix-login in octocat/hello-world."}]
        assert post(proxy, follow).status_code == 200
        assert forwarded(upstream) == turn1
        # The agent called a tool the block lacks: appended after the block, which stays.
        missing = next(name for name in names(GITHUB) if name not in block)
        second = [*follow, *called("c1", missing, {"ok": True}), {"role": "user", "content": "Thanks."}]
        assert post(proxy, second).status_code == 200
        turn3 = forwarded(upstream)
        # The meta-tool keeps its place (and its text): what the block adds follows it.
        assert turn3[: len(turn1)] == turn1 and missing in turn3[len(turn1):]
        # Another conversation of the same agent starts from the block the upstream holds.
        other = [SYSTEM, {"role": "user", "content": "Open an issue about the login loop."}]
        assert post(proxy, other).status_code == 200
        b_tools = forwarded(upstream)
        assert b_tools[: len(turn3)] == turn3
        # The first conversation again: the upstream (llama-server's /props answered) holds
        # B's prompt and evaluates this history again anyway, so it takes B's block.
        third = [*second, {"role": "assistant", "content": "Done."},
                 {"role": "user", "content": "Thanks again."}]
        assert post(proxy, third).status_code == 200
        assert forwarded(upstream)[: len(b_tools)] == b_tools
        fields = log.wait(5)
        # Chunk reuse is asked of llama-server (it answered /props) unless the client set it.
        assert {body["n_cache_reuse"] for body in chat_bodies(upstream)} == {64}
        body = {"model": "m", "messages": third, "tools": GITHUB, "n_cache_reuse": 64}
        httpx.post(proxy + "/v1/chat/completions", json=body, timeout=120).raise_for_status()
        assert chat_bodies(upstream)[-1]["n_cache_reuse"] == 64
    finally:
        logging.getLogger("toolprune").removeHandler(log)
    assert [f["cache_break"] for f in fields] == [False, False, True, False, False]
    assert [f["block"] for f in fields] == [None, None, None, "adopted", "shared"]
    assert fields[0]["expected_cached_tokens"] == 0
    # The follow-up evaluates its new messages only; the cache break, the whole history.
    assert 0 < fields[1]["expected_evaluated_tokens"] < fields[2]["expected_evaluated_tokens"]
    assert fields[1]["expected_cached_tokens"] > fields[0]["expected_evaluated_tokens"] // 2
    assert fields[3]["expected_cached_tokens"] > 0
    assert fields[4]["expected_evaluated_tokens"] >= estimated_text_tokens(third[1:])
    metrics = httpx.get(proxy + "/metrics").text
    assert 'toolprune_cache_breaks_total{reason="appended"} 1.0' in metrics
    assert "toolprune_expected_evaluated_prompt_tokens_count 6.0" in metrics
    assert "toolprune_expected_cached_prompt_tokens_count 6.0" in metrics
    # /props is asked once; the tools are counted with the upstream's tokenizer meanwhile.
    requests = upstream.upstream.wait_for(
        lambda records: any(r.path == "/tokenize" for r in records)
    )
    assert sum(1 for r in requests if r.path == "/props") == 1
    tokenized = [r.json()["content"] for r in requests if r.path == "/tokenize"]
    assert all(text.startswith("\n{") for text in tokenized)


def test_a_prompt_that_would_overflow_the_context_gets_fewer_tools(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    upstream.upstream.n_ctx = 3000
    proxy = start_proxy(top_k=8, threshold=0.0, readiness_timeout_s=30, index_timeout_s=300)
    long_history = "The build log follows. " + "error: step failed; retrying the job. " * 160
    messages = [SYSTEM, {"role": "user", "content": long_history + " Which workflow run failed?"}]
    assert post(proxy, messages).status_code == 200
    tools = [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")][-1].json()["tools"]
    meta = ("load_tools", "call_tool")
    client_tools = [t for t in tools if t["function"]["name"] not in meta]
    assert 0 < len(client_tools) < 8
    catalog = parse_tools(client_tools)
    prompt = (
        sum(estimated_tokens(tool) for tool in catalog.tools)
        + estimated_text_tokens(messages)
        + estimated_text_tokens([t for t in tools if t["function"]["name"] in meta])
    )
    assert prompt <= 3000


def test_an_upstream_without_props_keeps_the_tool_cap_only(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(top_k=8, threshold=0.0, max_tools=3, index_timeout_s=300)
    ask = "Create a branch fix-login from main and open a pull request for it."
    messages = [SYSTEM, {"role": "user", "content": ask}]
    assert post(proxy, messages).status_code == 200
    assert len(forwarded(upstream)) == 3 + 1
    assert any(r.path == "/props" for r in upstream.upstream.requests)
    # llama-server's n_cache_reuse goes only to an upstream that answered /props.
    assert "n_cache_reuse" not in chat_bodies(upstream)[-1]
