"""Tests for selection.indexes.query_embedding: the query batcher (coalescing, order, errors,
cancellation, the batch bound, results equal to unbatched embedding with the real ONNX
model) and the exact-text query cache (hits, bound, stats).

Embedder calls are held open with asyncio.Event gates, so which requests share a batch is
decided by the test, not by timing: nothing sleeps.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from selection.embedders.onnx import OnnxEmbedder
from selection.errors import EmbedderError
from selection.indexes.query_embedding import QueryBatcher, QueryEmbedder

DIM = 16


def vector(text: str) -> np.ndarray:
    """A deterministic unit vector per text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


class GatedEmbed:
    """An embedder's ``embed``: records each call's texts; while ``hold`` is set, each call
    waits for its own gate (``opened(i)``), so a test decides when call ``i`` returns."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.hold = True
        self.fail: Exception | None = None
        self.rows_short = False
        self._gates: list[asyncio.Event] = []
        self._entered = asyncio.Condition()

    async def __call__(self, texts: Sequence[str]) -> np.ndarray:
        gate = asyncio.Event()
        self.calls.append(list(texts))
        self._gates.append(gate)
        async with self._entered:
            self._entered.notify_all()
        if self.hold:
            await gate.wait()
        if self.fail is not None:
            raise self.fail
        rows = [vector(text) for text in texts]
        return np.vstack(rows[:-1] if self.rows_short else rows)

    async def entered(self, count: int) -> None:
        """Wait until ``count`` calls have started."""
        async with self._entered:
            await self._entered.wait_for(lambda: len(self.calls) >= count)

    def open(self, call: int) -> None:
        self._gates[call].set()


async def settle() -> None:
    """Let every ready task run until it blocks (a few loop iterations, no time passing)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_lone_request_is_embedded_at_once() -> None:
    embed = GatedEmbed()
    embed.hold = False
    batcher = QueryBatcher(embed)
    out = await batcher.embed(["list pull requests", "and their checks"])
    assert embed.calls == [["list pull requests", "and their checks"]]
    np.testing.assert_array_equal(out, np.vstack([vector("list pull requests"), vector("and their checks")]))
    assert (batcher.stats.batches, batcher.stats.requests, batcher.stats.embedded) == (1, 1, 2)


async def test_requests_arriving_during_a_batch_share_the_next_one_in_order() -> None:
    embed = GatedEmbed()
    batcher = QueryBatcher(embed)
    first = asyncio.create_task(batcher.embed(["a"]))
    await embed.entered(1)
    queued = [asyncio.create_task(batcher.embed(texts)) for texts in (["b", "c"], ["d"], ["c", "e"])]
    await settle()
    assert len(embed.calls) == 1  # the queue waits for the running batch
    embed.open(0)
    await embed.entered(2)
    # One call for the three queued requests; "c" (asked twice) embedded once.
    assert embed.calls[1] == ["b", "c", "d", "e"]
    embed.open(1)
    results = await asyncio.gather(first, *queued)
    for texts, out in zip((["a"], ["b", "c"], ["d"], ["c", "e"]), results, strict=True):
        np.testing.assert_array_equal(out, np.vstack([vector(t) for t in texts]))
    assert (batcher.stats.batches, batcher.stats.requests, batcher.stats.embedded) == (2, 4, 5)


async def test_a_batch_holds_at_most_max_texts() -> None:
    embed = GatedEmbed()
    batcher = QueryBatcher(embed, max_texts=3)
    first = asyncio.create_task(batcher.embed(["a"]))
    await embed.entered(1)
    queued = [
        asyncio.create_task(batcher.embed(texts))
        for texts in (["b", "c"], ["d"], ["e"], ["f", "g", "h", "i"])
    ]
    await settle()
    embed.hold = False
    embed.open(0)
    await asyncio.gather(first, *queued)
    # A request larger than the bound still goes, alone.
    assert embed.calls == [["a"], ["b", "c", "d"], ["e"], ["f", "g", "h", "i"]]


async def test_a_failed_batch_fails_every_request_in_it_and_the_next_batch_works() -> None:
    embed = GatedEmbed()
    batcher = QueryBatcher(embed)
    first = asyncio.create_task(batcher.embed(["a"]))
    await embed.entered(1)
    queued = [asyncio.create_task(batcher.embed([t])) for t in ("b", "c")]
    await settle()
    embed.fail = EmbedderError("model crashed")
    embed.open(0)
    await embed.entered(2)
    embed.open(1)
    for task in (first, *queued):
        with pytest.raises(EmbedderError, match="model crashed"):
            await task
    embed.fail, embed.hold = None, False
    np.testing.assert_array_equal(await batcher.embed(["d"]), vector("d")[None])


async def test_a_wrong_number_of_vectors_is_an_error_for_the_batch() -> None:
    embed = GatedEmbed()
    embed.hold, embed.rows_short = False, True
    batcher = QueryBatcher(embed)
    with pytest.raises(EmbedderError, match="wrong number"):
        await batcher.embed(["a", "b"])


async def test_a_cancelled_request_does_not_break_its_batch_nor_the_next() -> None:
    embed = GatedEmbed()
    batcher = QueryBatcher(embed)
    running = asyncio.create_task(batcher.embed(["a"]))
    running_too = asyncio.create_task(batcher.embed(["b"]))
    await embed.entered(1)
    assert embed.calls == [["a", "b"]]
    queued = [asyncio.create_task(batcher.embed([t])) for t in ("c", "d")]
    await settle()
    running.cancel()  # its batch is in flight
    queued[0].cancel()  # its batch has not started
    await settle()
    embed.open(0)
    await embed.entered(2)
    assert embed.calls[1] == ["d"]  # the cancelled request's text is not embedded
    embed.open(1)
    np.testing.assert_array_equal(await running_too, vector("b")[None])
    np.testing.assert_array_equal(await queued[1], vector("d")[None])
    for task in (running, queued[0]):
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_closing_cancels_the_running_batch_and_the_queue() -> None:
    embed = GatedEmbed()
    batcher = QueryBatcher(embed)
    running = asyncio.create_task(batcher.embed(["a"]))
    await embed.entered(1)
    queued = asyncio.create_task(batcher.embed(["b"]))
    await settle()
    await batcher.aclose()
    for task in (running, queued):
        with pytest.raises(asyncio.CancelledError):
            await task
    embed.hold = False  # a later request starts a new batch
    np.testing.assert_array_equal(await batcher.embed(["c"]), vector("c")[None])


async def test_empty_request_is_refused() -> None:
    with pytest.raises(ValueError):
        await QueryBatcher(GatedEmbed()).embed([])


async def test_batched_onnx_vectors_equal_unbatched() -> None:
    onnx = OnnxEmbedder()
    await onnx.load()
    batcher = QueryBatcher(onnx.embed)
    requests = [
        ["List the open pull requests in octocat/hello-world."],
        ["Create an issue titled 'Login fails on Safari'.", "Label it bug."],
        ["x"],
        ["Search the code of acme/api for uses of the deprecated fetch_user function " * 4],
    ]
    batched = await asyncio.gather(*(batcher.embed(texts) for texts in requests))
    assert batcher.stats.batches == 1  # all four were queued before the first batch ran
    for texts, out in zip(requests, batched, strict=True):
        np.testing.assert_allclose(out, onnx.embed_sync(texts), atol=1e-5)
        for text, row in zip(texts, out, strict=True):
            np.testing.assert_allclose(row, onnx.embed_sync([text])[0], atol=1e-5)
    await onnx.aclose()


async def test_cache_answers_repeated_texts_without_the_embedder() -> None:
    embed = GatedEmbed()
    embed.hold = False
    queries = QueryEmbedder("fake", embed, cache_size=10)
    first = await queries.embed(["a", "b"])
    again = await queries.embed(["b", "c", "a"])
    assert embed.calls == [["a", "b"], ["c"]]
    np.testing.assert_array_equal(again, np.vstack([first[1], vector("c"), first[0]]))
    assert (queries.stats.cached, queries.stats.embedded) == (2, 3)
    await queries.embed(["a", "c"])
    assert embed.calls == [["a", "b"], ["c"]]


async def test_cache_is_bounded_least_recently_used_first() -> None:
    embed = GatedEmbed()
    embed.hold = False
    queries = QueryEmbedder("fake", embed, cache_size=2)
    for text in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" comes
        await queries.embed([text])
    assert len(queries) == 2
    await queries.embed(["a", "c"])
    assert embed.calls == [["a"], ["b"], ["c"]]
    await queries.embed(["b"])
    assert embed.calls[-1] == ["b"]


async def test_cache_size_zero_caches_nothing() -> None:
    embed = GatedEmbed()
    embed.hold = False
    queries = QueryEmbedder("fake", embed, cache_size=0)
    await queries.embed(["a"])
    await queries.embed(["a"])
    assert embed.calls == [["a"], ["a"]] and len(queries) == 0
    assert queries.stats.cached == 0
