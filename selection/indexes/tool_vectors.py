"""Tool-text vectors: from memory, from the disk store, or embedded in priority order.

A catalogue not seen before is many texts to embed (~36 ms a tool on one idle core, about
9 s at 2,470 tools of which a request needs a few). :class:`ToolVectors` embeds them through
one queue, best priority first — a request's own texts (:data:`URGENT`) before the
descriptions of a catalogue being indexed (:data:`DESCRIPTION`), before their parameter
and example texts (:data:`DETAIL`) — in small calls (:data:`CHUNK_CHARS`), so a request
never waits behind a whole catalogue, and each text is embedded once whoever asks for it.

Vectors are kept in memory (an LRU keyed by :func:`~selection.indexes.vector_store.vector_key`)
and, with a store (:mod:`selection.indexes.vector_store`), on disk: a text seen by this process
before a restart, or by another worker, is read back instead of embedded. A store that
fails is logged (``vector_store_failed``) and read as empty, and after
:data:`STORE_FAILURES` failures in a row it is not used again by this process: it never
fails a request.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from selection.embedders.protocol import Embedder
from selection.errors import EmbedderError, VectorStoreError
from selection.indexes.tool_index import LRUCache
from selection.indexes.vector_store import vector_key

logger = logging.getLogger("toolprune.vectors")

#: Priorities, best first: a request's texts; catalogue descriptions; the other texts.
URGENT, DESCRIPTION, DETAIL = 0, 1, 2
#: Characters of tool text per embedder call (about 512 tokens: ~0.15 s on an idle core,
#: so an urgent text waits at most that long for the call in progress). Calls of about
#: 256 padded tokens cost the least CPU a token (``benchmarks/cold_start.py``).
CHUNK_CHARS = 1024
#: Texts per embedder call at most (many short texts).
CHUNK_TEXTS = 64
#: Failures of the disk store in a row after which this process stops using it.
STORE_FAILURES = 3
#: Characters of tool text embedded a second, assumed until calls are measured: the
#: default embedder on one loaded core (the 117 GitHub tools' 233 texts, ~90,000
#: characters, took 15–20 s at a load average of 9–13; ~5 s idle).
PRIOR_CHARS_PER_S = 4000.0
#: Weight of each call's measured rate in the running estimate.
RATE_WEIGHT = 0.3

Progress = Callable[[int, np.ndarray], None]


class VectorStore(Protocol):
    """Vectors on disk by key (:class:`~selection.indexes.vector_store.SqliteVectorStore`).
    Blocking; raises VectorStoreError."""

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]: ...

    def put_many(self, items: dict[bytes, np.ndarray]) -> None: ...

    def close(self) -> None: ...


@dataclass(eq=False)
class _Waiter:
    """One :meth:`ToolVectors.get` call: its texts' positions by key, what is known."""

    positions: dict[bytes, list[int]]
    vectors: list[np.ndarray | None]
    progress: Progress | None
    future: asyncio.Future[None]

    def deliver(self, key: bytes, vector: np.ndarray) -> None:
        for position in self.positions.pop(key, ()):
            self.vectors[position] = vector
            if self.progress is not None:
                self.progress(position, vector)
        if not self.positions and not self.future.done():
            self.future.set_result(None)


@dataclass(eq=False)
class _Entry:
    """A text waiting in the queue: its best priority so far and who waits for it."""

    key: bytes
    text: str
    priority: int
    waiters: set[_Waiter] = field(default_factory=set)


class ToolVectors:
    """See the module docstring. ``cache_size``: vectors kept in memory (LRU; 0: none).
    ``store``: the disk store, or None. ``workers``: embedder calls for tool texts at once.
    Use from one event loop."""

    def __init__(
        self, embedder: Embedder, *, cache_size: int, store: VectorStore | None = None,
        workers: int = 1, chunk_chars: int = CHUNK_CHARS,
        chars_per_s: float = PRIOR_CHARS_PER_S,
    ) -> None:
        self.embedder = embedder
        self.store = store
        self._memory: LRUCache[bytes, np.ndarray] = LRUCache(cache_size)
        self._pending: dict[bytes, _Entry] = {}
        self._embedding: dict[bytes, _Entry] = {}  # in an embedder call now
        self._heap: list[tuple[int, int, _Entry]] = []
        self._order = itertools.count()
        self._workers: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Future[None]] = set()
        self._max_workers = max(1, workers)
        self._chunk_chars = chunk_chars
        #: Characters embedded a second (running estimate over the embedder's calls).
        self.chars_per_s = chars_per_s
        self._store_failures = 0
        #: Texts embedded and texts read from the store, since start.
        self.embedded = 0
        self.stored = 0

    def key(self, text: str) -> bytes:
        return vector_key(self.embedder.id, text)

    def seconds_for(self, texts: Sequence[str]) -> float:
        """Estimated seconds to embed ``texts`` (at :attr:`chars_per_s`)."""
        return sum(len(text) for text in texts) / self.chars_per_s

    def cached(self, text: str) -> np.ndarray | None:
        """The text's vector when it is in memory."""
        return self._memory.get(self.key(text))

    async def known(self, texts: Sequence[str], progress: Progress) -> None:
        """Call ``progress(i, vector)`` for each text whose vector is in memory or in the
        store (those read from the store are kept in memory); embed nothing."""
        keys = [self.key(text) for text in texts]
        missing: list[bytes] = []
        for position, key in enumerate(keys):
            if (vector := self._memory.get(key)) is not None:
                progress(position, vector)
            else:
                missing.append(key)
        if not missing or not self._store_usable:
            return
        stored = await self._read_store(missing)
        for position, key in enumerate(keys):
            if (vector := stored.get(key)) is not None:
                self._memory.put(key, vector)
                progress(position, vector)

    async def get(
        self, texts: Sequence[str], priority: int = URGENT, progress: Progress | None = None
    ) -> np.ndarray:
        """The vectors of ``texts``: float32 ``(len(texts), d)`` in order (``(0, 0)`` for
        none). ``progress(i, vector)`` is called as text ``i``'s vector becomes known (at
        once for those in memory or on disk). Texts already queued are raised to
        ``priority`` when it is better. Cancelling the call leaves the texts queued for
        the other callers only.

        Raises: EmbedderError (a call of the embedder failed for one of the texts, or
        returned a wrong number of vectors).
        """
        keys = [self.key(text) for text in texts]
        vectors: list[np.ndarray | None] = [self._memory.get(key) for key in keys]
        missing = {key: text for key, text, vector in zip(keys, texts, vectors, strict=True)
                   if vector is None}
        if missing and self._store_usable:
            stored = await self._read_store(list(missing))
            for key, vector in stored.items():
                self._memory.put(key, vector)
                del missing[key]
            vectors = [stored.get(key) if vector is None else vector
                       for key, vector in zip(keys, vectors, strict=True)]
        if progress is not None:
            for position, vector in enumerate(vectors):
                if vector is not None:
                    progress(position, vector)
        if missing:
            waiter = _Waiter({}, vectors, progress, asyncio.get_running_loop().create_future())
            for position, key in enumerate(keys):
                if vectors[position] is None:
                    waiter.positions.setdefault(key, []).append(position)
            for key, text in missing.items():
                self._enqueue(key, text, priority, waiter)
            self._start_workers()
            try:
                await waiter.future
            finally:
                self._forget(waiter)
        if not vectors:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(vectors).astype(np.float32, copy=False)  # type: ignore[arg-type]

    @property
    def _store_usable(self) -> bool:
        return self.store is not None and self._store_failures < STORE_FAILURES

    def _enqueue(self, key: bytes, text: str, priority: int, waiter: _Waiter) -> None:
        entry = self._pending.get(key) or self._embedding.get(key)
        if entry is None:
            entry = self._pending[key] = _Entry(key, text, priority)
            heapq.heappush(self._heap, (priority, next(self._order), entry))
        elif priority < entry.priority:  # the older heap item is skipped when popped
            entry.priority = priority
            heapq.heappush(self._heap, (priority, next(self._order), entry))
        entry.waiters.add(waiter)

    def _forget(self, waiter: _Waiter) -> None:
        """A finished, failed or cancelled call: its texts no longer wait for it (a text
        nobody waits for leaves the queue)."""
        for key in waiter.positions:
            if (entry := self._embedding.get(key)) is not None:
                entry.waiters.discard(waiter)
            elif (entry := self._pending.get(key)) is not None:
                entry.waiters.discard(waiter)
                if not entry.waiters:
                    del self._pending[key]

    def _next_chunk(self) -> list[_Entry]:
        """The best queued texts, up to :data:`CHUNK_CHARS` characters (one at least)."""
        chunk: list[_Entry] = []
        size = 0
        while self._heap and len(chunk) < CHUNK_TEXTS:
            priority, _, entry = self._heap[0]
            if self._pending.get(entry.key) is not entry or entry.priority != priority:
                heapq.heappop(self._heap)  # done, dropped or raised since
                continue
            if all(waiter.future.done() for waiter in entry.waiters):
                heapq.heappop(self._heap)  # its callers failed or gave up
                del self._pending[entry.key]
                continue
            if chunk and size + len(entry.text) > self._chunk_chars:
                break
            heapq.heappop(self._heap)
            del self._pending[entry.key]
            chunk.append(entry)
            size += len(entry.text)
        return chunk

    def _start_workers(self) -> None:
        while len(self._workers) < self._max_workers and self._heap:
            task = asyncio.create_task(self._work())
            self._workers.add(task)

    async def _work(self) -> None:
        """Embed queued texts until none is left; a worker leaves the set of workers in
        the same step as it finds the queue empty, so a text queued after it is never
        left without one."""
        while True:
            chunk = self._next_chunk()
            if not chunk:
                self._workers.discard(asyncio.current_task())  # type: ignore[arg-type]
                return
            self._embedding.update((entry.key, entry) for entry in chunk)
            started = time.perf_counter()
            try:
                fresh = await self.embedder.embed([entry.text for entry in chunk])
                if fresh.shape[0] != len(chunk):
                    raise EmbedderError("embedder returned a wrong number of vectors")
            except Exception as exc:  # noqa: BLE001 - every waiter must hear of it
                error = exc if isinstance(exc, EmbedderError) else EmbedderError(
                    f"embedding tool texts failed: {type(exc).__name__}"
                )
                for entry in chunk:
                    del self._embedding[entry.key]
                    for waiter in list(entry.waiters):
                        if not waiter.future.done():
                            waiter.future.set_exception(error)
                continue
            self.embedded += len(chunk)
            rate = sum(len(entry.text) for entry in chunk) / max(time.perf_counter() - started, 1e-6)
            self.chars_per_s += RATE_WEIGHT * (rate - self.chars_per_s)
            made = {entry.key: np.asarray(vector, dtype=np.float32)
                    for entry, vector in zip(chunk, fresh, strict=True)}
            for key, vector in made.items():
                self._memory.put(key, vector)
            if self._store_usable:  # on disk before delivered; kept through aclose
                write = asyncio.ensure_future(self._write_store(made))
                self._writes.add(write)
                write.add_done_callback(self._writes.discard)
                await asyncio.shield(write)
            for entry in chunk:
                del self._embedding[entry.key]
                for waiter in list(entry.waiters):
                    waiter.deliver(entry.key, made[entry.key])

    async def _read_store(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        assert self.store is not None
        try:
            found = await asyncio.to_thread(self.store.get_many, keys)
        except VectorStoreError as error:
            self._store_error(error)
            return {}
        self._store_failures = 0
        self.stored += len(found)
        return found

    async def _write_store(self, vectors: dict[bytes, np.ndarray]) -> None:
        assert self.store is not None
        try:
            await asyncio.to_thread(self.store.put_many, vectors)
        except VectorStoreError as error:
            self._store_error(error)
        else:
            self._store_failures = 0

    def _store_error(self, error: VectorStoreError) -> None:
        """Log a store failure; :data:`STORE_FAILURES` in a row turn the store off for this
        process (vectors are then embedded, as without one)."""
        self._store_failures += 1
        fields = {"error": str(error)[:300], "turned_off": not self._store_usable}
        logger.warning("vector_store_failed", extra={"fields": fields})

    async def aclose(self) -> None:
        """Cancel the workers (the callers' waits fail), let the store writes in progress
        end, and close the store."""
        for task in list(self._workers):
            task.cancel()
        if self._writes:
            await asyncio.wait(self._writes)
        entries = [*self._pending.values(), *self._embedding.values()]
        for waiter in {w for entry in entries for w in entry.waiters}:
            if not waiter.future.done():
                waiter.future.cancel()
        self._pending.clear()
        self._embedding.clear()
        self._heap.clear()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
