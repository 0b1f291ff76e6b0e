"""What the app builds at start-up besides the front door (``config.selector``): the
state store, the embedder's load, catalogues warmed, and numpy's threads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from config.settings import Settings
from proxy.log import get_logger
from proxy.state.store import MemoryStateStore, StateStore
from selection.planning import Selector
from selection.types import CatalogError, Embedder, EmbedderError, parse_tools

logger = get_logger("startup")


def limit_blas_threads() -> None:
    """Run numpy's BLAS (OpenBLAS) on one thread in this process. The proxy's products are
    one query against a catalogue's vectors; on shared cores, OpenBLAS's worker threads cost
    more than they save (at 10,000 tool texts of 64 dimensions, 12 ms a product instead of
    1.2: ``benchmarks/planning_cpu.py``), and they take CPU from the event loop."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


async def load_embedder(embedder: Embedder) -> None:
    """Load the embedder in the background at start-up; a failure is logged (requests
    then fall back to the full catalogue, and ``/readyz`` reports not ready)."""
    try:
        await embedder.load()
    except EmbedderError as error:
        logger.error("embedder_load_failed", extra={"fields": {"error": str(error)}})
    else:
        fields = {"embedder": embedder.id}
        if hasattr(embedder, "model_file"):  # the packaged ONNX model: which file runs
            fields["model_file"] = embedder.model_file or ""
        logger.info("embedder_loaded", extra={"fields": fields})


async def warm_catalogs(paths: Sequence[Path], selector: Selector) -> None:
    """Index each file's catalogue in the background (``toolprune serve --warm``), one
    after another; a file that cannot be read or parsed (nested past the JSON decoder's
    depth included) is logged and skipped. A file is a JSON ``tools`` array or a request
    body that has one."""
    for path in paths:
        try:
            data = await asyncio.to_thread(lambda p=path: json.loads(Path(p).read_bytes()))
            tools = data.get("tools") if isinstance(data, dict) else data
            catalog = await asyncio.to_thread(parse_tools, tools)
        except (OSError, ValueError, RecursionError, CatalogError) as error:
            reason = "JSON nested too deeply" if isinstance(error, RecursionError) else str(error)[:200]
            logger.error("warm_failed", extra={"fields": {"file": str(path), "error": reason}})
            continue
        task = selector.warm(catalog)
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
        from proxy.state.redis import RedisStateStore

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
