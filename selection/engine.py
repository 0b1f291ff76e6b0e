"""Scoring a catalogue against a query: embedding with caches, the per-catalogue dense
index and BM25 index, and their fusion (:mod:`selection.ranking`). The only part of
selection that does I/O (through the embedder and the tool vectors' disk store).
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
from selection.group_ranking import CatalogGroups, GroupMatch, GroupScorer
from selection.index import MAX_TOOL_TEXT_CHARS, LRUCache, ToolIndex, encodable, index_key
from selection.index_build import IndexBuild, first_tools, urgent_texts
from selection.learned_states import LearnedStates
from selection.name_match import NameIndex, one_intent
from selection.query_embedding import DEFAULT_BATCH_TEXTS, QueryEmbedder
from selection.ranking import LexicalIndex, fuse
from selection.tool_vectors import DESCRIPTION, DETAIL, URGENT, ToolVectors, VectorStore

#: Default of :attr:`SelectionEngine.cold_start_tools`.
COLD_START_TOOLS = 32


@dataclass(frozen=True)
class Scores:
    """Per-tool scores, float32 shape ``(len(catalog),)`` in catalogue order: ``values``
    the fused score (cosine + ``lexical_weight`` × normalised BM25 + ``name_weight`` ×
    name-word coverage), ``dense`` the cosine alone; and the seconds spent embedding (query
    and any tool texts not cached). ``named``: bool ``(len(catalog),)``, the tools a
    one-intent query names (:mod:`selection.name_match`); None when it asks for more.
    ``lexical_only``: the catalogue's dense index is still being built and nothing of it
    was embedded in time, so ``values`` is the normalised BM25 score alone (in [0, 1]) and
    ``dense`` is None. ``partial``: the index is still being built and ``dense`` holds the
    cosines of the texts embedded so far (-1 for a tool with none;
    :meth:`selection.index_build.IndexBuild.partial`). ``groups``: the groups' share of
    ``values`` (:mod:`selection.group_ranking`); None when not ranked by groups."""

    values: np.ndarray
    embedding_s: float
    dense: np.ndarray | None = None
    named: np.ndarray | None = None
    lexical_only: bool = False
    partial: bool = False
    #: The learned boost already added to ``values`` (:mod:`selection.learned`), float32
    #: ``(len(catalog),)``; None when the catalogue has no learned state.
    boost: np.ndarray | None = None
    #: The whole query's vector (the first part's), float32 ``(d,)``: what the usage log
    #: keeps instead of the text when learning is on.
    query_vector: np.ndarray | None = None
    groups: GroupMatch | None = None


class SelectionEngine:
    """Embeds tool texts and queries through one embedder, caching vectors by text and
    indexes by catalogue.

    ``timeout_s`` bounds a query's embedding (seconds). ``lexical_weight``: weight of the
    normalised BM25 score added to the cosine (:func:`selection.ranking.fuse`; 0: no BM25 index
    is built); ``name_weight``: weight of the share of a tool's name words the request uses
    (:mod:`selection.name_match`; 0: off). A catalogue's index is built once, in the background,
    its texts through :class:`~selection.tool_vectors.ToolVectors` (``vectors``: in memory, up to
    ``vector_cache_size``; on disk in ``store``; at most ``max_builds`` embedder calls for tool
    texts at once). A request on a catalogue being built waits at most ``index_timeout_s``
    seconds: for the whole index when its missing texts would be embedded in that time (at the
    measured rate, :meth:`~selection.tool_vectors.ToolVectors.seconds_for`) or are no more than
    ``cold_start_tools``, else for the descriptions of the ``cold_start_tools`` tools its words
    point at; then it is ranked by what is embedded (``Scores.partial``;
    :mod:`selection.index_build`), or by BM25 alone when nothing is (``Scores.lexical_only``).
    Tool texts are clipped to ``max_text_chars`` characters before embedding. Queries go through
    :class:`~selection.query_embedding.QueryEmbedder` (``queries``): concurrent requests' queries
    embedded in one call of at most ``query_batch_texts`` texts, and the last
    ``query_cache_size`` query texts' vectors kept (0: none). ``learned`` (attribute, None until
    learning is on): promoted learned states by catalogue (:mod:`selection.learned`): for the
    catalogues they were learned for, the query vectors are centred by them before the dense
    ranking and their boost is added to the fused score. ``groups``: see :meth:`score`."""

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
        store: VectorStore | None = None,
        cold_start_tools: int = COLD_START_TOOLS,
    ) -> None:
        self.embedder = embedder
        self.cold_start_tools = cold_start_tools
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
        self.vectors = ToolVectors(
            embedder, cache_size=vector_cache_size, store=store, workers=max_builds
        )
        self._indexes: LRUCache[str, ToolIndex] = LRUCache(index_cache_size)
        self._index_keys: LRUCache[str, tuple[Mapping[str, Sequence[str]], str]] = LRUCache(
            index_cache_size
        )
        self._building: dict[str, IndexBuild] = {}
        self.groups = GroupScorer(cache_size=index_cache_size)  # its ranking: set by the app

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of tool texts (float32, shape (n, d)), from the caches where possible,
        else embedded first (:data:`~selection.tool_vectors.URGENT`).

        Raises: EmbedderError.
        """
        return await self.vectors.get([encodable(text) for text in texts], URGENT)

    async def _build(self, key: str, build: IndexBuild) -> tuple[ToolIndex, float]:
        """Embed every text of ``build`` (descriptions first, see
        :mod:`selection.tool_vectors`), then cache its index."""
        started = time.perf_counter()
        try:
            await self.vectors.known(build.texts, build.record)
        finally:
            build.looked_up.set()
        missing = set(build.missing())
        descriptions = [i for i in build.descriptions.tolist() if i in missing]
        details = [i for i in build.detail_texts if i in missing]

        async def embed_texts(indices: list[int], priority: int) -> None:
            def record(i: int, vector: np.ndarray) -> None:
                build.record(indices[i], vector)

            await self.vectors.get([build.texts[i] for i in indices], priority, record)

        tasks = [asyncio.create_task(embed_texts(texts, priority))
                 for texts, priority in ((descriptions, DESCRIPTION), (details, DETAIL)) if texts]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        index = build.partial()
        if index is None:  # a catalogue of no tools
            index = ToolIndex.build(np.zeros((0, 1), np.float32), [], build.n_tools)
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
        task = self._start_build(key, catalog, examples).task
        assert task is not None
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
    ) -> IndexBuild:
        build = self._building.get(key)
        if build is None:
            build = IndexBuild.of(catalog, examples, self.max_text_chars)
            build.task = asyncio.create_task(self._build(key, build))
            self._building[key] = build
            build.task.add_done_callback(lambda task: self._build_done(key, task))
        return build

    def _build_done(self, key: str, task: asyncio.Task[tuple[ToolIndex, float]]) -> None:
        self._building.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: a failed build is retried by the next request

    def warm(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> asyncio.Task[tuple[ToolIndex, float]] | None:
        """Start indexing ``catalog`` in the background (``toolprune serve --warm``); the
        build task, or None when the index is cached already."""
        key = self._index_key(catalog, examples)
        if self._indexes.get(key) is not None:
            return None
        return self._start_build(key, catalog, examples).task

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
    ) -> Scores:
        """Cosine of ``query`` against every tool of ``catalog``: per tool, the best of its
        texts against the best of the query's parts (with ``groups``, drawn toward its
        group's match: :meth:`~selection.group_ranking.GroupScorer.rank`, ``self.groups``).

        ``query``: one text, or a query's parts (:func:`selection.query.query_parts`: the
        whole query, then its sentences and tool results), embedded in one call — parts
        (p, d) float32 → scores (len(catalog),) float32, each the max over parts and texts.

        With ``lexical_weight`` > 0, ``values`` adds the BM25 score of the whole query
        (``parts[0]``) over :func:`selection.ranking.lexical_text`; with ``name_weight``
        > 0, the share of each tool's name words that the whole query uses. While the
        catalogue's dense index is being built, the texts embedded within
        ``index_timeout_s`` rank it (``partial``; see the class docstring); when none are,
        ``values`` is that BM25 score alone (``lexical_only``), whatever
        ``lexical_weight``. BM25 indexes are built in a worker thread (~1 s at 10,000
        tools), alongside the dense index's wait.

        Raises: EmbedderError, EmbedderTimeout (IndexPending with no query to rank by).
        """
        parts = [query] if isinstance(query, str) else list(query)
        started = time.perf_counter()
        key = self._index_key(catalog, examples)
        index = self._indexes.get(key)
        ranks_lexically = self.lexical_weight > 0 or index is None
        lexical = self.lexical_task(catalog) if parts and ranks_lexically else None
        vectors, partial = None, False
        if index is None and not parts:
            index, _ = await self.index_for(catalog, examples)  # IndexPending past the wait
        elif index is None:
            build = self._start_build(key, catalog, examples)
            index, vectors, partial = await self._first_look(build, catalog, parts, lexical)
            if index is None or vectors is None:
                assert lexical is not None
                return Scores((await lexical).scores(parts[0]), 0.0, None, lexical_only=True)
        if vectors is None:
            vectors = await self.embed_parts(parts)
        embedding_s = time.perf_counter() - started
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
        fused, match = await self.groups.rank(key, catalog, groups, index, fused, parts, vectors,
                                              self.embed, partial)
        boost = learned.boost(vectors) if learned is not None else None
        if boost is not None:
            fused = fused + boost
        return Scores(fused, embedding_s, dense, named, boost=boost, query_vector=query_vector,
                      partial=partial, groups=match)

    async def _first_look(
        self, build: IndexBuild, catalog: Catalog, parts: list[str],
        lexical: asyncio.Future[LexicalIndex] | None,
    ) -> tuple[ToolIndex | None, np.ndarray | None, bool]:
        """A request on a catalogue being built: within ``index_timeout_s``, the query's
        vectors and the texts it waits for (:func:`~selection.index_build.urgent_texts`)
        or the whole index, whichever comes first. Returns the index to rank by (the whole
        one, or :meth:`~selection.index_build.IndexBuild.partial`; None: nothing embedded),
        the query's vectors (None: not embedded in time) and whether the index is partial.

        Raises: EmbedderError (the build or the request's texts failed).
        """
        assert build.task is not None
        query = asyncio.ensure_future(self.embed_parts(parts))
        urgent: asyncio.Future[np.ndarray] | None = None
        vectors = None
        deadline = asyncio.get_running_loop().time() + self.index_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                await build.looked_up.wait()  # what is known already is never embedded again
                missing = [build.texts[i] for i in build.missing()]
                remaining = deadline - asyncio.get_running_loop().time()
                whole = True
                if self.cold_start_tools > 0 and self.vectors.seconds_for(missing) <= remaining:
                    urgent = asyncio.ensure_future(self.vectors.get(missing, URGENT))
                elif self.cold_start_tools > 0 and lexical is not None:
                    coverage = self.name_index(catalog).coverage(parts[0])
                    ranked = await asyncio.shield(lexical)  # shared: a timeout here must not end it
                    tools = first_tools(ranked.scores(parts[0]), coverage,
                                        self.cold_start_tools)
                    texts, whole = urgent_texts(build, tools, self.cold_start_tools)
                    urgent = asyncio.ensure_future(
                        self.vectors.get([build.texts[i] for i in texts], URGENT)
                    )
                waits = [build.task] if whole or urgent is None else [build.task, urgent]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                vectors = await query
        except TimeoutError:
            if query.done() and not query.cancelled() and query.exception() is None:
                vectors = query.result()  # embedded in time, though the texts were not all
        finally:  # what this request no longer waits for ends with it (texts stay queued)
            started = [task for task in (query, urgent) if task is not None]
            left = {task for task in started if not task.done()}
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left)
            for task in started:  # a failure not raised below is read, not logged as unread
                if not task.cancelled():
                    task.exception()
        if build.task.done() and not build.task.cancelled():
            if (failed := build.task.exception()) is not None:
                raise failed
            return build.task.result()[0], vectors, False
        if urgent is not None and urgent.done() and not urgent.cancelled():
            if (failed := urgent.exception()) is not None:
                raise failed
        return build.partial(), vectors, True

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
        builds = [build.task for build in self._building.values() if build.task is not None]
        for task in [*builds, *self._lexical_building.values()]:
            task.cancel()
        await self.vectors.aclose()
        await self.queries.aclose()
        await self.embedder.aclose()
