"""Process settings, read from ``TOOLPRUNE_*`` environment variables (pydantic-settings).

Units are in the field names (``_s`` seconds, ``_bytes``, ``_chars``). Each field's
description is its documentation: ``python -m scripts.gen_reference`` writes them to
``docs/reference/settings.md``, and ``tests/unit/test_reference_docs.py`` fails when that page
is out of date.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from config.cache_settings import CacheSettings

#: Largest top-k one request may ask for (``X-Tool-Pruning-Top-K``, ``toolprune explain
#: --top-k``); ``max_tools`` caps what is forwarded anyway.
MAX_TOP_K = 10_000


def request_top_k(text: str) -> int:
    """The top-k one request asks for (``X-Tool-Pruning-Top-K``, ``toolprune explain
    --top-k``): ASCII digits, 0 to :data:`MAX_TOP_K`, surrounding spaces ignored.
    Raises ValueError ("must be an integer from 0 to …")."""
    text = text.strip()
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_TOP_K)) or (
        int(text) > MAX_TOP_K
    ):
        raise ValueError(f"must be an integer from 0 to {MAX_TOP_K}")
    return int(text)


class Settings(CacheSettings):
    """All configuration of one proxy process: the server's and the upstream's
    (:class:`~config.server_settings.ServerSettings`, listed first), the ranking signals
    and expansions (:class:`~config.signal_settings.SignalSettings`), the upstream's KV
    cache (:class:`~config.cache_settings.CacheSettings`), then pruning,
    selection, the embedder, caches and state, the usage log. Build with ``Settings()``
    (reads the environment) or ``Settings(upstream_url=...)`` in code and tests."""

    # --- pruning ------------------------------------------------------------------
    enabled: bool = Field(
        True, description="Global switch; `false` forwards every request unchanged."
    )
    policy_file: Path | None = Field(
        None, description="TOML policy file: core, bundles, examples, selection knobs."
    )
    core: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated tool names or glob patterns always forwarded.",
    )
    top_k: int = Field(
        8, ge=0,
        description="Top-k: the semantic candidates of a turn may cost top-k × a mean tool "
        "cost (see `token_budget`, unless that is set).",
    )
    threshold: float = Field(
        0.1,
        ge=-1.0,
        le=1.0,
        description="τ: least cosine score (inclusive) for admission (calibrated on public "
        "tool-selection benchmarks: docs/measured.md).",
    )
    max_tools: int = Field(
        16,
        ge=1,
        description="Cap on forwarded client tools, CORE and pinned excepted; a block at the "
        "cap evicts its least recently used tool to admit another. On an upstream without "
        "chunk reuse (vLLM, Ollama) set `context_tokens` and a higher cap (e.g. 64) to let "
        "the token budget govern.",
    )
    min_catalog_tools: int = Field(
        8, ge=0, description="Catalogues of at most this many tools are never pruned."
    )
    min_saving: float = Field(
        0.0,
        le=1.0,
        description="Catalogues whose pruned first turn (top-k tools at the catalogue's mean "
        "size and the meta-tool) is expected to save less than this share of their schema "
        "tokens are forwarded whole, if they fit the tools' share of the context. 0: when "
        "pruning would cost more than the whole catalogue. Negative: prune such catalogues "
        "too (`-inf`: always).",
    )
    token_budget: int = Field(
        0,
        ge=0,
        description="Schema tokens the semantic candidates may cost per turn; 0: top-k × "
        "the mean tool tokens of the catalogue and of the turn's best 2 × top-k candidates, "
        "averaged (more small tools, fewer large ones).",
    )
    dominance_margin: float | None = Field(
        None,
        ge=0.0,
        description="Candidates scoring more than this below the best are not admitted "
        "(one dominant match: few tools); unset: off.",
    )
    tier_size: int = Field(
        8,
        ge=0,
        description="Next-best tools the meta-tool lists by name and purpose, loadable in "
        "one round without their schema cost. 0: off.",
    )
    query_user_messages: int = Field(
        1,
        ge=1,
        description="User messages that make up the retrieval query (one more when the last "
        "is a fragment of fewer than 3 words: `Thanks.`, `yes`).",
    )
    query_chars: int = Field(
        1000,
        ge=100,
        description="Trailing characters of the query that are embedded (the default "
        "embedder reads 256 tokens, about 1,000 characters).",
    )
    query_parts: int = Field(
        6,
        ge=0,
        description="Parts of the query (sentences of its user messages, tool results; the "
        "newest) embedded with it; a tool scores its best part. 0: the whole query only.",
    )
    text_format: str = Field(
        "auto",
        description="Tool blocks in system prompts: `auto` (first preset or policy-file format "
        "that matches), `off`, or one format's name (`hermes`, `markdown`, `lines`, custom).",
    )
    search_tools_min_catalog: int = Field(
        100,
        ge=1,
        description="Catalogues larger than this get `search_tools` instead of the listed menu.",
    )
    preload_deferred: bool = Field(
        True,
        description="When the client defers tools (`defer_loading`), toolprune also loads "
        "the best of them by its own ranking, within the token budget. `false`: only tools "
        "a search finds (or the history calls) load; the tools the client did not defer "
        "are forwarded either way.",
    )
    upstream_props_refresh_s: float = Field(
        600.0,
        gt=0,
        description="Seconds between reads of what the server is and reports (docs/servers/); "
        "also how long a tokenizer that failed is not asked again (tokens are estimated).",
    )
    upstream_stream: bool | None = Field(
        None,
        description="Whether acting chat-completions requests that stream are sent upstream "
        "streaming. `false`: sent without streaming, the client's SSE made from the JSON "
        "answer (upstreams that drop streamed tool calls: the answer ends `stop` with no "
        "content). Unset: `false` for an upstream identified as Ollama before v0.8.0 "
        "(`GET /api/version`), else `true`. A streamed answer to a request with tools that ends "
        "`stop` with no content nor call is logged (`upstream_suspicious_stop`) and counted "
        "(`toolprune_upstream_suspicious_stops_total`).",
    )
    max_meta_rounds: int = Field(
        3, ge=0, description="Upstream re-issues after meta-tool calls, per client request."
    )

    # --- embedder -----------------------------------------------------------------
    embedder: Literal["onnx", "upstream", "url"] = Field(
        "onnx",
        description="`onnx`: embedded all-MiniLM-L6-v2 int8 (offline); `upstream`: the "
        "upstream's `/embeddings`; `url`: any OpenAI-compatible embeddings URL.",
    )
    embedder_model_dir: Path | None = Field(
        None, description="Other ONNX sentence-embedding model dir (model.onnx, tokenizer.json)."
    )
    embedder_url: str | None = Field(None, description="Embeddings URL for `embedder=url`.")
    embedder_model: str = Field(
        "nomic-embed-text-v1-GGUF", description="Model name sent to an HTTP embedder."
    )
    embedder_api_key: SecretStr | None = Field(
        None, description="Bearer token for an HTTP embedder."
    )
    embedder_cache_dir: Path | None = Field(
        None,
        description="Where the embedded model's lean form is derived once and kept "
        "(default `$XDG_CACHE_HOME/toolprune/models` or `~/.cache/toolprune/models`).",
    )
    embedder_threads: int = Field(
        1, ge=1, description="ONNX Runtime intra-op threads (no spin-waiting between operators)."
    )
    embedder_max_tokens: int = Field(256, ge=8, description="Truncation of embedded texts.")
    embedder_timeout_s: float = Field(
        5.0, gt=0, description="Budget for embedding one request's query."
    )
    index_timeout_s: float = Field(
        1.5,
        gt=0,
        description="How long a request on a catalogue not fully indexed yet waits: for the "
        "whole index when it would be embedded in that time (at the measured rate), else for "
        "the texts it needs (`cold_start_tools`); then it is ranked by what is embedded (BM25 "
        "alone if nothing is) and indexing goes on in the background.",
    )
    cold_start_tools: int = Field(
        32,
        ge=0,
        description="Tools of a catalogue being indexed whose descriptions a request has "
        "embedded first, best by BM25 and name match (all missing texts when no more are "
        "left). 0: no request jumps the queue; it waits for the whole index, else BM25.",
    )
    max_index_builds: int = Field(
        1, ge=1, description="Embedder calls for tool texts at once (catalogue indexes share them)."
    )
    max_tool_text_chars: int = Field(
        2000,
        ge=64,
        description="Each text a tool is indexed by is clipped to this many characters before "
        "tokenizing (the embedder reads its first `embedder_max_tokens` tokens anyway).",
    )
    max_tool_definition_bytes: int = Field(
        256 * 1024,
        ge=1024,
        description="A catalogue with a larger tool definition (canonical JSON) is forwarded "
        "unchanged.",
    )
    warm_files: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated JSON files (a `tools` array, or a request body with "
        "`tools`) indexed at start-up (`toolprune serve --warm FILE…`).",
    )

    # --- caches and state ---------------------------------------------------------
    vector_cache_size: int = Field(
        100_000, ge=0, description="Tool-text vectors kept in memory (LRU)."
    )
    vector_store_dir: Path | None = Field(
        None,
        description="Where tool-text vectors are kept on disk, across restarts and for every "
        "worker (one SQLite file; default `$XDG_CACHE_HOME/toolprune/vectors` or "
        "`~/.cache/toolprune/vectors`; a local file system).",
    )
    vector_store_mb: int = Field(
        256,
        ge=0,
        description="Size bound of the vector store, MiB (least recently used vectors go "
        "first; ~1.6 KB a 384-d vector). 0: no store, vectors are kept in memory only.",
    )
    index_cache_size: int = Field(64, ge=1, description="Catalogue indexes kept (LRU).")
    query_cache_size: int = Field(
        1024,
        ge=0,
        description="Query-text vectors kept in memory (LRU, by exact text; 0: off): a retried "
        "request or a meta-tool round re-planning the same turn is not embedded again.",
    )
    query_batch_texts: int = Field(
        64,
        ge=1,
        description="Most query texts embedded in one call: queries of concurrent requests "
        "that arrive while one embedding runs are embedded together next.",
    )
    state_ttl_s: float = Field(
        6 * 3600.0, gt=0, description="A conversation's state expires this long after last use."
    )
    state_max_conversations: int = Field(
        10_000, ge=1, description="Conversations kept by the in-memory store (LRU)."
    )
    state_url: str | None = Field(
        None,
        description="Redis URL (`redis://HOST:6379/0`, `rediss://…`, `unix:///path`): keep "
        "conversation state in Redis, shared by every replica. Unset: in process memory.",
    )
    state_key_prefix: str = Field(
        "toolprune:", description="Prefix of the proxy's Redis keys (one Redis, several fleets)."
    )
    redis_timeout_s: float = Field(
        0.25,
        gt=0,
        description="Budget of one Redis operation (connect included); past it the request "
        "gets the full catalogue.",
    )
    state_shared_across_credentials: bool = Field(
        False,
        description="`false`: a conversation's state is keyed by a hash of the request's "
        "credential (`Authorization`, `api-key`, `x-api-key`) too, so another key cannot read "
        "or plant its loads; `true`: clients that share one key on purpose share state by id.",
    )
    fallback_log_interval_s: float = Field(
        60.0, ge=0, description="Least interval between two error logs of one fallback reason."
    )

    # --- usage log ----------------------------------------------------------------
    usage_db: Path | None = Field(
        None,
        description="SQLite file of the usage log (per acting request and tool call; read by "
        "`toolprune usage report`). Unset: no log.",
    )
    usage_store_text: bool = Field(
        False,
        description="Also keep the user message that preceded each real tool call, as a "
        "candidate example utterance (user text: off unless asked).",
    )
    usage_retention_days: float = Field(
        30.0, gt=0, description="Usage-log rows older than this are deleted (days)."
    )
    learn: bool = Field(
        False,
        description="Learn selection from the agent's own traffic (docs/learning.md): keep "
        "each request's query vector (float16, never its text) in the usage log and apply "
        "the learned states promoted there. Needs `usage_db`.",
    )
    learn_interval_s: float = Field(
        0.0, ge=0,
        description="With `learn`: run a learning pass (`toolprune learn`) this often, "
        "seconds; 0: only by hand.",
    )
    learn_refresh_s: float = Field(
        60.0, ge=0,
        description="With `learn` and `state_url`: install the learned states other replicas "
        "published to Redis at start and then this often, seconds (a scheduled pass also "
        "does); 0: at start and on scheduled passes only.",
    )

    @field_validator("state_url", mode="before")
    @classmethod
    def _check_state_url(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip()
            if not value:
                return None  # TOOLPRUNE_STATE_URL= (empty) keeps the in-memory store
            if not value.startswith(("redis://", "rediss://", "unix://")):
                raise ValueError("state_url must start with redis://, rediss:// or unix://")
        return value

    @field_validator("core", "warm_files", mode="before")
    @classmethod
    def _split_comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value
