"""Building selection's front door from settings: the configured embedder, the tool
vectors' disk store, the engine with the signals the settings switch on, and the
:class:`~selection.planning.Selector` over them (no I/O here: the embedder loads and the
store opens on first use)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from config.policy import load_policy
from config.settings import Settings
from selection.catalog.policy import Policy
from selection.embedders.http import HttpEmbedder
from selection.embedders.onnx import OnnxEmbedder
from selection.embedders.protocol import Embedder
from selection.indexes.vector_store import SqliteVectorStore, default_store_dir
from selection.planning import Selector, SelectorSettings
from selection.ranking.engine import SelectionEngine
from selection.ranking.signals.registry import Signals

if TYPE_CHECKING:
    import httpx

#: Per-call timeout of the embedder itself (seconds); the request path applies
#: ``embedder_timeout_s`` on top, and catalogue indexing may take longer in the background.
EMBEDDER_CALL_TIMEOUT_S = 300.0
#: An offline command's budgets (seconds): it waits for a cold catalogue's index instead of
#: ranking it by what is embedded in time.
OFFLINE_QUERY_TIMEOUT_S = 120.0
OFFLINE_INDEX_TIMEOUT_S = 3600.0


def build_selector(
    settings: Settings, embedder: Embedder, *, policy: Policy | None = None,
    offline: bool = False, without: Collection[str] = (),
) -> Selector:
    """The front door over ``embedder`` (see :func:`build_embedder`), with the configured
    caches, vector store and signals (less those named in ``without``: ``toolprune eval
    --ablate``). ``policy``: default :func:`config.policy.load_policy`. ``offline``: the
    budgets of an offline command, which waits for a cold catalogue's whole index.

    Raises: PolicyError (the policy file), ValueError (an unknown name in ``without``)."""
    engine = SelectionEngine(
        embedder,
        vector_cache_size=settings.vector_cache_size,
        index_cache_size=settings.index_cache_size,
        timeout_s=max(settings.embedder_timeout_s, OFFLINE_QUERY_TIMEOUT_S) if offline
        else settings.embedder_timeout_s,
        index_timeout_s=max(settings.index_timeout_s, OFFLINE_INDEX_TIMEOUT_S) if offline
        else settings.index_timeout_s,
        max_builds=settings.max_index_builds,
        max_text_chars=settings.max_tool_text_chars,
        signals=Signals.from_values(settings.signal_values(), without),
        query_cache_size=settings.query_cache_size,
        query_batch_texts=settings.query_batch_texts,
        store=build_vector_store(settings),
        cold_start_tools=0 if offline else settings.cold_start_tools,
    )
    return Selector(engine, policy if policy is not None else load_policy(settings),
                    selector_settings(settings))


def selector_settings(settings: Settings) -> SelectorSettings:
    """What the front door reads of ``settings`` besides its policy and signals."""
    return SelectorSettings(
        query_user_messages=settings.query_user_messages,
        query_chars=settings.query_chars,
        query_parts=settings.query_parts,
        tool_budget_share=settings.tool_budget_share,
        search_tools_min_catalog=settings.search_tools_min_catalog,
        proactive_loads=settings.proactive_loads,
        rankings_logged=settings.learn and settings.usage_db is not None,
    )


def build_vector_store(settings: Settings) -> SqliteVectorStore | None:
    """The disk store of tool vectors (``vector_store_dir``), None when
    ``vector_store_mb`` is 0. Nothing is opened here: the first catalogue opens it."""
    if settings.vector_store_mb <= 0:
        return None
    directory = settings.vector_store_dir or default_store_dir()
    return SqliteVectorStore(directory, settings.vector_store_mb * 1024 * 1024)


def build_embedder(settings: Settings, client: httpx.AsyncClient | None = None) -> Embedder:
    """The embedder ``settings.embedder`` names (not loaded yet). An HTTP embedder uses
    ``client`` when given (left open), else its own (closed with the embedder).
    Raises ValueError: ``TOOLPRUNE_EMBEDDER=url`` without ``TOOLPRUNE_EMBEDDER_URL``."""
    if settings.embedder == "onnx":
        return OnnxEmbedder(
            settings.embedder_model_dir,
            cache_dir=settings.embedder_cache_dir,
            max_tokens=settings.embedder_max_tokens,
            intra_op_threads=settings.embedder_threads,
            timeout_s=EMBEDDER_CALL_TIMEOUT_S,
        )
    if settings.embedder == "upstream":
        url = settings.upstream_url + "/embeddings"
    elif settings.embedder_url:
        url = settings.embedder_url
    else:
        raise ValueError("TOOLPRUNE_EMBEDDER=url needs TOOLPRUNE_EMBEDDER_URL")
    api_key = settings.embedder_api_key.get_secret_value() if settings.embedder_api_key else None
    return HttpEmbedder(
        url, settings.embedder_model, api_key=api_key, client=client,
        timeout_s=EMBEDDER_CALL_TIMEOUT_S,
    )
