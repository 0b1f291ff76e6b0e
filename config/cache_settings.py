"""Settings of the upstream's prefix (KV) cache and speed as the proxy plans for them
(pydantic-settings): when a later turn changes its tool block, where tools needed later
reach the model, the token cap from the upstream's context, what the cache keeps,
llama-server's chunk reuse, the speeds of a server that reports none and when tools are
delivered before the model asks (docs/sessions.md). The third group of :class:`config.settings.Settings`, which extends
this class; each field's description is its documentation (``docs/reference/settings.md``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from config.signal_settings import SignalSettings


class CacheSettings(SignalSettings):
    """The KV-cache knobs (chosen on the sessions of docs/sessions.md)."""

    # --- the upstream's KV cache --------------------------------------------------
    refresh_rank: int = Field(
        4,
        ge=0,
        description="A turn on a block (a later turn, or a new conversation on its agent's "
        "block) admits new tools only when one of its `refresh_rank` best-scored tools is "
        "not forwarded yet (each change makes the upstream evaluate the history again); it "
        "then admits those. 0: such turns add only tools called or loaded.",
    )
    refresh_top_k: int = Field(
        16,
        ge=0,
        description="Candidates a turn that changes its block may add beyond its best tools "
        "as insurance (see `refresh_share`): those within top-k may evict the least "
        "recently used tool, the others fill free room only.",
    )
    refresh_share: float = Field(
        4.0,
        ge=0,
        description="The insurance candidates' schemas cost at most this share of the "
        "history's tokens: insurance "
        "against another change, which would make the upstream evaluate that history again.",
    )
    context_tokens: int | None = Field(
        None,
        gt=0,
        description="The upstream's context per request, in tokens. Unset: what the server "
        "reports for the model (docs/servers/: `/props`, `/models`, `/api/ps`…), refreshed; "
        "a server that reports none: no token cap, only `max_tools`.",
    )
    tool_budget_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Share of the upstream's context the forwarded tools may take (never "
        "more than leaves room for the messages): a pruned prompt fits the context.",
    )
    prefix_cache: Literal["auto", "last_prompt", "per_conversation"] = Field(
        "auto",
        description="What the upstream's prefix cache keeps. `last_prompt`: one prompt per "
        "agent (llama-server: a slot keeps its last prompt, and a request goes to the slot "
        "whose prompt it shares most with, so conversations of one agent take turns in one "
        "slot): they share one tool block, and a turn after another conversation's takes "
        "it, since its history is evaluated again anyway. `per_conversation`: many prompts "
        "(vLLM automatic prefix caching, SGLang): each conversation keeps its own block. "
        "`auto`: `last_prompt` for a server known to keep one prompt per slot (llama-server, "
        "Lemonade, Ollama, LM Studio), else `per_conversation`.",
    )
    late_tools: Literal["auto", "conversation", "block"] = Field(
        "auto",
        description="Where a tool first needed after a conversation's first request reaches "
        "the model. `conversation`: the tool block stays as the upstream cached it (its "
        "KV cache keeps the whole history); a `load_tools`/`search_tools` result, or the "
        "client's own search result, carries the tool's definition, and the model calls it "
        "through the `call_tool` bridge, which the proxy turns into the client's real call. "
        "`block`: the tool joins the block, and the upstream evaluates the history after "
        "the block again. `auto`: `conversation` when the upstream is a server known to cache "
        "the prompt's prefix (llama-server, Lemonade, vLLM, Ollama, LM Studio: "
        "docs/servers/), else `block`.",
    )
    cache_reuse_tokens: int = Field(
        64,
        ge=0,
        description="llama-server's `n_cache_reuse`, sent with each chat completions and "
        "Responses request (llama-server drops it from Messages requests) for a model that "
        "llama.cpp serves (llama-server, Lemonade's `llamacpp`) unless the request sets it: cached "
        "chunks of at least this many tokens are shifted into place after a change, so a "
        "tool block that lost tools keeps what follows them (as `--cache-reuse`). 0: not sent.",
    )
    proactive_loads: Literal["auto", "always", "never"] = Field(
        "auto",
        description="With tools delivered in the conversation (`late_tools`), whether a new "
        "user turn whose best tools the conversation's block lacks gets them delivered "
        "before the model asks (the proxy makes the `load_tools`/`search_tools` call "
        "itself; its result, with their definitions, follows the user's message). `auto`: "
        "where the server's speeds are known, the tools whose delivery is expected to save "
        "more seconds (the model's search call, a round) than their definitions' prefill "
        "costs; none where they are not. `always`: every best tool the block lacks (`true` "
        "is read so). `never` (`false`): the model searches when it needs a tool "
        "(measured: docs/sessions.md).",
    )
    prefill_tokens_per_s: float | None = Field(
        None,
        gt=0,
        description="The upstream's prompt evaluation (prefill) speed, tokens per second, "
        "for a server whose answers report none (llama-server's and Lemonade's `timings` "
        "do; elsewhere the proxy times streamed answers that carry `usage`): with "
        "`decode_tokens_per_s`, the proxy plans in seconds (docs/sessions.md). Learned "
        "speeds replace it.",
    )
    decode_tokens_per_s: float | None = Field(
        None,
        gt=0,
        description="The upstream's generation (decode) speed, tokens per second, for a "
        "server whose answers report none (see `prefill_tokens_per_s`).",
    )

    @field_validator("proactive_loads", mode="before")
    @classmethod
    def _proactive_boolean(cls, value: Any) -> Any:
        """``true`` / ``false`` (the setting's earlier form) read as ``always`` / ``never``."""
        if isinstance(value, bool):
            return "always" if value else "never"
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
            return "always"
        if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
            return "never"
        return value
