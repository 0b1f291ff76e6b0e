"""Conversation state shared through Redis by two proxy replicas (issue #7).

Real processes and servers on loopback: a ``redis-server`` started by the test on a free
port (no persistence), two proxies (replicas A and B, default embedded embedder) under
uvicorn sharing it, in front of the scripted test upstream. Redis is killed, paused
(SIGSTOP: slow, never answers) and restarted mid-test; requests never fail.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis as redis_client

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.redis_server import (
    REDIS_SERVER,
    SKIP_REASON,
    RedisServer,
    redis_server,
)
from benchmarks.support.upstream import Chat, Slow
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.conversations import answered, client_calls, history_of, with_history
from tests.support.sse import parse_sse
from tests.support.turn_apis import APIS, CASES, IDS, Call

pytestmark = [pytest.mark.redis, pytest.mark.skipif(REDIS_SERVER is None, reason=SKIP_REASON)]

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
#: Not among what the first turn of ASK forwards (see test_pruning): it arrives only by a load.
LOADED = "browser_cookie_set"
CHAT = "/v1/chat/completions"
TOOLS_HEADER = "x-tool-pruning-tools"
REDIS_TIMEOUT_S = 0.3


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith(CHAT)]


def last_forwarded(upstream: RunningUpstream) -> list[str]:
    return names(chat_requests(upstream)[-1].json()["tools"])


def load_call(*tool_names: str) -> dict[str, str]:
    return {
        "id": "meta_1",
        "name": "load_tools",
        "arguments": json.dumps({"names": list(tool_names)}),
    }


def raw_body(stream: bool = False) -> bytes:
    body: dict[str, Any] = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


def post(proxy: str, conversation: str, body: bytes | None = None) -> httpx.Response:
    headers = {"content-type": "application/json", "X-Conversation-Id": conversation}
    response = httpx.post(proxy + CHAT, content=body or raw_body(), headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return response


def load_through(proxy: str, upstream: RunningUpstream, conversation: str, tool: str) -> None:
    """One turn on ``proxy`` in which the model loads ``tool`` through the meta-tool."""
    upstream.upstream.script(
        Chat(content=None, tool_calls=[load_call(tool)]), Chat(content="loaded")
    )
    before = len(chat_requests(upstream))
    response = post(proxy, conversation)
    assert response.json()["choices"][0]["message"]["content"] == "loaded"
    first, second = chat_requests(upstream)[before:]
    assert tool not in names(first.json()["tools"]) and tool in names(second.json()["tools"])


def metric(proxy: str, name: str, **labels: str) -> float:
    """A counter's value from /metrics (0.0 when the series does not exist yet)."""
    text = httpx.get(proxy + "/metrics").text
    selector = ",".join(f'{key}="{value}"' for key, value in labels.items())
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(selector)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def replicas(redis: RedisServer, start_proxy: ProxyFactory) -> tuple[str, str]:
    """Two proxies sharing one Redis (replicas A and B of one fleet)."""
    settings: dict[str, object] = {
        "state_url": redis.url,
        "max_tools": 6,
        "top_k": 4,
        "threshold": 0.0,
        "redis_timeout_s": REDIS_TIMEOUT_S,
    }
    return start_proxy(**settings), start_proxy(**settings)


def test_a_tool_loaded_through_replica_a_is_forwarded_by_replica_b(
    upstream: RunningUpstream, replicas: tuple[str, str]
) -> None:
    a, b = replicas
    load_through(a, upstream, "conv-ab", LOADED)
    response = post(b, "conv-ab")  # next turn, other replica, no history that pins it
    assert TOOLS_HEADER in response.headers
    assert LOADED in last_forwarded(upstream)
    # Control: another agent (its own system prompt) does not get it. (A new conversation
    # of the same agent starts from the agent's block, which holds it.)
    other_agent = json.dumps({"model": "m", "tools": PLAYWRIGHT, "messages": [
        {"role": "system", "content": "Another agent."}, *ASK]}).encode()
    post(b, "conv-other", other_agent)
    assert LOADED not in last_forwarded(upstream)
    for proxy in replicas:
        assert metric(proxy, "toolprune_fallbacks_total", reason="state_store_error") == 0


def test_redis_down_serves_the_full_catalogue_and_stickiness_resumes_when_it_returns(
    upstream: RunningUpstream, replicas: tuple[str, str], redis: RedisServer
) -> None:
    a, b = replicas
    load_through(a, upstream, "conv-1", LOADED)

    redis.kill()
    for proxy in replicas:  # plain: the upstream receives the client's original bytes
        response = post(proxy, "conv-1")
        assert response.json()["choices"][0]["message"]["content"] == "ok"
        assert TOOLS_HEADER not in response.headers
        assert chat_requests(upstream)[-1].body == raw_body()
    streamed = post(b, "conv-1", raw_body(stream=True))
    assert parse_sse(streamed.content)[-1] == "[DONE]"
    assert chat_requests(upstream)[-1].body == raw_body(stream=True)
    assert metric(a, "toolprune_fallbacks_total", reason="state_store_error") == 1
    assert metric(b, "toolprune_fallbacks_total", reason="state_store_error") == 2
    assert metric(b, "toolprune_state_store_errors_total", operation="get") == 2

    redis.start()  # same port; empty, since nothing is persisted
    response = post(b, "conv-1")  # the first request after the restart is pruned again
    assert TOOLS_HEADER in response.headers
    load_through(b, upstream, "conv-2", LOADED)
    post(a, "conv-2")
    assert LOADED in last_forwarded(upstream)  # stickiness across replicas resumed
    assert metric(a, "toolprune_fallbacks_total", reason="state_store_error") == 1


def test_redis_lost_during_a_meta_round_keeps_the_request_pruned_and_is_no_fallback(
    upstream: RunningUpstream, replicas: tuple[str, str], redis: RedisServer
) -> None:
    a, _ = replicas
    post(a, "conv-warm")  # embedder loaded, Redis connection pooled
    answer = threading.Event()
    upstream.upstream.script(
        Slow(answer, Chat(content=None, tool_calls=[load_call(LOADED)])), Chat(content="loaded")
    )
    before = len(chat_requests(upstream))
    responses: list[httpx.Response] = []
    client = threading.Thread(target=lambda: responses.append(post(a, "conv-meta")))
    client.start()
    upstream.upstream.wait_for(lambda _: len(chat_requests(upstream)) > before)  # planned
    redis.kill()
    answer.set()  # the model calls load_tools: the meta round reads and saves the state
    client.join(timeout=60)
    (response,) = responses
    assert response.json()["choices"][0]["message"]["content"] == "loaded"
    assert TOOLS_HEADER in response.headers
    first, second = chat_requests(upstream)[before:]
    assert LOADED not in names(first.json()["tools"]) and LOADED in names(second.json()["tools"])
    assert metric(a, "toolprune_fallbacks_total", reason="state_store_error") == 0
    assert metric(a, "toolprune_late_errors_total", reason="state_store_error") == 2


def test_a_redis_that_stops_answering_costs_a_request_about_the_timeout(
    upstream: RunningUpstream, replicas: tuple[str, str], redis: RedisServer
) -> None:
    a, _ = replicas
    load_through(a, upstream, "conv-slow", LOADED)  # embedder loaded, Redis connection pooled
    redis.pause()  # connections are accepted, nothing is answered
    try:
        started = time.monotonic()
        response = post(a, "conv-slow")
        elapsed = time.monotonic() - started
    finally:
        redis.resume()
    assert TOOLS_HEADER not in response.headers
    assert chat_requests(upstream)[-1].body == raw_body()
    assert elapsed < REDIS_TIMEOUT_S + 1.5, f"a paused Redis held the request {elapsed:.2f}s"
    post(a, "conv-slow")
    assert LOADED in last_forwarded(upstream)  # the state written before the pause is back


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_conversation_delivered_through_replica_a_keeps_its_shape_on_replica_b(
    upstream: RunningUpstream, redis: RedisServer, start_proxy: ProxyFactory, name: str,
    stream: bool,
) -> None:
    """Tools delivered in the conversation (``late_tools=conversation``), on every API:
    replica A serves a request whose model loads a tool (a hidden exchange, kept in Redis)
    and calls it through the bridge; the client's next request, served by replica B, is
    forwarded as the upstream saw the conversation: the same block, the hidden exchange in
    its place, the client's call written back as the bridge call."""
    settings: dict[str, object] = {"state_url": redis.url, "max_tools": 6, "top_k": 4,
                                   "threshold": 0.0, "redis_timeout_s": 5.0,
                                   "late_tools": "conversation"}
    a, b = start_proxy(**settings), start_proxy(**settings)
    api = APIS[name]
    arguments = {"name": "session", "value": "abc"}
    bridged = Call("bridge_1", "call_tool", json.dumps({"name": LOADED, "arguments": arguments}))
    upstream.upstream.script(api.reply(calls=(Call("meta_1", "load_tools",
                                                   json.dumps({"names": [LOADED]})),)),
                             api.reply(calls=(bridged,)), path=api.suffix)
    since = len(upstream.upstream.requests)
    headers = {"X-Conversation-Id": f"conv-delivered-{name}-{stream}"}
    body = api.body(stream)
    first = httpx.post(a + api.path, json=body, headers=headers, timeout=60)
    (call,) = client_calls(name, first.content, stream)
    assert call.name == LOADED and json.loads(call.arguments) == arguments
    upstream.upstream.script(api.reply("Set."), path=api.suffix)
    httpx.post(b + api.path, json=answered(name, body, [call], "ok"), headers=headers,
               timeout=60).raise_for_status()
    one, two, three = (record.json() for record in api.sent(upstream.upstream, since))
    assert api.offered(three) == api.offered(two) == api.offered(one)
    before, after = history_of(name, two), history_of(name, three)
    assert after[: len(before)] == before
    (written,) = api.exchanged(with_history(name, three, after[len(before):]))
    assert written.name == "call_tool"
    assert json.loads(written.arguments) == {"name": LOADED, "arguments": arguments}


def test_the_speeds_replica_a_learned_plan_replica_bs_first_request(
    upstream: RunningUpstream, replicas: tuple[str, str], redis: RedisServer
) -> None:
    """Replica A learns the model's speeds from an answer's ``timings`` and writes them to
    Redis; replica B, which has seen no answer, reads them for its first request."""
    a, b = replicas
    timings = {"prompt_n": 1200, "prompt_ms": 400.0, "predicted_n": 40, "predicted_ms": 2000.0}
    upstream.upstream.script(Chat(content="done", timings=timings))
    post(a, "conv-speed-a")
    shared = redis_client.Redis.from_url(redis.url)
    deadline = time.monotonic() + 30
    while not shared.hexists("toolprune:speeds:v1", "m"):  # A writes in the background
        assert time.monotonic() < deadline, "replica A never shared its speeds"
        time.sleep(0.05)
    assert httpx.get(b + "/readyz", timeout=30).json()["server"]["speeds"] == {}
    post(b, "conv-speed-b")
    (speed,) = httpx.get(b + "/readyz", timeout=30).json()["server"]["speeds"].values()
    assert speed == {"prefill_tokens_per_s": 3000.0, "decode_tokens_per_s": 20.0,
                     "prefill_source": "timings (shared)", "decode_source": "timings (shared)",
                     "search_call_tokens": None}
