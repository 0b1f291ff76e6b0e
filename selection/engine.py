"""Scoring a catalogue against a query: embedding with caches, the per-catalogue dense
index and BM25 index, and their fusion (:mod:`selection.ranking`). The only part of
selection that does I/O (through the embedder).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog import Catalog
from selection.embedders import Embedder
from selection.errors import EmbedderError, EmbedderTimeout, IndexPending
from selection.index import (
    MAX_TOOL_TEXT_CHARS,
    LRUCache,
    ToolIndex,
    index_key,
    text_key,
    tool_texts,
)
from selection.learned_states import LearnedStates
from selection.name_match import NameIndex, one_intent
from selection.query_embedding import DEFAULT_BATCH_TEXTS, QueryEmbedder
from selection.ranking import LexicalIndex, fuse

#: Texts per embedder call when embedding many (a catalogue's tool texts).
EMBED_CHUNK_TEXTS = 256


def encodable(text: str) -> str:
    """``text`` with lone surrogates (valid in JSON strings, not in UTF-8) replaced by
    U+FFFD, so every embedder and hash can encode it."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


@dataclass(frozen=True)
class Scores:
    """Per-tool scores, float32 shape ``(len(catalog),)`` in catalogue order: ``values``
    the fused score (cosine + ``lexical_weight`` × normalised BM25 + ``name_weight`` ×
    name-word coverage), ``dense`` the cosine
    alone; and the seconds spent embedding (query and any tool texts not cached).
    ``named``: bool ``(len(catalog),)``, the tools a one-intent query names
    (:mod:`selection.name_match`); None when the query asks for more than one thing.
    ``lexical_only``: the catalogue's dense index is still being built, so ``values`` is
    the normalised BM25 score alone (in [0, 1]) and ``dense`` is None."""

    values: np.ndarray
    embedding_s: float
    dense: np.ndarray | None = None
    named: np.ndarray | None = None
    lexical_only: bool = False
    #: The learned boost already added to ``values`` (:mod:`selection.learned`), float32
    #: ``(len(catalog),)``; None when the catalogue has no learned state.
    boost: np.ndarray | None = None
    #: The whole query's vector (the first part's), float32 ``(d,)``: what the usage log
    #: keeps instead of the text when learning is on.
    query_vector: np.ndarray | None = None


class SelectionEngine:
    """Embeds tool texts and queries through one embedder, caching vectors by text and
    indexes by catalogue.

    ``timeout_s`` bounds a query's embedding (seconds). ``lexical_weight``: weight of the
    normalised BM25 score added to the cosine (:func:`selection.ranking.fuse`; 0: no BM25
    index is built); ``name_weight``: weight of the share of a tool's name words the
    request uses (:mod:`selection.name_match`; 0: off). A catalogue's index is built once;
    a build that outlives ``index_timeout_s`` keeps running
    in the background, so a large cold catalogue is ready for later requests; meanwhile
    :meth:`score` ranks it by BM25 alone (``Scores.lexical_only``). At most
    ``max_builds`` builds embed at once (the others wait their turn); tool texts are
    clipped to ``max_text_chars`` characters before embedding. Queries go through
    :class:`~selection.query_embedding.QueryEmbedder` (``queries``): concurrent requests'
    queries embedded in one call of at most ``query_batch_texts`` texts, and the last
    ``query_cache_size`` query texts' vectors kept (0: none). ``learned`` (attribute,
    None until learning is on): promoted learned states by catalogue
    (:mod:`selection.learned`): for the catalogues they were learned for, the query vectors
    are centred by them before the dense ranking and their boost is added to the fused score.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        vector_cache_size: int,
        index_cache_size: int,
        timeout_s: float,
        index_timeout_s: float,
        max_builds: int = 1,
        max_text_chars: int = MAX_TOOL_TEXT_CHARS,
        lexical_weight: float = 0.0,
        name_weight: float = 0.0,
        query_cache_size: int = 0,
        query_batch_texts: int = DEFAULT_BATCH_TEXTS,
    ) -> None:
        self.embedder = embedder
        self.learned: LearnedStates | None = None
        self.queries = QueryEmbedder(
            embedder.id, embedder.embed, cache_size=query_cache_size,
            max_batch_texts=query_batch_texts,
        )
        self.lexical_weight = lexical_weight
        self.name_weight = name_weight
        self._lexical: LRUCache[str, LexicalIndex] = LRUCache(index_cache_size)
        self._lexical_building: dict[str, asyncio.Task[LexicalIndex]] = {}
        self._names: LRUCache[str, NameIndex] = LRUCache(index_cache_size)
        self.timeout_s = timeout_s
        self.index_timeout_s = index_timeout_s
        self.max_text_chars = max_text_chars
        #: Bounds the catalogue builds that embed at once (CPU and the embedder's memory).
        self._build_slots = asyncio.Semaphore(max_builds)
        self._vectors: LRUCache[tuple[str, str], np.ndarray] = LRUCache(vector_cache_size)
        self._indexes: LRUCache[str, ToolIndex] = LRUCache(index_cache_size)
        self._index_keys: LRUCache[str, tuple[Mapping[str, Sequence[str]], str]] = LRUCache(
            index_cache_size
        )
        self._building: dict[str, asyncio.Task[tuple[ToolIndex, float]]] = {}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` (float32, shape (n, d)), from the cache where possible.

        Raises: EmbedderError.
        """
        texts = [encodable(text) for text in texts]
        keys = [text_key(self.embedder.id, text) for text in texts]
        cached = [self._vectors.get(key) for key in keys]
        missing = [i for i, vector in enumerate(cached) if vector is None]
        # In chunks: each embedder call stays within its own timeout however large the
        # catalogue, and what was embedded is cached, so a build that fails part-way
        # resumes where it stopped.
        for start in range(0, len(missing), EMBED_CHUNK_TEXTS):
            chunk = missing[start : start + EMBED_CHUNK_TEXTS]
            fresh = await self.embedder.embed([texts[i] for i in chunk])
            if fresh.shape[0] != len(chunk):
                raise EmbedderError("embedder returned a wrong number of vectors")
            for i, vector in zip(chunk, fresh, strict=True):
                cached[i] = vector
                self._vectors.put(keys[i], vector)
        if not cached:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(cached).astype(np.float32, copy=False)

    async def _build(
        self, key: str, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> tuple[ToolIndex, float]:
        async with self._build_slots:
            started = time.perf_counter()
            texts: list[str] = []
            owners: list[int] = []
            for position, tool in enumerate(catalog.tools):
                for text in tool_texts(tool, examples.get(tool.name, ()), self.max_text_chars):
                    texts.append(text)
                    owners.append(position)
            vectors = await self.embed(texts)
        index = ToolIndex.build(vectors, owners, len(catalog))
        self._indexes.put(key, index)
        return index, time.perf_counter() - started

    async def index_for(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> tuple[ToolIndex, float]:
        """The catalogue's index and the seconds this call spent embedding for it.

        Raises: EmbedderError; IndexPending after ``index_timeout_s`` (the build goes on).
        """
        key = self._index_key(catalog, examples)
        index = self._indexes.get(key)
        if index is not None:
            return index, 0.0
        task = self._start_build(key, catalog, examples)
        try:
            async with asyncio.timeout(self.index_timeout_s):
                return await asyncio.shield(task)
        except TimeoutError as exc:
            raise IndexPending(
                f"indexing {len(catalog)} tools takes longer than {self.index_timeout_s} s; "
                "it continues in the background"
            ) from exc

    def _start_build(
        self, key: str, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> asyncio.Task[tuple[ToolIndex, float]]:
        task = self._building.get(key)
        if task is None:
            task = asyncio.create_task(self._build(key, catalog, examples))
            self._building[key] = task
            task.add_done_callback(lambda _: self._building.pop(key, None))
        return task

    def warm(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> asyncio.Task[tuple[ToolIndex, float]] | None:
        """Start indexing ``catalog`` in the background (``toolprune serve --warm``); the
        build task, or None when the index is cached already."""
        key = self._index_key(catalog, examples)
        if self._indexes.get(key) is not None:
            return None
        return self._start_build(key, catalog, examples)

    async def embed_parts(self, parts: Sequence[str]) -> np.ndarray:
        """The vectors of a query's parts, float32 shape (p, d), through ``queries``
        (batched with concurrent requests' queries, cached by exact text). ``timeout_s``
        bounds the wait; a request that gives up leaves the batch running for the others.

        Raises: EmbedderError (also for a wrong number of vectors), EmbedderTimeout.
        """
        try:
            texts = [encodable(part) for part in parts]
            embedding = self.queries.embed(texts) if texts else self.embedder.embed(texts)
            async with asyncio.timeout(self.timeout_s):
                vectors = await embedding
        except TimeoutError as exc:
            raise EmbedderTimeout(f"query embedding took longer than {self.timeout_s} s") from exc
        if vectors.shape[0] != len(parts):
            raise EmbedderError("embedder returned a wrong number of vectors")
        return np.asarray(vectors, dtype=np.float32)

    async def score(
        self,
        catalog: Catalog,
        examples: Mapping[str, Sequence[str]],
        query: str | Sequence[str],
    ) -> Scores:
        """Cosine of ``query`` against every tool of ``catalog``: per tool, the best of its
        texts against the best of the query's parts.

        ``query``: one text, or a query's parts (:func:`selection.query.query_parts`: the
        whole query, then its sentences and tool results), embedded in one call — parts
        (p, d) float32 → scores (len(catalog),) float32, each the max over parts and texts.

        With ``lexical_weight`` > 0, ``values`` adds the BM25 score of the whole query
        (``parts[0]``) over :func:`selection.ranking.lexical_text`; with ``name_weight``
        > 0, the share of each tool's name words that the whole query uses. While the
        catalogue's dense index is being built (past ``index_timeout_s``), ``values`` is
        that BM25 score alone (``lexical_only``), whatever ``lexical_weight``. BM25 indexes
        are built in a worker thread (~1 s at 10,000 tools), alongside the dense index's wait.

        Raises: EmbedderError, EmbedderTimeout (IndexPending with no query to rank by).
        """
        parts = [query] if isinstance(query, str) else list(query)
        ranks_lexically = self.lexical_weight > 0 or not self.index_ready(catalog, examples)
        lexical = self.lexical_task(catalog) if parts and ranks_lexically else None
        try:
            index, index_s = await self.index_for(catalog, examples)
        except IndexPending:
            if lexical is None:
                raise
            return Scores((await lexical).scores(parts[0]), 0.0, None, lexical_only=True)
        started = time.perf_counter()
        vectors = await self.embed_parts(parts)
        embedding_s = index_s + time.perf_counter() - started
        learned = self.learned.bound(catalog) if self.learned is not None and parts else None
        dense = index.best_scores(learned.center(vectors) if learned is not None else vectors)
        named = self.name_index(catalog).named(parts[0]) if parts and one_intent(parts) else None
        query_vector = vectors[0] if len(vectors) else None
        if (self.lexical_weight == 0 and self.name_weight == 0) or not parts:
            fused = dense
        else:
            lexical_scores = (await lexical).scores(parts[0]) if lexical is not None else None
            names = self.name_index(catalog).coverage(parts[0]) if self.name_weight else None
            fused = fuse(dense, lexical_scores, self.lexical_weight, names, self.name_weight)
        boost = learned.boost(vectors) if learned is not None else None
        if boost is not None:
            fused = fused + boost
        return Scores(fused, embedding_s, dense, named, boost=boost, query_vector=query_vector)

    def index_ready(self, catalog: Catalog, examples: Mapping[str, Sequence[str]]) -> bool:
        """Whether the catalogue's dense index is built (cached)."""
        return self._indexes.get(self._index_key(catalog, examples)) is not None

    def _index_key(self, catalog: Catalog, examples: Mapping[str, Sequence[str]]) -> str:
        """:func:`~selection.index.index_key`, remembered per catalogue for the examples
        mapping it was computed with (the policy's, the same object every request): it
        walks every tool name, twice a request otherwise."""
        remembered = self._index_keys.get(catalog.fingerprint)
        if remembered is not None and remembered[0] is examples:
            return remembered[1]
        key = index_key(self.embedder.id, catalog, examples)
        self._index_keys.put(catalog.fingerprint, (examples, key))
        return key

    def lexical_task(self, catalog: Catalog) -> asyncio.Future[LexicalIndex]:
        """The catalogue's BM25 index, cached, or its build in a worker thread (one per
        catalogue at a time; it caches the index when done)."""
        cached = self._lexical.get(catalog.fingerprint)
        if cached is not None:
            done: asyncio.Future[LexicalIndex] = asyncio.get_running_loop().create_future()
            done.set_result(cached)
            return done
        key = catalog.fingerprint
        task = self._lexical_building.get(key)
        if task is None:

            async def build() -> LexicalIndex:
                index = await asyncio.to_thread(LexicalIndex, catalog)
                self._lexical.put(key, index)
                return index

            task = asyncio.create_task(build())
            self._lexical_building[key] = task
            task.add_done_callback(lambda _: self._lexical_building.pop(key, None))
        return task

    def name_index(self, catalog: Catalog) -> NameIndex:
        """The catalogue's :class:`NameIndex` (built once, cached by catalogue fingerprint)."""
        return self._names.get_or_build(catalog.fingerprint, lambda: NameIndex(catalog))

    async def aclose(self) -> None:
        for task in [*self._building.values(), *self._lexical_building.values()]:
            task.cancel()
        await self.queries.aclose()
        await self.embedder.aclose()
