"""The upstream's prefix (KV) cache as the proxy models it: which agent a request belongs
to, the token cap of its forwarded tools, and the tokens a request is expected to reuse
from the upstream's cache and to evaluate. Pure functions; counts are prompt tokens.

The model of a prompt, as chat templates that render tools in the system turn lay it out
(llama.cpp's Qwen2.5 and Hermes templates): ``[system prompt + CORE tools][block]
[template][messages]``, the block being the loaded tools with the meta-tool among them
(after the tools of the block's first request; tools admitted later follow it). An
upstream that keeps the last prompt's KV cache (llama-server ``cache_prompt``, on by
default; its ``--cache-ram`` keeps earlier prompts too) evaluates from the first token
that differs: the longest common prefix of the old and new block is reused, everything
after it — the rest of the block and every message — is evaluated again. The
meta-tool's text (its tier line) is one entry of the block: a changed tier breaks the
cache where the meta-tool starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import canonical_json, fingerprint
from selection.catalog.tokens import BYTES_PER_TOKEN

#: Prompt tokens a chat template adds around the tools and the messages (role markers,
#: tool-call instructions), set apart from the tool budget. Qwen2.5's template on
#: llama-server: ~60 tokens of tool instructions, ~5 per message.
TEMPLATE_RESERVE_TOKENS = 128
#: Marks the meta-tool's entry in a block sequence (:func:`block_signature`).
META_MARK = "\x00meta:"


def prefix_key(model: Any, system: str, catalog_fingerprint: str) -> str:
    """The agent a request belongs to: model, system prompt and catalogue (64 hex
    characters; the system prompt itself is never stored)."""
    return "agent:" + fingerprint([model, system, catalog_fingerprint])


def estimated_text_tokens(value: Any) -> int:
    """Estimated prompt tokens of a JSON value (messages, a definition), from its
    canonical JSON size at :data:`selection.catalog.tokens.BYTES_PER_TOKEN` bytes a token."""
    return math.ceil(len(canonical_json(value)) / BYTES_PER_TOKEN)


def tool_token_cap(context_tokens: int | None, share: float, other_tokens: int) -> int | None:
    """Tokens the forwarded client tools may take: ``share`` of the upstream's context,
    and never more than leaves room for ``other_tokens`` (messages, meta-tool) and
    :data:`TEMPLATE_RESERVE_TOKENS`, so the pruned prompt fits the context. None when
    the context is unknown; never negative."""
    if context_tokens is None:
        return None
    room = context_tokens - other_tokens - TEMPLATE_RESERVE_TOKENS
    return max(0, min(math.floor(context_tokens * share), room))


def block_signature(loaded: Sequence[str], tier: Sequence[str], meta_at: int | None) -> list[str]:
    """What of a prompt's tool part changes from turn to turn, in prompt order: the
    loaded tools, with the meta-tool's entry (:data:`META_MARK`, then its tier's names)
    after the first ``meta_at`` of them (None: no meta-tool)."""
    names = list(loaded)
    if meta_at is None:
        return names
    return [*names[:meta_at], META_MARK + "\x00".join(tier), *names[meta_at:]]


def is_meta_entry(entry: str) -> bool:
    """Whether a block entry is the meta-tool's (:func:`block_signature`)."""
    return entry.startswith(META_MARK)


@dataclass(frozen=True)
class CacheExpectation:
    """Tokens the proxy expects the upstream to take from its cache (``reused``) and to
    evaluate (``evaluated``) for one request; ``broken``: the block differs from the one
    the upstream holds for this conversation (or agent) after a conversation started, so
    the history after it is evaluated again."""

    reused: int
    evaluated: int
    broken: bool


def served_entries(cached: Sequence[str], block: Sequence[str], reuse: bool) -> int:
    """How many leading entries of ``block`` the cache of ``cached`` serves: their common
    prefix; with chunk reuse, the longest prefix of ``block`` that is a subsequence of
    ``cached`` (entries removed from the cached block are skipped, an inserted one ends
    the match)."""
    if not reuse:
        common = 0
        for old, new in zip(cached, block, strict=False):
            if old != new:
                break
            common += 1
        return common
    position = served = 0
    for name in block:
        while position < len(cached) and cached[position] != name:
            position += 1
        if position == len(cached):
            break
        position += 1
        served += 1
    return served


def expect_cache(
    cached: Sequence[str] | None,
    block: Sequence[str],
    tokens: Callable[[str], int],
    *,
    head_tokens: int,
    cached_history_tokens: int,
    history_tokens: int,
    reuse: bool = False,
) -> CacheExpectation:
    """What the upstream reuses and evaluates for a prompt whose block signature is
    ``block``, when its cache holds the signature ``cached`` followed by
    ``cached_history_tokens`` of messages (``cached`` None: nothing of this agent).

    ``tokens``: a block entry's prompt tokens (the meta-tool's entry included);
    ``head_tokens``: system prompt and CORE tools; ``history_tokens``: the messages now.
    ``reuse``: the upstream reuses cached chunks after a change (llama-server's
    ``n_cache_reuse``, which shifts matching chunks of at least that many tokens into
    place: a block that only lost entries is served whole, with the history after it).
    Its minimum chunk size is not modelled.
    """
    total = head_tokens + sum(tokens(n) for n in block) + history_tokens
    if cached is None:
        return CacheExpectation(0, total, False)
    served = served_entries(cached, block, reuse)
    if served == len(block) and (reuse or served == len(cached)):
        reused = total - history_tokens + min(cached_history_tokens, history_tokens)
        return CacheExpectation(reused, total - reused, False)
    reused = head_tokens + sum(tokens(n) for n in block[:served])
    return CacheExpectation(reused, total - reused, cached_history_tokens > 0)


def split_system(messages: Sequence[Any]) -> tuple[str, list[Any]]:
    """A conversation's leading ``system``/``developer`` messages, as one canonical text
    (the part of an agent's prompt before its tools), and the messages after them."""
    lead: list[str] = []
    for message in messages:
        if not (isinstance(message, dict) and message.get("role") in ("system", "developer")):
            break
        lead.append(canonical_json(message.get("content")).decode("utf-8"))
    return "\n".join(lead), list(messages[len(lead):])
