"""Scoring a catalogue against a query: what the ranking signals read, prepared — the
query embedded, the catalogue's dense, BM25, name and group indexes built and cached, its
learned state bound — then the signals run (:func:`selection.ranking.pipeline.rank`). The only
part of selection that does I/O (through the embedder and the tool vectors' disk store).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.groups import CatalogGroups
from selection.embedders.protocol import Embedder
from selection.errors import EmbedderError, EmbedderTimeout
from selection.indexes.dense import DenseIndexes
from selection.indexes.lexical import LexicalIndex
from selection.indexes.name_match import NameIndex
from selection.indexes.query_embedding import DEFAULT_BATCH_TEXTS, QueryEmbedder
from selection.indexes.tool_index import MAX_TOOL_TEXT_CHARS, LRUCache, ToolIndex, encodable
from selection.indexes.tool_vectors import URGENT, ToolVectors, VectorStore
from selection.learning.states import LearnedStates
from selection.ranking.group_ranking import GroupIndex, GroupIndexes
from selection.ranking.pipeline import Ranking, lexical_ranking, rank
from selection.ranking.signals.base import SignalInputs
from selection.ranking.signals.groups import GroupBlend
from selection.ranking.signals.registry import Signals

#: Default of :attr:`SelectionEngine.cold_start_tools`.
COLD_START_TOOLS = 32


class SelectionEngine:
    """Embeds tool texts and queries through one embedder, caching vectors by text and
    indexes by catalogue, and ranks catalogues by ``signals`` (those the settings switch on:
    :meth:`selection.ranking.signals.registry.Signals.from_values`).

    ``timeout_s`` bounds a query's embedding (seconds). A catalogue's dense index is built
    once, in the background (:class:`~selection.indexes.dense.DenseIndexes`), its texts
    through :class:`~selection.indexes.tool_vectors.ToolVectors` (``vectors``: in memory, up to
    ``vector_cache_size``; on disk in ``store``; at most ``max_builds`` embedder calls for
    tool texts at once). A request on a catalogue being built waits at most
    ``index_timeout_s`` seconds: for the whole index when its missing texts would be
    embedded in that time or are no more than ``cold_start_tools``, else for the
    descriptions of the ``cold_start_tools`` tools its words point at; then it is ranked by
    what is embedded (``Ranking.partial``), or by BM25 alone when nothing is
    (``Ranking.lexical_only``). Tool texts are clipped to ``max_text_chars`` characters.
    Queries go through :class:`~selection.indexes.query_embedding.QueryEmbedder`: concurrent
    requests' queries embedded in one call of at most ``query_batch_texts`` texts, the last
    ``query_cache_size`` query texts' vectors kept (0: none). ``learned`` (attribute, None
    until learning is on): promoted learned states by catalogue (:mod:`selection.learning.learned`),
    read by the learned signal."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        vector_cache_size: int,
        index_cache_size: int,
        timeout_s: float,
        index_timeout_s: float,
        signals: Signals,
        max_builds: int = 1,
        max_text_chars: int = MAX_TOOL_TEXT_CHARS,
        query_cache_size: int = 0,
        query_batch_texts: int = DEFAULT_BATCH_TEXTS,
        store: VectorStore | None = None,
        cold_start_tools: int = COLD_START_TOOLS,
    ) -> None:
        self.embedder = embedder
        self.signals = signals
        self.learned: LearnedStates | None = None
        self.queries = QueryEmbedder(
            embedder.id, embedder.embed, cache_size=query_cache_size,
            max_batch_texts=query_batch_texts,
        )
        self.timeout_s = timeout_s
        self.indexes = DenseIndexes(
            ToolVectors(embedder, cache_size=vector_cache_size, store=store, workers=max_builds),
            embedder.id, cache_size=index_cache_size, timeout_s=index_timeout_s,
            cold_start_tools=cold_start_tools, max_text_chars=max_text_chars,
        )
        self._lexical: LRUCache[str, LexicalIndex] = LRUCache(index_cache_size)
        self._lexical_building: dict[str, asyncio.Task[LexicalIndex]] = {}
        self._names: LRUCache[str, NameIndex] = LRUCache(index_cache_size)
        self._groups = GroupIndexes(cache_size=index_cache_size)

    @property
    def vectors(self) -> ToolVectors:
        """The tool texts' vectors (in memory, on disk, embedded through one queue)."""
        return self.indexes.vectors

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of tool texts (float32, shape (n, d)), from the caches where possible,
        else embedded first (:data:`~selection.indexes.tool_vectors.URGENT`).

        Raises: EmbedderError.
        """
        return await self.vectors.get([encodable(text) for text in texts], URGENT)

    async def index_for(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> tuple[ToolIndex, float]:
        """The catalogue's dense index and the seconds this call spent embedding for it.

        Raises: EmbedderError; IndexPending after ``index_timeout_s`` (the build goes on).
        """
        return await self.indexes.get(catalog, examples)

    def warm(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> asyncio.Task[tuple[ToolIndex, float]] | None:
        """Start indexing ``catalog`` in the background (``toolprune serve --warm``); the
        build task, or None when the index is cached already."""
        return self.indexes.warm(catalog, examples)

    def index_ready(self, catalog: Catalog, examples: Mapping[str, Sequence[str]]) -> bool:
        """Whether the catalogue's dense index is built (cached)."""
        return self.indexes.cached(self.indexes.key(catalog, examples)) is not None

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
        groups: CatalogGroups | None = None,
        signals: Signals | None = None,
    ) -> Ranking:
        """Rank every tool of ``catalog`` for ``query`` by ``signals`` (default: the
        engine's). ``query``: one text, or a query's parts (:func:`selection.conversation.query.query_parts`:
        the whole query, then its sentences and tool results), embedded in one call.
        ``groups``: the catalogue's groups (the group signal ranks by them once the whole
        index is built). While the dense index is being built, the texts embedded within
        ``index_timeout_s`` rank it (``partial``); when none are, BM25 alone does
        (``lexical_only``). BM25 indexes are built in a worker thread (~1 s at 10,000
        tools), alongside the dense index's wait.

        Raises: EmbedderError, EmbedderTimeout (IndexPending with no query to rank by).
        """
        signals = self.signals if signals is None else signals
        parts = [query] if isinstance(query, str) else list(query)
        started = time.perf_counter()
        key = self.indexes.key(catalog, examples)
        index = self.indexes.cached(key)
        ranks_lexically = "lexical" in signals.needs or index is None
        lexical = self.lexical_task(catalog) if parts and ranks_lexically else None
        vectors, partial = None, False
        if index is None and not parts:
            index, _ = await self.index_for(catalog, examples)  # IndexPending past the wait
        elif index is None:
            build = self.indexes.start(key, catalog, examples)
            index, vectors, partial = await self.indexes.first_look(
                build, self.embed_parts(parts), parts[0], lexical,
                lambda: self.name_index(catalog),
            )
            if index is None or vectors is None:
                assert lexical is not None
                return lexical_ranking((await lexical).scores(parts[0]))
        if vectors is None:
            vectors = await self.embed_parts(parts)
        embedding_s = time.perf_counter() - started
        inputs = SignalInputs(
            catalog, tuple(parts), vectors, index, partial,
            lexical=await lexical if lexical is not None and "lexical" in signals.needs else None,
            names=self.name_index(catalog) if "names" in signals.needs else None,
            groups=await self._group_index(key, catalog, groups, index, partial, parts, signals),
            learned=(self.learned.bound(catalog)
                     if self.learned is not None and parts and "learned" in signals.needs
                     else None),
        )
        return replace(rank(inputs, signals.ranking), embedding_s=embedding_s, partial=partial,
                       query_vector=vectors[0] if len(vectors) else None)

    async def _group_index(
        self, key: str, catalog: Catalog, groups: CatalogGroups | None, index: ToolIndex,
        partial: bool, parts: Sequence[str], signals: Signals,
    ) -> GroupIndex | None:
        """The catalogue's group index when the group signal ranks this turn: it is on, the
        catalogue's groups shape its ranking, and the index is whole (nothing is cached from
        a partial one). Raises: EmbedderError (the groups' declared descriptions)."""
        blend = signals.get(GroupBlend.name)
        if not isinstance(blend, GroupBlend) or groups is None or partial or not parts:
            return None
        if not groups.shapes_ranking:
            return None
        return await self._groups.get(key, catalog, groups, index, self.embed,
                                      vectors=bool(blend.params.group_vector_weight))

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
        for task in [*self.indexes.tasks(), *self._lexical_building.values()]:
            task.cancel()
        await self.vectors.aclose()
        await self.queries.aclose()
        await self.embedder.aclose()
