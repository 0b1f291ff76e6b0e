"""The servers people run, each known by its own endpoints (issue #52): in front of the
scripted upstream answering as llama-server, Lemonade (base URL ``/api/v1``, its web app's
HTML catch-all on every other path), vLLM, LM Studio or Ollama
(``benchmarks.support.server_shapes``), the proxy reads the server's kind and the model's
context from that server's endpoints, caps the block to it, counts tokens where the
server has a tokenizer, sends llama.cpp's fields only where llama.cpp runs, names the
kind in the decision log, answers each server's context overflow in the client's API's
shape, and warns when a prompt will not fit Ollama's loaded context. A server answering
HTML on every path is ``unknown``: the settings alone apply.

Real servers on loopback, shared by the module: one scripted upstream and one proxy per
server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from benchmarks.support.replies import Reply
from benchmarks.support.server_shapes import (
    Lemonade,
    LlamaServer,
    LmStudio,
    Ollama,
    Vllm,
    html_catch_all,
)
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Recorded, Slow, Upstream
from config.settings import Settings
from proxy.app import create_app
from proxy.http.upstream import Upstream as UpstreamClient
from proxy.http.upstream import create_session
from proxy.servers.probe import PROVISIONAL_S, ServerProbe
from selection.catalog.catalog import parse_tools
from selection.catalog.tokens import estimated_tokens
from selection.choosing.prefix import estimated_text_tokens
from tests.support.fault_matrix import proves
from tests.support.logs import Lines
from tests.support.turn_apis import APIS, CASES, IDS, Answer, comments

#: Every server's context for the model the requests name ("m").
CONTEXT = 3000
#: A history of about 2,000 estimated tokens: with it, 3,000 tokens hold a few tools.
HISTORY = "The build log follows. " + "error: step failed; retrying the job. " * 160
#: Each server: its shape, its base URL's path, how it lists the model.
SHAPES: dict[str, tuple[Callable[[Recorded], Reply | None], str]] = {
    "llama-server": (LlamaServer(n_ctx=CONTEXT), "/v1"),
    "lemonade": (Lemonade({"m": CONTEXT}, web_app=True), "/api/v1"),
    "vllm": (Vllm(model="m", max_model_len=CONTEXT), "/v1"),
    "lmstudio": (LmStudio({"m": CONTEXT}), "/v1"),
    "ollama": (Ollama(loaded={"m:latest": CONTEXT}), "/v1"),
    "unknown": (html_catch_all, "/v1"),
}
#: The upstream requests that count the model's tokens, per server (None: no tokenizer).
TOKENIZERS = {"llama-server": "/tokenize", "lemonade": "/api/v1/tokenize", "vllm": "/tokenize"}
Running = dict[str, tuple[Upstream, str]]


@pytest.fixture(scope="module")
def servers() -> Iterator[Running]:
    """One scripted upstream and one proxy per server (keep-alives off: an error reaches
    a streaming client before its response starts); ``lemonade-keepalive``: Lemonade with
    keep-alives every 50 ms."""
    with ExitStack() as stack:
        running: Running = {}
        for name, (shape, base) in [*SHAPES.items(), ("lemonade-keepalive", SHAPES["lemonade"])]:
            upstream = Upstream()
            upstream.behaviour = shape
            origin = stack.enter_context(serve_in_thread(upstream.app))
            keepalive = 0.05 if name.endswith("keepalive") else 0.0
            proxy = stack.enter_context(serve_in_thread(create_app(Settings(
                upstream_url=origin + base, top_k=8, max_tools=8, threshold=0.0,
                index_timeout_s=300.0, readiness_timeout_s=30.0, sse_keepalive_s=keepalive,
            )), server_header=False, date_header=False))
            running[name] = (upstream, proxy)
        yield running


def chat_bodies(upstream: Upstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.requests if r.path.endswith("/chat/completions")]


@pytest.mark.parametrize("kind", list(SHAPES))
def test_each_server_is_known_by_its_own_endpoints_and_its_facts_are_used(
    servers: Running, log_lines: Lines, kind: str
) -> None:
    upstream, proxy = servers[kind]
    known = kind != "unknown"
    body = APIS["chat"].body(False, HISTORY + " Which page failed? Take a screenshot of it.")
    response = httpx.post(proxy + "/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {kind}"}, timeout=300)
    assert response.status_code == 200
    # /readyz shows the facts and where they came from.
    shown = httpx.get(proxy + "/readyz", timeout=60).json()["server"]
    assert shown["kind"] == kind
    line = log_lines.wait_for("pruning_decision", response.headers["x-request-id"])
    assert line["server"] == kind
    sent = chat_bodies(upstream)[-1]
    client_tools = [t for t in sent["tools"] if t["function"]["name"] not in ("load_tools", "search_tools")]
    prompt = (sum(estimated_tokens(tool) for tool in parse_tools(client_tools).tools)
              + estimated_text_tokens(sent["messages"])
              + estimated_text_tokens([t for t in sent["tools"] if t not in client_tools]))
    if not known:  # no context known: the tool cap alone; no llama.cpp field, no tokenizer
        assert prompt > CONTEXT and "n_cache_reuse" not in sent
        assert not [r for r in upstream.requests if r.path.endswith("/tokenize")]
        return
    (model,) = shown["models"].values() if kind == "llama-server" else [shown["models"]["m"]]
    assert model["context_tokens"] == CONTEXT and model["context_source"]
    # The block is capped so that the prompt fits the server's context.
    assert 0 < len(client_tools) < 8 and prompt <= CONTEXT
    # llama.cpp's own field only where llama.cpp serves the model.
    assert ("n_cache_reuse" in sent) is (kind in ("llama-server", "lemonade"))
    # Exact counts where the server has a tokenizer, in its request shape.
    path = TOKENIZERS.get(kind)
    if path is None:
        assert not [r for r in upstream.requests if r.path.endswith("/tokenize")]
        return
    counted = upstream.wait_for(lambda records: any(r.path == path for r in records))
    asked = next(r.json() for r in counted if r.path == path)
    assert asked == ({"model": "m", "prompt": asked["prompt"], "add_special_tokens": False}
                     if kind == "vllm" else {"content": asked["content"]})


def test_vllms_tokenizer_is_asked_for_the_served_model_whatever_name_a_request_gives() -> None:
    """One model served: a request naming another (an alias, a made-up name) is counted
    by the served model's tokenizer under its id, so names add no tokenizer."""
    upstream = Upstream()
    upstream.behaviour = Vllm(model="m", max_model_len=CONTEXT)
    with serve_in_thread(upstream.app) as origin, serve_in_thread(create_app(Settings(
        upstream_url=origin + "/v1", top_k=8, max_tools=8, threshold=0.0,
        index_timeout_s=300.0, readiness_timeout_s=30.0,
    )), server_header=False, date_header=False) as proxy:
        for alias in ("alias-one", "alias-two"):
            body = {**APIS["chat"].body(False, HISTORY + " Take a screenshot of it."), "model": alias}
            response = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=300)
            assert response.status_code == 200
        counted = upstream.wait_for(lambda records: any(r.path == "/tokenize" for r in records))
    assert {r.json()["model"] for r in counted if r.path == "/tokenize"} == {"m"}


def error_of(answer: Answer, name: str) -> dict[str, Any]:
    """The client's error object, as its API writes it."""
    assert answer.status == 400 and answer.error is not None, answer.raw[:300]
    if name == "messages":
        assert answer.error["type"] == "invalid_request_error"
    else:
        assert answer.error["code"] == "context_length_exceeded"
        assert answer.error["type"] == "invalid_request_error"
    return answer.error


@proves(
    fault="the server refuses the prompt as longer than the model's context (llama-server's `exceed_context_size_error`, Lemonade's wrap of it, vLLM's `BadRequestError`, LM Studio's, Ollama's)",
    phase="before the upstream answers",
    client="400 in the API's own shape: `context_length_exceeded` with `n_prompt_tokens` and `n_ctx` (Chat Completions, Responses), `prompt is too long: N tokens > M maximum` (Messages); plain and streamed",
)
@pytest.mark.parametrize("kind", ["llama-server", "lemonade", "vllm", "lmstudio", "ollama"])
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_context_overflow_reaches_the_client_in_its_apis_shape(
    servers: Running, kind: str, name: str, stream: bool
) -> None:
    upstream, proxy = servers[kind]
    api = APIS[name]
    shape, _ = SHAPES[kind]
    upstream.script(shape.overflow(32920), path=api.suffix)  # type: ignore[attr-defined]
    error = error_of(api.post(proxy, stream, {"Authorization": f"Bearer overflow-{kind}"}), name)
    counted = kind != "ollama"  # Ollama's refusal gives no counts
    if name == "messages":
        expected = "prompt is too long: 32920 tokens > " if counted else "prompt is too long"
        assert error["message"].startswith(expected)
    else:
        assert ("n_prompt_tokens" in error) is counted
        if counted:
            assert error["n_prompt_tokens"] == 32920 and error["n_ctx"] in (CONTEXT, 4096)
    assert f"upstream {kind}:" in error["message"]


@proves(
    fault="the server refuses the prompt as too long after keep-alives started the client's stream",
    phase="before the upstream answers",
    client="every API, streamed: the API's error event with `context_length_exceeded` (Messages: `prompt is too long`)",
)
@pytest.mark.parametrize("name", list(APIS))
def test_an_overflow_after_the_stream_started_ends_it_with_the_apis_error_event(
    servers: Running, name: str
) -> None:
    """Keep-alives started the stream while Lemonade prefilled: its wrapped overflow ends
    it as the API's own error event."""
    upstream, proxy = servers["lemonade-keepalive"]
    api = APIS[name]
    gate = threading.Event()
    upstream.script(Slow(gate, SHAPES["lemonade"][0].overflow(32920)), path=api.suffix)  # type: ignore[attr-defined]
    with httpx.stream("POST", proxy + api.path, json=api.body(True),
                      headers={"Authorization": f"Bearer started-{name}"}, timeout=300) as response:
        raw = b""
        for chunk in response.iter_raw():
            raw += chunk
            if comments(raw):
                gate.set()
        assert response.status_code == 200
    answer = api.read_stream(raw)
    assert answer.error is not None, raw[-400:]
    error = answer.error.get("error", answer.error)
    if name == "messages":
        assert error["message"].startswith("prompt is too long: 32920 tokens > 3000 maximum")
    else:
        assert error["code"] == "context_length_exceeded"


@proves(
    fault="a prompt longer than the context Ollama loaded the model with (Ollama cuts it from the front behind a 200, tools first)",
    phase="before the upstream answers",
    client="the answer, with `X-Tool-Pruning-Warning: context_overflow; …; server=ollama`; the log's `prompt_exceeds_context` names `OLLAMA_CONTEXT_LENGTH` and `num_ctx`",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_prompt_longer_than_ollamas_loaded_context_is_warned_of(
    servers: Running, log_lines: Lines, name: str, stream: bool
) -> None:
    """Ollama would cut it from the front behind a 200, tools first: the client gets
    ``X-Tool-Pruning-Warning`` and the log names the setting that fixes it."""
    upstream, proxy = servers["ollama"]
    api = APIS[name]
    body = api.body(stream, HISTORY * 3 + " Which page failed?")
    response = httpx.post(proxy + api.path, json=body, timeout=300,
                          headers={"Authorization": f"Bearer warn-{name}-{stream}"})
    assert response.status_code == 200
    warning = response.headers["x-tool-pruning-warning"]
    assert warning.startswith("context_overflow; prompt_tokens=")
    assert warning.endswith(f"context_tokens={CONTEXT}; server=ollama")
    line = log_lines.wait_for("prompt_exceeds_context", response.headers["x-request-id"])
    assert "OLLAMA_CONTEXT_LENGTH" in line["fix"] and "num_ctx" in line["fix"]
    assert line["cut_silently"] and line["context_source"].endswith("/api/ps context_length (loaded)")
    # A request that fits gets no warning.
    fits = httpx.post(proxy + api.path, json=api.body(stream), timeout=300,
                      headers={"Authorization": f"Bearer warn-{name}-{stream}"})
    assert "x-tool-pruning-warning" not in fits.headers


async def test_an_ollama_model_not_loaded_gets_the_default_context_until_it_loads() -> None:
    """Before the model loads, the smallest default Ollama loads it with (capped by what
    the model supports), provisional; once ``/api/ps`` lists it, the context it has."""
    shape = Ollama(version="0.12.3", supported=32768)
    upstream = Upstream()
    upstream.behaviour = shape
    now = [0.0]
    with serve_in_thread(upstream.app) as origin:
        settings = Settings(upstream_url=origin + "/v1", readiness_timeout_s=30.0)
        session = create_session(settings)
        probe = ServerProbe(settings, UpstreamClient(settings, session), clock=lambda: now[0])
        try:
            assert (await probe.identify()).kind == "ollama"
            before = await probe.model("qwen2.5")
            assert (before.context_tokens, before.provisional) == (4096, True)
            assert "default num_ctx (model not loaded)" in (before.context_source or "")
            shape.loaded["qwen2.5:latest"] = 16384
            now[0] += PROVISIONAL_S
            assert (await probe.model("qwen2.5")).context_tokens == 4096  # read in the background
            await asyncio.gather(*probe._learning.values())
            after = await probe.model("qwen2.5")
            assert (after.context_tokens, after.provisional) == (16384, False)
        finally:
            await probe.aclose()
            await session.close()
