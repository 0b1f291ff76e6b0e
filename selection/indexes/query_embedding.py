"""Query embedding on the serving path: concurrent requests' query texts coalesced into one
embedder call, and query vectors cached by exact text.

Each request's query (:func:`selection.conversation.query.query_parts`: a few short texts) used to be one
embedder call of its own. Under concurrency that meant one ONNX run and one worker-thread hop
per request, several of them competing for the cores at once. :class:`QueryBatcher` keeps at
most one embedder call in flight: texts that arrive while it runs wait and go together in the
next call (no timer: a lone request is embedded at once). :class:`QueryEmbedder` puts an
exact-text LRU cache in front of it, for the texts that do repeat (an agent retrying a
request, a meta-tool round re-planning the same turn, a conversation's earlier sentences).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from selection.errors import EmbedderError
from selection.indexes.tool_index import LRUCache

#: Default bound on the texts of one coalesced embedder call.
DEFAULT_BATCH_TEXTS = 64


@dataclass
class QueryEmbeddingStats:
    """Running counts (since start): query texts answered from the cache (``cached``) and
    embedded (``embedded``); embedder calls made (``batches``) and the requests they
    served (``requests``), so ``requests / batches`` is the mean coalescing."""

    cached: int = 0
    embedded: int = 0
    batches: int = 0
    requests: int = 0


@dataclass
class _Waiter:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


class QueryBatcher:
    """Coalesces concurrent :meth:`embed` calls into calls of ``embed`` (an embedder's
    ``embed``: texts → float32 ``(n, d)`` in input order).

    The first call starts a batch at once; calls made while a batch runs queue, and when it
    ends the queue (up to ``max_texts`` texts; more go in the batches after) is embedded in
    one call, identical texts once. One batch runs at a time, per batcher (per event loop).
    A failed batch raises its exception in every request of that batch; a cancelled request
    leaves its batch running for the others. Must be used from one event loop.
    """

    def __init__(
        self,
        embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
        *,
        max_texts: int = DEFAULT_BATCH_TEXTS,
        stats: QueryEmbeddingStats | None = None,
    ) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        self._embed = embed
        self._max_texts = max_texts
        self.stats = stats if stats is not None else QueryEmbeddingStats()
        self._queue: deque[_Waiter] = deque()
        self._runner: asyncio.Task[None] | None = None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), d)`` in the order of ``texts``.

        Raises whatever the batch's embedder call raised (EmbedderError, EmbedderTimeout),
        EmbedderError when it returned a wrong number of vectors.
        """
        if not texts:
            raise ValueError("no texts to embed")
        waiter = _Waiter(list(texts), asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        if self._runner is None:
            self._runner = asyncio.create_task(self._run())
        return await waiter.future

    async def aclose(self) -> None:
        """Cancel the running batch; its requests and the queued ones are cancelled."""
        runner = self._runner
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    def _next_batch(self) -> list[_Waiter]:
        batch: list[_Waiter] = []
        size = 0
        while self._queue and (not batch or size + len(self._queue[0].texts) <= self._max_texts):
            waiter = self._queue.popleft()
            if not waiter.future.done():  # a cancelled request is not embedded
                batch.append(waiter)
                size += len(waiter.texts)
        return batch

    async def _run(self) -> None:
        try:
            while self._queue:
                batch = self._next_batch()
                if batch:
                    await self._embed_batch(batch)
        finally:
            self._runner = None
            # Cancelled (shutdown): nobody is left to embed for those still queued.
            for waiter in self._queue:
                waiter.future.cancel()
            self._queue.clear()

    async def _embed_batch(self, batch: list[_Waiter]) -> None:
        unique = list(dict.fromkeys(text for waiter in batch for text in waiter.texts))
        try:
            vectors = await self._embed(unique)
            if vectors.ndim != 2 or vectors.shape[0] != len(unique):
                raise EmbedderError("embedder returned a wrong number of vectors")
        except Exception as exc:  # noqa: BLE001 - every waiter gets the batch's failure
            for waiter in batch:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
            return
        except BaseException:  # cancelled (shutdown): no result will come
            for waiter in batch:
                waiter.future.cancel()
            raise
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.embedded += len(unique)
        row = {text: i for i, text in enumerate(unique)}
        for waiter in batch:
            if not waiter.future.done():
                waiter.future.set_result(vectors[[row[text] for text in waiter.texts]])


class QueryEmbedder:
    """Query vectors through a :class:`QueryBatcher`, with an exact-text LRU cache of
    ``cache_size`` vectors in front (0: no cache).

    The cache key is the text itself (with the embedder's id, so vectors of two embedders
    never mix); a cached vector is the one the embedder returned for that text before.
    """

    def __init__(
        self,
        embedder_id: str,
        embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
        *,
        cache_size: int,
        max_batch_texts: int = DEFAULT_BATCH_TEXTS,
    ) -> None:
        self.stats = QueryEmbeddingStats()
        self._id = embedder_id
        self._batcher = QueryBatcher(embed, max_texts=max_batch_texts, stats=self.stats)
        self._cache: LRUCache[tuple[str, str], np.ndarray] = LRUCache(cache_size)

    def __len__(self) -> int:
        """Vectors cached."""
        return len(self._cache)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), d)`` in the order of ``texts``, from the cache where
        possible. Raises as :meth:`QueryBatcher.embed`."""
        found = [self._cache.get((self._id, text)) for text in texts]
        missing = [text for text, vector in zip(texts, found, strict=True) if vector is None]
        self.stats.cached += len(texts) - len(missing)
        if missing:
            fresh = await self._batcher.embed(missing)
            rows = iter(fresh)
            for i, vector in enumerate(found):
                if vector is None:
                    found[i] = vector = next(rows)
                    self._cache.put((self._id, texts[i]), vector)
        return np.vstack(found).astype(np.float32, copy=False)

    async def aclose(self) -> None:
        """Cancel embedding in progress (:meth:`QueryBatcher.aclose`)."""
        await self._batcher.aclose()
