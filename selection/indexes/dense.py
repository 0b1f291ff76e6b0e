"""The catalogues' dense indexes: built once per catalogue in the background, cached, and
what a request on a catalogue being built ranks by meanwhile (:mod:`selection.indexes.build`).
Its I/O is the embedder's and the vector store's, through
:class:`~selection.indexes.tool_vectors.ToolVectors`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import numpy as np

from selection.catalog.catalog import Catalog
from selection.errors import IndexPending
from selection.indexes.build import IndexBuild, first_tools, urgent_texts
from selection.indexes.lexical import LexicalIndex
from selection.indexes.name_match import NameIndex
from selection.indexes.tool_index import MAX_TOOL_TEXT_CHARS, LRUCache, ToolIndex, index_key
from selection.indexes.tool_vectors import DESCRIPTION, DETAIL, URGENT, ToolVectors


class DenseIndexes:
    """Each catalogue's :class:`~selection.indexes.tool_index.ToolIndex` (an LRU of ``cache_size``),
    built by embedding its texts through ``vectors``; ``timeout_s``: how long a request
    waits for a build (seconds); ``cold_start_tools``: the tools whose descriptions a
    request on a catalogue being built has embedded first."""

    def __init__(
        self, vectors: ToolVectors, embedder_id: str, *, cache_size: int, timeout_s: float,
        cold_start_tools: int, max_text_chars: int = MAX_TOOL_TEXT_CHARS,
    ) -> None:
        self.vectors = vectors
        self.embedder_id = embedder_id
        self.timeout_s = timeout_s
        self.cold_start_tools = cold_start_tools
        self.max_text_chars = max_text_chars
        self._indexes: LRUCache[str, ToolIndex] = LRUCache(cache_size)
        self._keys: LRUCache[str, tuple[Mapping[str, Sequence[str]], str]] = LRUCache(cache_size)
        self._building: dict[str, IndexBuild] = {}

    def key(self, catalog: Catalog, examples: Mapping[str, Sequence[str]]) -> str:
        """:func:`~selection.indexes.tool_index.index_key`, remembered per catalogue for the examples
        mapping it was computed with (the policy's, the same object every request): it
        walks every tool name, twice a request otherwise."""
        remembered = self._keys.get(catalog.fingerprint)
        if remembered is not None and remembered[0] is examples:
            return remembered[1]
        key = index_key(self.embedder_id, catalog, examples)
        self._keys.put(catalog.fingerprint, (examples, key))
        return key

    def cached(self, key: str) -> ToolIndex | None:
        return self._indexes.get(key)

    async def get(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> tuple[ToolIndex, float]:
        """The catalogue's index and the seconds this call spent embedding for it.

        Raises: EmbedderError; IndexPending after ``timeout_s`` (the build goes on).
        """
        key = self.key(catalog, examples)
        index = self._indexes.get(key)
        if index is not None:
            return index, 0.0
        task = self.start(key, catalog, examples).task
        assert task is not None
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(task)
        except TimeoutError as exc:
            raise IndexPending(
                f"indexing {len(catalog)} tools takes longer than {self.timeout_s} s; "
                "it continues in the background"
            ) from exc

    def start(
        self, key: str, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> IndexBuild:
        """The catalogue's build, started now unless it is running."""
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

    async def _build(self, key: str, build: IndexBuild) -> tuple[ToolIndex, float]:
        """Embed every text of ``build`` (descriptions first, see
        :mod:`selection.indexes.tool_vectors`), then cache its index."""
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

    def warm(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> asyncio.Task[tuple[ToolIndex, float]] | None:
        """Start indexing ``catalog`` in the background; the build task, or None when the
        index is cached already."""
        key = self.key(catalog, examples)
        if self._indexes.get(key) is not None:
            return None
        return self.start(key, catalog, examples).task

    async def first_look(
        self, build: IndexBuild, query: Awaitable[np.ndarray], first: str,
        lexical: asyncio.Future[LexicalIndex] | None, names: Callable[[], NameIndex],
    ) -> tuple[ToolIndex | None, np.ndarray | None, bool]:
        """A request on a catalogue being built: within ``timeout_s``, the query's vectors
        (``query``) and the texts it waits for (:func:`~selection.indexes.build.urgent_texts`,
        those of the tools ``first``, the whole query, points at by BM25 and name match) or
        the whole index, whichever comes first. Returns the index to rank by (the whole
        one, or :meth:`~selection.indexes.build.IndexBuild.partial`; None: nothing
        embedded), the query's vectors (None: not embedded in time) and whether the index
        is partial.

        Raises: EmbedderError (the build or the request's texts failed).
        """
        assert build.task is not None
        pending = asyncio.ensure_future(query)
        urgent: asyncio.Future[np.ndarray] | None = None
        vectors = None
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                await build.looked_up.wait()  # what is known already is never embedded again
                urgent = await self._urgent(build, deadline, first, lexical, names)
                whole = urgent is None or urgent.whole
                waits = [build.task] if whole else [build.task, urgent.task]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                vectors = await pending
        except TimeoutError:
            if pending.done() and not pending.cancelled() and pending.exception() is None:
                vectors = pending.result()  # embedded in time, though the texts were not all
        finally:  # what this request no longer waits for ends with it (texts stay queued)
            await _end([pending, *([urgent.task] if urgent is not None else [])])
        if build.task.done() and not build.task.cancelled():
            if (failed := build.task.exception()) is not None:
                raise failed
            return build.task.result()[0], vectors, False
        urgent_done = urgent is not None and urgent.task.done() and not urgent.task.cancelled()
        if urgent_done and (failed := urgent.task.exception()) is not None:  # type: ignore[union-attr]
            raise failed
        return build.partial(), vectors, True

    async def _urgent(
        self, build: IndexBuild, deadline: float, first: str,
        lexical: asyncio.Future[LexicalIndex] | None, names: Callable[[], NameIndex],
    ) -> _Urgent | None:
        """The request's own texts, queued first: every missing one when they would be
        embedded before ``deadline`` (at the measured rate), else the descriptions of the
        tools its words point at; None with no cold-start tools (or no BM25 to point)."""
        if self.cold_start_tools <= 0:
            return None
        missing = [build.texts[i] for i in build.missing()]
        remaining = deadline - asyncio.get_running_loop().time()
        if self.vectors.seconds_for(missing) <= remaining:
            return _Urgent(asyncio.ensure_future(self.vectors.get(missing, URGENT)), True)
        if lexical is None:
            return None
        ranked = await asyncio.shield(lexical)  # shared: a timeout here must not end it
        tools = first_tools(ranked.scores(first), names().coverage(first), self.cold_start_tools)
        texts, whole = urgent_texts(build, tools, self.cold_start_tools)
        task = asyncio.ensure_future(self.vectors.get([build.texts[i] for i in texts], URGENT))
        return _Urgent(task, whole)

    def tasks(self) -> list[asyncio.Task[tuple[ToolIndex, float]]]:
        """The builds running."""
        return [build.task for build in self._building.values() if build.task is not None]


class _Urgent:
    """A request's own texts being embedded (``task``); ``whole``: they are every text
    still missing, so the request waits for the whole index instead."""

    def __init__(self, task: asyncio.Future[np.ndarray], whole: bool) -> None:
        self.task = task
        self.whole = whole


async def _end(started: Sequence[asyncio.Future[np.ndarray]]) -> None:
    """Cancel what of ``started`` is still running and read every outcome (a failure not
    raised elsewhere is not logged as unread)."""
    left = {task for task in started if not task.done()}
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left)
    for task in started:
        if not task.cancelled():
            task.exception()
