"""A session's model requests sent again, in their order, to a fresh llama-server with its
prompt cache on: llama-server's own count of each request's prompt tokens and of those it
evaluated (not served from its cache).

The requests are the ones a scripted upstream answered (its answers decided the session);
here each goes to llama-server as it was sent, except that it is not streamed and asks for
one generated token (``max_tokens``, or ``max_output_tokens`` on Responses): what is
measured is the prefill, and the next request's history holds the scripted answer, not
llama-server's token. One slot (``-np 1``) and the session's order make llama-server's
cache hold what it would hold had it served the session itself.

Where llama-server reports them (Chat Completions' ``timings``; Anthropic's and the
Responses API's ``usage``):

* Chat Completions: ``timings.prompt_n`` evaluated, ``+ timings.cache_n`` the prompt;
* Messages: ``usage.input_tokens`` evaluated (Anthropic's meaning: cache reads apart),
  ``+ usage.cache_read_input_tokens`` the prompt;
* Responses: ``usage.input_tokens`` the prompt, ``− input_tokens_details.cached_tokens``
  evaluated;
* a refusal: its ``error.n_prompt_tokens`` when it gives one (a prompt over the context),
  nothing evaluated.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import clean_env
from benchmarks.session import running
from benchmarks.support.llama import DETERMINISTIC, local_llama
from benchmarks.support.upstream import Recorded

#: A request's bound: SmolLM2 prefilled 20–100 tokens/s on 2 busy cores, slower the
#: longer the context (a 54k-token prompt: over an hour).
REQUEST_TIMEOUT = httpx.Timeout(7200.0, connect=10.0)


@dataclass
class Counted:
    """llama-server's answer to one request: its HTTP ``status``, the ``prompt`` tokens
    and those ``evaluated`` (None: not reported), the request's time in ``seconds``, and
    the error message of a refusal."""

    status: int
    prompt: int | None
    evaluated: int | None
    seconds: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def llama_argv(ctx: int) -> list[str]:
    """llama-server's command: SmolLM2-135M (``deploy/local_llama.py``), one slot of
    ``ctx`` tokens (the model's own context stretched to it), greedy decoding, the
    port left as ``{port}``."""
    extra = ["--override-kv", f"llama.context_length=int:{ctx}", *DETERMINISTIC]
    argv = local_llama().llama_server_command(0, ctx=ctx, parallel=1, extra=extra)
    argv[argv.index("--port") + 1] = "{port}"
    return argv


@contextmanager
def fresh_llama(log_dir: Path, name: str, ctx: int) -> Iterator[str]:
    """A llama-server of :func:`llama_argv` with an empty cache; yields its origin."""
    with running(name, llama_argv(ctx), log_dir, clean_env(), "/health") as server:
        yield server.origin


def one_token(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` unstreamed, asking for one generated token in its API's field."""
    out = {key: value for key, value in body.items()
           if key not in ("stream", "stream_options", "max_completion_tokens")}
    out["stream"] = False
    out["max_output_tokens" if path.endswith("/responses") else "max_tokens"] = 1
    return out


def read_counts(path: str, answer: dict[str, Any]) -> tuple[int | None, int | None]:
    """(prompt, evaluated) tokens of llama-server's answer to a request on ``path`` (the
    module docstring's fields)."""
    error = answer.get("error")
    if isinstance(error, dict):
        count = error.get("n_prompt_tokens")
        return (count, 0) if isinstance(count, int) else (None, None)
    timings, usage = answer.get("timings"), answer.get("usage")
    if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
        return timings["prompt_n"] + int(timings.get("cache_n") or 0), timings["prompt_n"]
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return None, None
    if path.endswith("/messages"):
        read = int(usage.get("cache_read_input_tokens") or 0)
        return usage["input_tokens"] + read, usage["input_tokens"]
    details = usage.get("input_tokens_details")
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return usage["input_tokens"], usage["input_tokens"] - cached


def replay(origin: str, requests: Sequence[Recorded],
           bodies: Sequence[dict[str, Any]] | None = None) -> list[Counted]:
    """Send each request (its path; its body, or the one of ``bodies`` at its place) to
    llama-server at ``origin``, one after another (:func:`one_token`)."""
    counted = []
    with httpx.Client(timeout=REQUEST_TIMEOUT) as client:
        for index, request in enumerate(requests):
            body = bodies[index] if bodies is not None else request.json()
            started = time.monotonic()
            response = client.post(origin + request.path, json=one_token(request.path, body))
            seconds = time.monotonic() - started
            try:
                answer = response.json()
            except ValueError:
                answer = {}
            answer = answer if isinstance(answer, dict) else {}
            prompt, evaluated = read_counts(request.path, answer)
            error = answer.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            counted.append(Counted(response.status_code, prompt, evaluated, seconds,
                                   str(message) if message is not None else None))
    return counted
