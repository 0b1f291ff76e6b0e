"""A model request's prompt as llama-server's token ids, without evaluating it, and a
session's requests counted by the simulated prompt cache
(:mod:`benchmarks.support.cache_walk`) instead of a real prefill.

The ids come from llama-server itself: the request in the Chat Completions shape its
routes give it (:mod:`benchmarks.support.llama_chat_shape` for Responses and Messages),
``POST /apply-template`` (its chat template with the request's messages and tools, what
the chat route renders), then ``POST /tokenize`` with ``add_special`` and
``parse_special`` (the chat route tokenizes its prompt with both: special tokens parsed,
BOS added where the model asks for it). Neither route uses a slot. The request's own
``n_cache_reuse`` and ``cache_prompt`` count where llama-server reads them (Chat
Completions and Responses; its Messages conversion drops them).

API reference: llama.cpp ``tools/server/README.md`` (``/apply-template``, ``/tokenize``);
``tools/server/server-context.cpp`` (``handle_completions_impl`` tokenizes with
``add_special`` and ``parse_special``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks.support.cache_walk import Slot
from benchmarks.support.llama_chat_shape import ChatShapeError, chat_shape
from benchmarks.support.llama_replay import Counted

#: One ``/apply-template`` or ``/tokenize`` call's bound (seconds): a 60k-token prompt
#: renders and tokenizes in well under a second.
TOKENIZE_TIMEOUT = httpx.Timeout(120.0, connect=10.0)


@dataclass(frozen=True)
class Prompt:
    """A request's prompt: its token ``ids`` (None: llama-server refuses the request
    before any slot, ``error`` says why), its ``n_cache_reuse`` (None: the server's
    default), ``cache_prompt``, and the ``text`` the chat template rendered."""

    ids: list[int] | None
    n_cache_reuse: int | None = None
    cache_prompt: bool = True
    error: str | None = None
    text: str | None = None


def _read_fields(path: str, body: dict[str, Any]) -> tuple[int | None, bool]:
    if path.endswith("/messages"):
        return None, True
    reuse = body.get("n_cache_reuse")
    cache = body.get("cache_prompt")
    return (reuse if isinstance(reuse, int) and not isinstance(reuse, bool) else None,
            cache if isinstance(cache, bool) else True)


def prompt_of(client: httpx.Client, origin: str, path: str, body: dict[str, Any]) -> Prompt:
    """The prompt of ``body`` sent to ``path`` on the llama-server at ``origin``
    (``http://host:port``), as the module docstring says. Raises ``httpx.HTTPError`` when
    llama-server cannot be reached or ``/tokenize`` fails."""
    try:
        chat = chat_shape(path, body)
    except ChatShapeError as error:
        return Prompt(None, error=str(error))
    rendered = client.post(origin + "/apply-template", json=chat, timeout=TOKENIZE_TIMEOUT)
    if rendered.status_code != 200:
        error = rendered.json().get("error", {}) if rendered.content else {}
        return Prompt(None, error=str(error.get("message", rendered.text[:200])))
    text = rendered.json()["prompt"]
    reuse, cache = _read_fields(path, body)
    return Prompt(tokenize(client, origin, text), reuse, cache, text=text)


def tokenize(client: httpx.Client, origin: str, text: str) -> list[int]:
    """``text``'s token ids as llama-server's chat route gets them (``add_special``,
    ``parse_special``). Raises ``httpx.HTTPError``."""
    tokenized = client.post(origin + "/tokenize", timeout=TOKENIZE_TIMEOUT, json={
        "content": text, "add_special": True, "parse_special": True})
    tokenized.raise_for_status()
    return [int(token) for token in tokenized.json()["tokens"]]


def prompts_of(origin: str, bodies: Sequence[tuple[str, dict[str, Any]]]) -> list[Prompt]:
    """:func:`prompt_of` for each ``(path, body)``."""
    with httpx.Client() as client:
        return [prompt_of(client, origin, path, body) for path, body in bodies]


def simulate(prompts: Sequence[Prompt], slot: Slot) -> list[Counted]:
    """Each prompt served in order by ``slot`` (one generated token: nothing of the answer
    stays in the cache), in :class:`~benchmarks.support.llama_replay.Counted` form: HTTP
    400 for a request llama-server refuses (before a slot, or over the context)."""
    counted = []
    for prompt in prompts:
        if prompt.ids is None:
            counted.append(Counted(400, None, None, 0.0, prompt.error))
            continue
        result = slot.request(prompt.ids, prompt.n_cache_reuse, cache_prompt=prompt.cache_prompt)
        if result.refused:
            counted.append(Counted(400, result.prompt, 0, 0.0,
                                   f"request ({result.prompt} tokens) exceeds the available "
                                   f"context size ({slot.n_ctx} tokens)"))
        else:
            counted.append(Counted(200, result.prompt, result.evaluated, 0.0))
    return counted
