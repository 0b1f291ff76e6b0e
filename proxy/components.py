"""Building the configured embedder and state store from settings, and warming
catalogues at start-up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from config.settings import Settings
from proxy.log import get_logger
from selection.embedders import Embedder, HttpEmbedder, OnnxEmbedder
from selection.engine import SelectionEngine
from selection.group_ranking import GroupRanking, GroupScorer
from selection.catalog import parse_tools
from selection.errors import CatalogError, EmbedderError
from selection.policy import Policy
from selection.state import MemoryStateStore, StateStore
from selection.vector_store import SqliteVectorStore, default_store_dir

if TYPE_CHECKING:
    import httpx

logger = get_logger("startup")

#: Per-call timeout of the embedder itself; the request path applies
#: ``embedder_timeout_s`` on top, and catalogue indexing may take longer in the background.
EMBEDDER_CALL_TIMEOUT_S = 300.0


def limit_blas_threads() -> None:
    """Run numpy's BLAS (OpenBLAS) on one thread in this process. The proxy's products are
    one query against a catalogue's vectors; on shared cores, OpenBLAS's worker threads cost
    more than they save (at 10,000 tool texts of 64 dimensions, 12 ms a product instead of
    1.2: ``benchmarks/planning_cpu.py``), and they take CPU from the event loop."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def build_engine(settings: Settings, client: httpx.AsyncClient | None = None) -> SelectionEngine:
    """The selection engine over the configured embedder, with the configured caches.
    ``client``: see :func:`build_embedder`."""
    return with_groups(SelectionEngine(
        build_embedder(settings, client),
        vector_cache_size=settings.vector_cache_size,
        index_cache_size=settings.index_cache_size,
        timeout_s=settings.embedder_timeout_s,
        index_timeout_s=settings.index_timeout_s,
        max_builds=settings.max_index_builds,
        max_text_chars=settings.max_tool_text_chars,
        lexical_weight=settings.lexical_weight,
        name_weight=settings.name_weight,
        query_cache_size=settings.query_cache_size,
        query_batch_texts=settings.query_batch_texts,
        store=build_vector_store(settings),
        cold_start_tools=settings.cold_start_tools,
    ), settings)


def with_groups(engine: SelectionEngine, settings: Settings) -> SelectionEngine:
    """``engine``, ranking by catalogue groups as the settings configure it
    (:mod:`selection.group_ranking`: ``group_weight``, ``group_lexical_weight``,
    ``group_vector_weight``, ``group_size``)."""
    engine.groups = GroupScorer(
        GroupRanking(
            weight=settings.group_weight,
            lexical_weight=settings.group_lexical_weight,
            vector_weight=settings.group_vector_weight,
            size_scale=float(settings.group_size),
        ),
        cache_size=settings.index_cache_size,
    )
    return engine


def build_vector_store(settings: Settings) -> SqliteVectorStore | None:
    """The disk store of tool vectors (``vector_store_dir``), None when
    ``vector_store_mb`` is 0. Nothing is opened here: the first catalogue opens it."""
    if settings.vector_store_mb <= 0:
        return None
    directory = settings.vector_store_dir or default_store_dir()
    return SqliteVectorStore(directory, settings.vector_store_mb * 1024 * 1024)


def build_embedder(settings: Settings, client: httpx.AsyncClient | None = None) -> Embedder:
    """The embedder ``settings.embedder`` names (not loaded yet). An HTTP embedder uses
    ``client`` when given (left open), else its own (closed with the embedder)."""
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


async def load_embedder(embedder: Embedder) -> None:
    """Load the embedder in the background at start-up; a failure is logged (requests
    then fall back to the full catalogue, and ``/readyz`` reports not ready)."""
    try:
        await embedder.load()
    except EmbedderError as error:
        logger.error("embedder_load_failed", extra={"fields": {"error": str(error)}})
    else:
        fields = {"embedder": embedder.id}
        if isinstance(embedder, OnnxEmbedder):
            fields["model_file"] = embedder.model_file or ""
        logger.info("embedder_loaded", extra={"fields": fields})


async def warm_catalogs(paths: Sequence[Path], engine: SelectionEngine, policy: Policy) -> None:
    """Index each file's catalogue in the background (``toolprune serve --warm``), one
    after another; a file that cannot be read or parsed is logged and skipped. A file is
    a JSON ``tools`` array or a request body that has one."""
    for path in paths:
        try:
            data = await asyncio.to_thread(lambda p=path: json.loads(Path(p).read_bytes()))
            tools = data.get("tools") if isinstance(data, dict) else data
            catalog = await asyncio.to_thread(parse_tools, tools)
        except (OSError, ValueError, CatalogError) as error:
            logger.error("warm_failed", extra={"fields": {"file": str(path), "error": str(error)[:200]}})
            continue
        task = engine.warm(catalog, policy.examples)
        if task is None:
            continue
        try:
            _, took = await task
        except EmbedderError as error:
            logger.error("warm_failed", extra={"fields": {"file": str(path), "error": str(error)[:200]}})
            continue
        logger.info(
            "catalog_warmed",
            extra={"fields": {"file": str(path), "tools": len(catalog), "seconds": round(took, 2)}},
        )


def build_state_store(settings: Settings) -> StateStore:
    """Redis when ``state_url`` is set (shared by replicas), else the in-memory store.

    Nothing connects here: a Redis that is down at start-up costs the requests their
    stickiness (they get the full catalogue) until it answers. Raises ValueError on an
    invalid URL."""
    if settings.state_url:
        from selection.redis_state import RedisStateStore

        store = RedisStateStore(
            settings.state_url,
            ttl_s=settings.state_ttl_s,
            key_prefix=settings.state_key_prefix,
            timeout_s=settings.redis_timeout_s,
        )
        logger.info(
            "state_store", extra={"fields": {"store": "redis", "endpoint": store.endpoint}}
        )
        return store
    return MemoryStateStore(settings.state_ttl_s, settings.state_max_conversations)
