"""Tool-text vectors through one queue (selection.indexes.tool_vectors): priorities, one embedding
per text whoever asks, the disk store in front of the embedder, and failures. The
embedder is a gated fake (asyncio.Event): nothing sleeps."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from selection.errors import EmbedderError, VectorStoreError
from selection.indexes.tool_vectors import DESCRIPTION, DETAIL, STORE_FAILURES, URGENT, ToolVectors
from selection.indexes.vector_store import SqliteVectorStore


def vector_of(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    vector = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return vector / np.linalg.norm(vector)


class GatedEmbedder:
    """Embeds each text as :func:`vector_of`; while ``gate`` is unset, each call waits."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    @property
    def id(self) -> str:
        return "gated"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return np.vstack([vector_of(text) for text in texts])

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


async def until(condition) -> None:  # type: ignore[no-untyped-def]
    while not condition():  # noqa: ASYNC110 - yields until another task gets there
        await asyncio.sleep(0)


async def test_vectors_come_back_in_order_and_each_text_is_embedded_once() -> None:
    embedder = GatedEmbedder()
    vectors = ToolVectors(embedder, cache_size=100)  # type: ignore[arg-type]
    out = await vectors.get(["a", "b", "a"])
    np.testing.assert_array_equal(out, np.vstack([vector_of(t) for t in ("a", "b", "a")]))
    again = await vectors.get(["b", "c"])
    np.testing.assert_array_equal(again[0], vector_of("b"))
    assert embedder.texts == ["a", "b", "c"]


async def test_urgent_texts_go_before_queued_descriptions_and_those_before_details() -> None:
    embedder = GatedEmbedder()
    embedder.gate.clear()
    vectors = ToolVectors(embedder, cache_size=100, chunk_chars=1)  # type: ignore[arg-type]
    details = asyncio.create_task(vectors.get(["d1", "d2"], DETAIL))
    await until(lambda: embedder.calls)  # d1 is being embedded: the queue holds d2
    descriptions = asyncio.create_task(vectors.get(["s1", "s2"], DESCRIPTION))
    urgent = asyncio.create_task(vectors.get(["u1", "s2"], URGENT))  # s2 raised to urgent
    await until(lambda: len(vectors._heap) >= 4)
    embedder.gate.set()
    await asyncio.gather(details, descriptions, urgent)
    assert embedder.texts == ["d1", "u1", "s2", "s1", "d2"]


async def test_a_text_asked_for_while_it_is_embedded_joins_that_call() -> None:
    embedder = GatedEmbedder()
    embedder.gate.clear()
    vectors = ToolVectors(embedder, cache_size=100)  # type: ignore[arg-type]
    first = asyncio.create_task(vectors.get(["a"]))
    await until(lambda: embedder.calls)
    second = asyncio.create_task(vectors.get(["a"], progress=lambda i, v: None))
    await asyncio.sleep(0)
    embedder.gate.set()
    one, two = await asyncio.gather(first, second)
    np.testing.assert_array_equal(one, two)
    assert embedder.calls == [["a"]]


async def test_progress_reports_each_vector_as_it_is_known() -> None:
    vectors = ToolVectors(GatedEmbedder(), cache_size=100, chunk_chars=1)  # type: ignore[arg-type]
    await vectors.get(["known"])
    seen: list[int] = []
    await vectors.get(["x", "known", "y"], DETAIL, lambda i, vector: seen.append(i))
    assert seen == [1, 0, 2]  # the cached one at once, then in embedding order


async def test_a_cancelled_caller_leaves_its_texts_to_the_others_and_drops_the_rest() -> None:
    embedder = GatedEmbedder()
    embedder.gate.clear()
    vectors = ToolVectors(embedder, cache_size=100, chunk_chars=1)  # type: ignore[arg-type]
    busy = asyncio.create_task(vectors.get(["first"]))
    await until(lambda: embedder.calls)
    leaving = asyncio.create_task(vectors.get(["mine", "shared"]))
    staying = asyncio.create_task(vectors.get(["shared"]))
    await until(lambda: len(vectors._heap) >= 2)
    leaving.cancel()
    embedder.gate.set()
    await asyncio.gather(busy, staying)
    assert leaving.cancelled()
    assert embedder.texts == ["first", "shared"]


async def test_a_failed_call_fails_its_callers_and_a_later_call_embeds_again() -> None:
    embedder = GatedEmbedder()
    embedder.fail = EmbedderError("model down")
    vectors = ToolVectors(embedder, cache_size=100)  # type: ignore[arg-type]
    with pytest.raises(EmbedderError, match="model down"):
        await vectors.get(["a", "b"])
    embedder.fail = None
    assert (await vectors.get(["a", "b"])).shape == (2, 8)


async def test_an_unexpected_failure_of_the_embedder_is_an_embedder_error() -> None:
    embedder = GatedEmbedder()
    embedder.fail = RuntimeError("boom")
    vectors = ToolVectors(embedder, cache_size=100)  # type: ignore[arg-type]
    with pytest.raises(EmbedderError, match="RuntimeError"):
        await vectors.get(["a"])


async def test_texts_in_the_store_are_read_not_embedded(tmp_path: Path) -> None:
    before = ToolVectors(GatedEmbedder(), cache_size=100, store=SqliteVectorStore(tmp_path, 1 << 20))  # type: ignore[arg-type]
    await before.get(["a", "b"])
    await before.aclose()  # a stop ends the writes in progress
    second = GatedEmbedder()
    restarted = ToolVectors(second, cache_size=0, store=SqliteVectorStore(tmp_path, 1 << 20))  # type: ignore[arg-type]
    out = await restarted.get(["b", "c", "a"])
    np.testing.assert_array_equal(out, np.vstack([vector_of(t) for t in ("b", "c", "a")]))
    assert second.texts == ["c"]
    assert (restarted.embedded, restarted.stored) == (1, 2)


class BrokenStore:
    def __init__(self) -> None:
        self.calls = 0

    def get_many(self, keys: Sequence[bytes]) -> dict:
        self.calls += 1
        raise VectorStoreError("disk gone")

    def put_many(self, items: dict) -> None:
        self.calls += 1
        raise VectorStoreError("disk gone")

    def close(self) -> None:
        return None


async def test_a_failing_store_is_embedded_around_and_given_up_after_a_few_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = BrokenStore()
    vectors = ToolVectors(GatedEmbedder(), cache_size=0, store=store)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="toolprune.vectors"):
        for text in ("a", "b", "c", "d"):
            assert (await vectors.get([text])).shape == (1, 8)
    assert store.calls == STORE_FAILURES
    assert [r.getMessage() for r in caplog.records] == ["vector_store_failed"] * STORE_FAILURES
