"""A request on a catalogue whose index is being built (selection.ranking.engine's first look,
selection.indexes.build): the descriptions its words point at are embedded first and it is
ranked by what is embedded; a catalogue with few texts missing is waited for whole; a
restarted engine reads vectors back. The embedder answers one call per step the test
allows (no sleeping): which texts a request was ranked by is exact."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from selection.catalog.catalog import parse_tools
from selection.indexes.build import IndexBuild, first_tools, urgent_texts
from selection.indexes.tool_vectors import URGENT, ToolVectors
from selection.indexes.vector_store import SqliteVectorStore
from tests.unit.test_engine import FakeEmbedder, all_texts, bag, catalog_of, engine_for, tool


class StepEmbedder(FakeEmbedder):
    """A :class:`FakeEmbedder` whose calls each wait for one :meth:`step`."""

    def __init__(self) -> None:
        super().__init__()
        self._steps = asyncio.Semaphore(0)

    def step(self, calls: int = 1) -> None:
        for _ in range(calls):
            self._steps.release()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        await self._steps.acquire()
        return np.vstack([bag(text) for text in texts])


async def until(condition) -> None:  # type: ignore[no-untyped-def]
    while not condition():  # noqa: ASYNC110 - yields until another task gets there
        await asyncio.sleep(0)


CATALOG = [
    tool("alpha", "other words", {"x": "other"}),
    tool("beta", "more other words", {"y": None}),
    tool("omega", "gamma delta", {"z": None}),
]


async def test_a_request_has_its_shortlists_descriptions_embedded_first_and_is_ranked_by_them() -> None:
    embedder = StepEmbedder()
    engine = engine_for(embedder, index_timeout_s=60.0, cold_start_tools=1)
    # One text a call, and a rate at which the whole index would not be embedded in time.
    engine.indexes.vectors = ToolVectors(embedder, cache_size=1000, chunk_chars=1, chars_per_s=0.5)
    catalog = catalog_of(*CATALOG)
    request = asyncio.create_task(engine.score(catalog, {}, "omega gamma delta"))
    # The query's call and the build's first text (alpha's description), in either order.
    await until(lambda: len(embedder.calls) >= 2)
    await until(lambda: any(p == URGENT for p, _, _ in engine.vectors._heap))
    embedder.step(2)
    await until(lambda: len(embedder.calls) >= 3)  # the next text
    assert embedder.calls[2] == ["omega: gamma delta"]  # the shortlist went before beta's
    embedder.step()
    scored = await request
    assert scored.partial and not scored.lexical_only
    assert scored.dense is not None and scored.dense[1] == -1.0  # beta: nothing embedded yet
    assert int(np.argmax(scored.values)) == 2
    assert not engine.index_ready(catalog, {})
    embedder.step(100)
    index, _ = await engine.index_for(catalog, {})  # the build goes on and ends
    assert index.n_tools == 3
    assert sorted(text for call in embedder.calls for text in call if text != "omega gamma delta") == sorted(all_texts(catalog))


async def test_a_catalogue_with_few_texts_missing_is_waited_for_whole() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, index_timeout_s=60.0, cold_start_tools=16)
    engine.indexes.vectors = ToolVectors(embedder, cache_size=1000, chars_per_s=0.5)  # slow, but few
    scored = await engine.score(catalog_of(*CATALOG), {}, "omega gamma delta")
    assert not scored.partial and not scored.lexical_only  # 6 texts: all of them, at once
    assert engine.index_ready(catalog_of(*CATALOG), {})


async def test_a_catalogue_embedded_within_the_wait_at_the_measured_rate_is_waited_for_whole() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, index_timeout_s=60.0, cold_start_tools=1)
    engine.indexes.vectors = ToolVectors(embedder, cache_size=1000, chunk_chars=1, chars_per_s=10.0)
    assert engine.vectors.seconds_for(all_texts(catalog_of(*CATALOG))) < 60.0
    scored = await engine.score(catalog_of(*CATALOG), {}, "omega gamma delta")
    assert not scored.partial and engine.index_ready(catalog_of(*CATALOG), {})


async def test_the_wait_estimate_is_characters_over_the_rate_measured_on_each_call() -> None:
    vectors = ToolVectors(FakeEmbedder(), cache_size=10, chars_per_s=1000.0)
    assert vectors.seconds_for(["x" * 500, "y" * 1500]) == 2.0
    await vectors.get(["alpha " * 100])
    assert vectors.chars_per_s != 1000.0 and vectors.chars_per_s > 0


async def test_with_no_shortlist_a_request_waits_for_the_build_then_bm25_alone() -> None:
    embedder = StepEmbedder()
    engine = engine_for(embedder, index_timeout_s=0.05, cold_start_tools=0)
    scored = await engine.score(catalog_of(*CATALOG), {}, "omega gamma delta")
    assert scored.lexical_only and int(np.argmax(scored.values)) == 2
    embedder.step(100)


async def test_a_restarted_engine_reads_the_vectors_back_and_embeds_only_the_query(tmp_path: Path) -> None:
    catalog = catalog_of(*CATALOG)
    first = FakeEmbedder()
    engine = engine_for(first, store=SqliteVectorStore(tmp_path, 1 << 20))
    await engine.index_for(catalog, {})
    await engine.aclose()
    second = FakeEmbedder()
    restarted = engine_for(second, store=SqliteVectorStore(tmp_path, 1 << 20), index_timeout_s=60.0)
    scored = await restarted.score(catalog, {}, "omega gamma delta")
    assert not scored.partial and second.calls == [["omega gamma delta"]]


def test_the_first_tools_are_best_by_bm25_and_name_match_ties_in_catalogue_order() -> None:
    lexical = np.array([0.0, 1.0, 0.5, 0.0], dtype=np.float32)
    names = np.array([0.0, 0.0, 0.5, 1.0], dtype=np.float32)
    assert first_tools(lexical, names, 3) == [1, 2, 3]
    assert first_tools(np.zeros(3, np.float32), np.zeros(3, np.float32), 2) == [0, 1]


def test_urgent_texts_are_the_shortlists_missing_descriptions_or_all_that_is_missing() -> None:
    build = IndexBuild.of(parse_tools(CATALOG), {}, 2000)
    assert build.texts[:2] == ["alpha: other words", "alpha (x: other)"]
    assert build.descriptions.tolist() == [0, 2, 4] and build.detail_texts == [1, 3, 5]
    assert urgent_texts(build, [2, 0], 2) == ([4, 0], False)
    build.record(4, np.ones(4, np.float32) / 2)
    assert urgent_texts(build, [2, 0], 2) == ([0], False)
    assert urgent_texts(build, [2, 0], 5) == ([0, 1, 2, 3, 5], True)
    partial = build.partial()
    assert partial is not None and partial.best_scores(np.ones((1, 4), np.float32) / 2).tolist() == [-1.0, -1.0, 1.0]
