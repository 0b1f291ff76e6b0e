"""Each server's error bodies read for a context overflow, and the overflow written in the
client's API shape; Ollama's context before a model loads; where a server's endpoints
hang from; when a prompt is expected not to fit. The bodies are the servers' own shapes
(``benchmarks.support.server_shapes``)."""

from __future__ import annotations

import json

import pytest

from benchmarks.support.server_shapes import Lemonade, LlamaServer, LmStudio, Ollama, Vllm
from benchmarks.support.upstream import Recorded
from proxy.http.errors import ERROR_SHAPE, ContextOverflow
from proxy.servers import ollama
from proxy.servers.asking import urls
from proxy.servers.facts import ModelFacts, ServerFacts
from proxy.servers.fit import shortfall
from proxy.servers.overflow import read_overflow
from selection.types import CacheExpectation


def raw(shape: object, prompt: int) -> tuple[int, bytes]:
    reply = shape.overflow(prompt)  # type: ignore[attr-defined]
    return reply.status, json.dumps(reply.body).encode()


@pytest.mark.parametrize(("shape", "kind", "counts"), [
    (LlamaServer(8192), "llama-server", (32920, 8192)),
    (Lemonade({"Qwen3-0.6B-GGUF": 8192}), "lemonade", (32920, 8192)),
    (Vllm(max_model_len=8192), "vllm", (32920, 8192)),
    (LmStudio({"qwen": 4096}), "lmstudio", (32920, 4096)),
    (Ollama(), "ollama", (None, None)),
])
def test_each_servers_overflow_is_read_with_the_counts_it_gives(
    shape: object, kind: str, counts: tuple[int | None, int | None]
) -> None:
    error = read_overflow(*raw(shape, 32920))
    assert isinstance(error, ContextOverflow)
    assert (error.prompt_tokens, error.context_tokens) == counts
    assert error.status_code == 400 and error.code == "context_length_exceeded"
    assert f"upstream {kind}:" in error.message


def test_the_identified_kind_is_named_and_other_errors_pass() -> None:
    wrapped = read_overflow(*raw(Lemonade(), 900), server="lemonade")
    assert wrapped is not None and "upstream lemonade:" in wrapped.message
    plain = {"error": {"message": "model not found", "type": "not_found_error"}}
    assert read_overflow(404, json.dumps(plain).encode()) is None
    assert read_overflow(200, json.dumps(LlamaServer().overflow(9).body).encode()) is None
    assert read_overflow(400, b"<html>bad request</html>") is None
    # vLLM before v0.10: the ErrorResponse's fields at the top level.
    old = {"object": "error", "type": "BadRequestError", "code": 400, "message": (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion).")}
    found = read_overflow(400, json.dumps(old).encode())
    assert found is not None and (found.prompt_tokens, found.context_tokens) == (4000, 4096)


def test_an_overflow_speaks_each_apis_own_words() -> None:
    error = ContextOverflow("request (9000 tokens) exceeds…", 9000, 4096, "llama-server")
    openai = json.loads(error.body())["error"]
    assert openai["code"] == "context_length_exceeded" and openai["type"] == "invalid_request_error"
    assert (openai["n_prompt_tokens"], openai["n_ctx"]) == (9000, 4096)
    assert openai["message"].startswith("This model's maximum context length is 4096 tokens")
    token = ERROR_SHAPE.set("anthropic")
    try:
        anthropic = json.loads(error.body())
    finally:
        ERROR_SHAPE.reset(token)
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "invalid_request_error"
    assert anthropic["error"]["message"].startswith("prompt is too long: 9000 tokens > 4096 maximum")


def test_ollamas_context_before_a_model_loads_is_its_smallest_default() -> None:
    shown = Ollama(supported=32768)(_show()).body  # type: ignore[union-attr]
    assert ollama._not_loaded(shown, "http://o", "0.12.3").context_tokens == 4096
    assert ollama._not_loaded(shown, "http://o", "0.6.5").context_tokens == 2048
    small = Ollama(supported=1024)(_show()).body  # type: ignore[union-attr]
    assert ollama._not_loaded(small, "http://o", "0.12.3").context_tokens == 1024
    own = Ollama(num_ctx=16384)(_show()).body  # type: ignore[union-attr]
    facts = ollama._not_loaded(own, "http://o", "0.12.3")
    assert facts.context_tokens == 16384 and facts.provisional
    assert ollama.full_name("qwen2.5") == "qwen2.5:latest"
    assert ollama.full_name("hf.co/Qwen/Qwen3-4B-GGUF:Q4_K_M") == "hf.co/Qwen/Qwen3-4B-GGUF:Q4_K_M"


def _show() -> Recorded:
    return Recorded("POST", "/api/show", "", [], b'{"model": "qwen2.5"}')


def test_a_servers_endpoints_hang_from_its_base_url_and_its_origin() -> None:
    assert urls("http://h:8080/v1") == ("http://h:8080/v1", ["http://h:8080"])
    assert urls("http://gw/llama/v1/") == ("http://gw/llama/v1", ["http://gw/llama", "http://gw"])
    assert urls("http://h:8000/api/v1")[1] == ["http://h:8000/api", "http://h:8000"]


def test_a_prompt_over_the_context_falls_short_with_the_servers_setting() -> None:
    server = ServerFacts("ollama", context_setting=ollama.CONTEXT_SETTING)
    facts = ModelFacts(4096, "GET /api/ps context_length (loaded)")
    assert shortfall(CacheExpectation(0, 3000, False), facts, server) is None
    short = shortfall(CacheExpectation(1000, 3500, False), facts, server)
    assert short is not None and short.prompt_tokens > 4096
    assert short.header().startswith(b"context_overflow; prompt_tokens=")
    assert "OLLAMA_CONTEXT_LENGTH" in short.fields()["fix"] and short.fields()["cut_silently"]
    assert shortfall(CacheExpectation(0, 9000, False), ModelFacts(), server) is None
