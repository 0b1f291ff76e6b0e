"""Keep-alives on every API (issue #32, item 2): a streaming client never waits in silence,
neither while the upstream prefills (its SSE comments are relayed) nor while the proxy
itself is silent — planning, a hidden meta round — when the proxy sends SSE comments of
its own every ``sse_keepalive_s``. A response the keep-alives started is served to its
end as a stream, whatever the plan then decides; a plain client never gets one.

Parametrised over Chat Completions, Responses and Messages. Real servers on loopback,
shared by the module: the proxy under uvicorn in front of the scripted upstream. Time is
driven by gates the upstream waits on and a 50 ms keep-alive interval; the tests wait on
what the client received, never on a clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from benchmarks.support.upstream import SSE, Raw, Slow
from tests.support.fault_matrix import proves
from tests.support.turn_apis import (
    APIS,
    LOADED,
    Api,
    Bench,
    Servers,
    bench,
    comments,
    load,
    turn_servers,
)

STREAMED = [(name, True) for name in APIS]
#: Proxies of the module: keep-alives every 50 ms; ``slow`` embeds with the upstream's
#: ``/embeddings``, which a test holds to hold planning.
INTERVAL_S = 0.05
UPSTREAM_PING = b": upstream-ping\n\n"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    variants = {"default": {"sse_keepalive_s": INTERVAL_S},
                "slow": {"sse_keepalive_s": INTERVAL_S, "embedder": "upstream"}}
    with turn_servers(variants) as running:
        upstream, proxies = running
        for api in APIS.values():  # the slow proxy's catalogue indexed: a gate holds a query
            Bench(upstream, proxies["slow"], api, False, "warm").post()
        yield running


@pytest.fixture
def run(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    return bench(servers, "default", request, name, stream)


@pytest.fixture
def slow(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    return bench(servers, "slow", request, name, stream)


def played(api: Api, reply: Any) -> list[bytes]:
    """The SSE events the scripted upstream plays for ``reply`` to a streamed request."""
    return reply.render(api.body(True), 100)


def own_words(run: Bench) -> str:
    """A user message of this test alone (the query cache answers none of it: its
    embedding goes to the upstream's ``/embeddings``)."""
    return f"Open https://example.com and take a screenshot ({run.credential['Authorization']})"


@proves(
    fault="the upstream's SSE comments while it prefills (before its first event) and while it streams",
    phase="before the upstream answers",
    client="every API: the comments, relayed as they come (Chat Completions before its first chunk too)",
)
@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_the_upstreams_keep_alives_reach_the_client(run: Bench) -> None:
    events = played(run.api, run.api.reply("done"))
    run.script(SSE([UPSTREAM_PING, *events[:2], UPSTREAM_PING, *events[2:]]))
    answer = run.post()
    assert (answer.status, answer.text) == (200, "done")
    assert comments(answer.raw).count(UPSTREAM_PING) == 2  # the prefill's, then the stream's


@proves(
    fault="planning takes longer than `sse_keepalive_s` (a slow embedder)",
    phase="request",
    client="every API, streamed: an SSE comment each `sse_keepalive_s` (the response started by the first), then the answer on that stream",
)
@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_a_slow_plan_keeps_the_stream_alive(slow: Bench) -> None:
    gate = threading.Event()
    slow.upstream.script(Slow(gate), path="/embeddings")  # the query's embedding waits
    slow.script(slow.api.reply("done"))
    reading = slow.reading(own_words(slow))
    try:
        assert reading.wait_comments(2), "no keep-alive while planning"
        assert slow.sent() == []  # still planning: nothing went upstream
    finally:
        gate.set()
    answer = reading.answer()
    assert (answer.status, answer.text, answer.error) == (200, "done", None)
    assert slow.bodies()[0]["tools"] != slow.api.body(True)["tools"]  # pruned


@proves(
    fault="the embedder fails after keep-alives started the client's stream",
    phase="request",
    client="every API, streamed: the keep-alives, then the upstream's stream of the client's own request (decision `fallback`) on the open response",
)
@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_a_plan_that_falls_back_after_keep_alives_is_served_as_a_stream(slow: Bench) -> None:
    gate = threading.Event()
    slow.upstream.script(Slow(gate, Raw(500, {"error": {"message": "down"}})), path="/embeddings")
    slow.script(slow.api.reply("done"))
    reading = slow.reading(own_words(slow))
    try:
        assert reading.wait_comments(2), "no keep-alive while planning"
    finally:
        gate.set()
    answer = reading.answer()
    assert (answer.status, answer.text, answer.error) == (200, "done", None)
    assert len(slow.api.offered(slow.bodies()[0])) == 69  # the client's bytes, forwarded


@proves(
    fault="the upstream prefills longer than `sse_keepalive_s` and sends nothing",
    phase="before the upstream answers",
    client="every API, streamed: an SSE comment each `sse_keepalive_s` (the response started by the first, with the decision's `X-Tool-Pruning-Tools`), then the upstream's stream",
)
@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_a_silent_prefill_keeps_the_stream_alive_with_the_decisions_headers(run: Bench) -> None:
    gate = threading.Event()
    run.script(Slow(gate, run.api.reply("done")))
    reading = run.reading()
    try:
        run.upstream.wait_for(lambda records: bool(run.sent()))  # planned, the round sent
        assert reading.wait_comments(2), "no keep-alive during the prefill"
    finally:
        gate.set()
    answer = reading.answer()
    assert (answer.status, answer.text, answer.error) == (200, "done", None)
    assert reading.headers.get("x-tool-pruning-tools", "").endswith("/69")


def sdk_text(run: Bench, gate: threading.Event) -> str:
    """The official SDK's streamed answer to the test's request (openai: Chat Completions,
    Responses; anthropic: Messages); ``gate`` is set once the SDK has the response's
    headers, which only a keep-alive sends while the upstream holds its answer."""
    key = run.credential["Authorization"].removeprefix("Bearer ")
    body = run.api.body(True)
    if run.api.name == "messages":
        client = anthropic.Anthropic(base_url=run.proxy, api_key=key, max_retries=0, timeout=30)
        stream = client.messages.create(**body)
        gate.set()
        return "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    sdk = openai.OpenAI(base_url=run.proxy + "/v1", api_key=key, max_retries=0, timeout=30)
    if run.api.name == "responses":
        stream = sdk.responses.create(**body)
        gate.set()
        return "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    stream = sdk.chat.completions.create(**body)
    gate.set()
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_the_official_sdks_read_a_stream_the_keep_alives_started(run: Bench) -> None:
    gate = threading.Event()
    run.script(Slow(gate, run.api.reply("done")))
    try:
        assert sdk_text(run, gate) == "done"
    finally:
        gate.set()
    assert len(run.sent()) == 1


@proves(
    fault="a hidden `load_tools` round lasts longer than `sse_keepalive_s`",
    phase="inside a hidden meta-call",
    client="every API, streamed: an SSE comment each `sse_keepalive_s`, then the answer of the re-issue",
)
@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_a_hidden_meta_round_keeps_the_stream_alive(run: Bench) -> None:
    gate = threading.Event()
    meta = played(run.api, run.api.reply(calls=(load(LOADED),)))
    run.script(SSE(meta, gate=gate, gate_after=len(meta) - 1), run.api.reply("done"))
    reading = run.reading()
    try:
        run.upstream.wait_for(lambda records: bool(run.sent()))
        before = len(reading.comments())
        assert reading.wait_comments(before + 2), "no keep-alive during the hidden round"
    finally:
        gate.set()
    answer = reading.answer()
    assert (answer.status, answer.text, answer.calls) == (200, "done", [])
    assert b"load_tools" not in answer.raw and len(run.sent()) == 2


@pytest.mark.parametrize(("name", "stream"), STREAMED, ids=list(APIS))
def test_a_json_answer_to_a_streaming_request_reaches_the_client_as_a_stream(run: Bench) -> None:
    run.script(Raw(200, run.api.reply("done").render(run.api.body(False), 100)))
    answer = run.post()
    assert (answer.status, answer.text, answer.ending, answer.error) == (200, "done", "stop", None)


@pytest.mark.parametrize(("name", "stream"), [(name, False) for name in APIS], ids=list(APIS))
def test_a_plain_client_gets_no_keep_alive(
    slow: Bench, servers: Servers, request: pytest.FixtureRequest, name: str
) -> None:
    sibling = bench(servers, "slow", request, name, True)  # streamed, its own credential
    gate = threading.Event()
    slow.upstream.script(Slow(gate), path="/embeddings")  # both plans wait for it
    slow.script(slow.api.reply("done"), slow.api.reply("done"))
    plain = slow.reading(own_words(slow))
    streamed = sibling.reading(own_words(sibling))
    try:
        assert streamed.wait_comments(2)  # two intervals went by while both were planned
    finally:
        gate.set()
    answer = plain.answer()
    assert (answer.status, answer.text) == (200, "done")
    assert answer.raw.lstrip().startswith(b"{") and comments(answer.raw) == []
    assert streamed.answer().text == "done"
