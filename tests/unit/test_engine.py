"""Tests for selection.ranking.engine (and selection.indexes.tool_index): scoring a catalogue through a
deterministic fake embedder, vector and index caching, errors and timeouts.

The fake embedder gives each word of a small vocabulary its own axis and embeds a text as
its normalised bag of vocabulary words, so every cosine is known exactly. It records every
text it is asked to embed. Slow embedders are gated with asyncio.Event: nothing sleeps.
"""

from __future__ import annotations

import asyncio
import gc
import math
import re
from collections.abc import Sequence

import numpy as np
import pytest

from selection.catalog.catalog import Catalog, parse_tools
from selection.errors import EmbedderError, EmbedderTimeout, IndexPending
from selection.indexes.tool_index import LRUCache, ToolIndex, index_key, tool_texts
from selection.ranking.engine import SelectionEngine
from tests.support.selection import signals

VOCAB = ["alpha", "beta", "gamma", "delta", "omega", "query", "other"]
AXIS = {word: i for i, word in enumerate(VOCAB)}
_WORD = re.compile(r"[a-z]+")


def bag(text: str) -> np.ndarray:
    vector = np.zeros(len(VOCAB), dtype=np.float32)
    for word in _WORD.findall(text.lower()):
        vector[AXIS.get(word, AXIS["other"])] += 1.0
    if not vector.any():
        vector[AXIS["other"]] = 1.0
    return vector / np.linalg.norm(vector)


class FakeEmbedder:
    """Bag-of-vocabulary embedder. ``gate``: when set to an unset Event, ``embed`` waits for
    it (``entered`` is set once a call is waiting). ``fail``: raise this instead."""

    def __init__(self, embedder_id: str = "fake") -> None:
        self._id = embedder_id
        self.calls: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.fail: Exception | None = None
        self.wrong_count = False
        self.closed = False

    @property
    def id(self) -> str:
        return self._id

    @property
    def ready(self) -> bool:
        return True

    async def load(self) -> None:
        return None

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        vectors = [bag(text) for text in texts]
        if self.wrong_count:
            vectors = vectors[:-1]
        if not vectors:
            return np.zeros((0, len(VOCAB)), dtype=np.float32)
        return np.vstack(vectors)

    async def aclose(self) -> None:
        self.closed = True


#: Settings a test passes to :func:`engine_for` that are signal knobs.
SIGNAL_KNOBS = (
    "lexical_weight", "name_weight", "named_only", "group_weight", "group_lexical_weight",
    "group_vector_weight", "group_size",
)


def engine_for(embedder: FakeEmbedder, **overrides: float) -> SelectionEngine:
    knobs = {name: overrides.pop(name) for name in SIGNAL_KNOBS if name in overrides}
    options: dict[str, object] = {
        "vector_cache_size": 1000,
        "index_cache_size": 8,
        "timeout_s": 5.0,
        "index_timeout_s": 5.0,
        "signals": signals(**knobs),
    }
    options.update(overrides)
    return SelectionEngine(embedder, **options)  # type: ignore[arg-type]


def tool(name: str, description: str = "", params: dict[str, str | None] | None = None) -> dict:
    function: dict = {"name": name, "description": description}
    if params is not None:
        function["parameters"] = {
            "type": "object",
            "properties": {
                param: ({"type": "string", "description": about} if about else {"type": "string"})
                for param, about in params.items()
            },
        }
    return {"type": "function", "function": function}


def catalog_of(*tools: dict) -> Catalog:
    return parse_tools(list(tools))


BASE = [tool("alpha"), tool("beta"), tool("gamma")]


def all_texts(catalog: Catalog, examples: dict[str, Sequence[str]] | None = None) -> list[str]:
    examples = examples or {}
    return [text for t in catalog.tools for text in tool_texts(t, examples.get(t.name, ()))]


# --------------------------------------------------------------------------- tool texts


def test_tool_texts_are_name_with_description_then_parameters_then_examples() -> None:
    (t,) = catalog_of(
        tool("getPullRequest", "Get a PR.", {"repo_name": "Repository", "number": None})
    ).tools
    assert tool_texts(t, ["show PR 5", "  "]) == [
        "get Pull Request: Get a PR.",
        "get Pull Request (repo name: Repository; number)",
        "show PR 5",
    ]


def test_tool_texts_of_a_bare_tool_are_its_name_words() -> None:
    (t,) = catalog_of(tool("list_all")).tools
    assert tool_texts(t) == ["list all"]


# --------------------------------------------------------------------------- caching


async def test_a_catalogue_seen_before_costs_no_embedding() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    _, first_s = await engine.index_for(catalog, {})
    assert embedder.texts == all_texts(catalog)
    embedder.calls.clear()
    again = catalog_of(*BASE)  # parsed anew: same fingerprint
    _, seconds = await engine.index_for(again, {})
    assert embedder.calls == []
    assert seconds == 0.0
    assert first_s >= 0.0


async def test_a_catalogue_with_the_same_tools_in_another_order_costs_no_embedding() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    await engine.index_for(catalog_of(*BASE), {})
    embedder.calls.clear()
    reordered = catalog_of(*reversed(BASE))
    await engine.index_for(reordered, {})
    assert embedder.texts == []
    scores = (await engine.score(reordered, {}, "gamma")).values
    np.testing.assert_allclose(scores, [1.0, 0.0, 0.0], atol=1e-6)  # catalogue order


async def test_a_catalogue_changed_by_one_tool_costs_only_that_tools_texts() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    await engine.index_for(catalog_of(*BASE), {})
    embedder.calls.clear()
    new_tool = tool("delta", "delta omega", {"omega": "omega value"})
    changed = catalog_of(BASE[0], BASE[1], new_tool)
    await engine.index_for(changed, {})
    assert embedder.texts == tool_texts(changed.tools[2])
    assert len(embedder.texts) == 2


async def test_new_examples_cost_only_the_example_texts() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.calls.clear()
    await engine.index_for(catalog, {"beta": ["omega omega"], "not_in_catalogue": ["x"]})
    assert embedder.texts == ["omega omega"]


async def test_examples_for_tools_outside_the_catalogue_do_not_change_its_index() -> None:
    catalog = catalog_of(*BASE)
    assert index_key("e", catalog, {}) == index_key("e", catalog, {"zzz": ["q"]})
    assert index_key("e", catalog, {}) != index_key("e", catalog, {"beta": ["q"]})
    assert index_key("e", catalog, {}) != index_key("other-embedder", catalog, {})


async def test_a_warm_query_costs_exactly_one_embedding() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    await engine.score(catalog, {}, "alpha")
    embedder.calls.clear()
    scores = await engine.score(catalog, {}, "beta")
    assert embedder.calls == [["beta"]]
    assert scores.embedding_s >= 0.0


async def test_the_index_cache_is_bounded_but_vectors_survive_eviction() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, index_cache_size=1)
    one, two = catalog_of(*BASE), catalog_of(*BASE[:2])
    await engine.index_for(one, {})
    await engine.index_for(two, {})  # evicts one's index
    embedder.calls.clear()
    _, seconds = await engine.index_for(one, {})
    assert embedder.calls == []  # rebuilt from cached vectors
    assert seconds >= 0.0


async def test_embed_serves_cached_vectors_and_embeds_only_the_missing_texts() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    first = await engine.embed(["alpha", "beta"])
    second = await engine.embed(["beta", "gamma", "alpha"])
    assert embedder.calls == [["alpha", "beta"], ["gamma"]]
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    assert second.dtype == np.float32 and second.shape == (3, len(VOCAB))


async def test_a_zero_vector_cache_still_embeds_correctly() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, vector_cache_size=0)
    catalog = catalog_of(*BASE)
    scores = (await engine.score(catalog, {}, "beta")).values
    np.testing.assert_allclose(scores, [0.0, 1.0, 0.0], atol=1e-6)


# --------------------------------------------------------------------------- scores


async def test_scores_are_float32_cosines_in_catalogue_order() -> None:
    engine = engine_for(FakeEmbedder())
    catalog = catalog_of(tool("alpha"), tool("beta", "alpha"), tool("gamma"))
    scores = (await engine.score(catalog, {}, "alpha")).values
    assert scores.dtype == np.float32 and scores.shape == (3,)
    # "beta: alpha" is (beta + alpha)/√2: cosine with "alpha" is 1/√2.
    np.testing.assert_allclose(scores, [1.0, 1 / math.sqrt(2), 0.0], atol=1e-6)


async def test_per_tool_score_is_the_best_of_its_texts() -> None:
    engine = engine_for(FakeEmbedder())
    # Texts of delta: "delta: gamma omega" → cos 1/√3 with "gamma";
    # "delta (gamma)" → cos 1/√2. The tool scores the better one.
    catalog = catalog_of(tool("alpha"), tool("delta", "gamma omega", {"gamma": None}))
    assert tool_texts(catalog.tools[1]) == ["delta: gamma omega", "delta (gamma)"]
    scores = (await engine.score(catalog, {}, "gamma")).values
    np.testing.assert_allclose(scores, [0.0, 1 / math.sqrt(2)], atol=1e-6)


async def test_examples_raise_a_tools_score() -> None:
    engine = engine_for(FakeEmbedder())
    catalog = catalog_of(tool("alpha"), tool("delta", "gamma omega", {"gamma": None}))
    without = (await engine.score(catalog, {}, "omega")).values
    with_examples = (await engine.score(catalog, {"alpha": ["omega"]}, "omega")).values
    np.testing.assert_allclose(without, [0.0, 1 / math.sqrt(3)], atol=1e-6)
    np.testing.assert_allclose(with_examples, [1.0, 1 / math.sqrt(3)], atol=1e-6)


def test_a_tool_index_without_texts_scores_every_tool_minus_one() -> None:
    index = ToolIndex.build(np.zeros((0, 4), dtype=np.float32), [], 3)
    np.testing.assert_array_equal(index.scores(np.ones(4, np.float32) / 2), [-1, -1, -1])


def test_a_tool_index_scores_each_tool_by_its_best_text() -> None:
    vectors = np.eye(3, dtype=np.float32)
    index = ToolIndex.build(vectors, owners=[0, 1, 1], n_tools=3)
    scores = index.scores(np.array([0.0, 0.6, 0.8], dtype=np.float32))
    np.testing.assert_allclose(scores, [0.0, 0.8, -1.0], atol=1e-6)


async def test_an_empty_catalogue_scores_nothing() -> None:
    engine = engine_for(FakeEmbedder())
    scores = await engine.score(catalog_of(), {}, "alpha")
    assert scores.values.shape == (0,)


# --------------------------------------------------------------------------- errors


async def test_an_embedder_error_while_indexing_surfaces_as_embedder_error() -> None:
    embedder = FakeEmbedder()
    embedder.fail = EmbedderError("model down")
    engine = engine_for(embedder)
    with pytest.raises(EmbedderError, match="model down"):
        await engine.score(catalog_of(*BASE), {}, "alpha")


def test_a_cold_request_whose_embedder_fails_leaves_no_task_exception_unread() -> None:
    """The request's own texts (embedded ahead of the build) fail with its query: their
    task's exception is read, not reported by asyncio as "never retrieved" when the task is
    collected (which, inside a later ``ast.parse`` on Python 3.11, raised SystemError:
    CPython gh-106905). Its own event loop, so that nothing outlives the request."""
    reported: list[str] = []

    async def request() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
        embedder = FakeEmbedder()
        embedder.fail = EmbedderError("model down")
        engine = engine_for(embedder)
        with pytest.raises(EmbedderError):
            await engine.score(catalog_of(*BASE), {}, "alpha")
        await engine.aclose()

    asyncio.run(request())
    gc.collect()
    assert reported == []


async def test_a_failed_index_build_is_not_cached_and_is_retried() -> None:
    embedder = FakeEmbedder()
    embedder.fail = EmbedderError("model down")
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    with pytest.raises(EmbedderError):
        await engine.index_for(catalog, {})
    embedder.fail = None
    embedder.calls.clear()
    await engine.index_for(catalog, {})
    assert embedder.texts == all_texts(catalog)


async def test_an_embedder_error_on_the_query_surfaces_as_embedder_error() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.fail = EmbedderError("query failed")
    with pytest.raises(EmbedderError, match="query failed"):
        await engine.score(catalog, {}, "alpha")


async def test_a_wrong_number_of_vectors_is_an_embedder_error() -> None:
    embedder = FakeEmbedder()
    embedder.wrong_count = True
    engine = engine_for(embedder)
    with pytest.raises(EmbedderError):
        await engine.index_for(catalog_of(*BASE), {})


# --------------------------------------------------------------------------- timeouts


async def _other_tasks_done() -> None:
    """Wait for every task but this one (the background index build)."""
    current = asyncio.current_task()
    await asyncio.gather(*(task for task in asyncio.all_tasks() if task is not current))


async def test_a_slow_index_build_raises_index_pending_and_finishes_in_the_background() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()  # the build cannot finish before the gate opens
    engine = engine_for(embedder, index_timeout_s=0.01)
    catalog = catalog_of(*BASE)
    with pytest.raises(IndexPending) as caught:
        await engine.index_for(catalog, {})
    assert isinstance(caught.value, EmbedderTimeout)
    assert caught.value.reason == "index_pending"
    assert embedder.entered.is_set() and len(embedder.calls) == 1

    embedder.gate.set()
    await _other_tasks_done()  # the build, awaited by nobody, completes

    embedder.calls.clear()
    index, seconds = await engine.index_for(catalog, {})
    assert (embedder.calls, seconds) == ([], 0.0)  # ready: no embedding, no waiting
    assert index.n_tools == 3


async def test_while_nothing_of_the_index_is_embedded_a_catalogue_is_scored_by_bm25_alone() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()
    engine = engine_for(embedder, index_timeout_s=0.01, lexical_weight=0.0)
    catalog = catalog_of(
        tool("alpha", "Send an email message"), tool("beta", "Read a calendar"), tool("gamma")
    )
    scored = await engine.score(catalog, {}, ["send the email now", "other part"])
    assert scored.lexical_only and scored.dense is None and scored.embedding_s == 0.0
    assert scored.values.dtype == np.float32
    assert scored.values.tolist() == [1.0, 0.0, 0.0]  # normalised by the best
    # One call for the build's texts, in wait, beside the query's (in either order).
    assert all_texts(catalog) in embedder.calls[:2]

    embedder.gate.set()
    await _other_tasks_done()
    ready = await engine.score(catalog, {}, ["send the email now"])
    assert not ready.lexical_only and ready.dense is not None


async def test_while_the_index_builds_no_query_means_index_pending() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()
    engine = engine_for(embedder, index_timeout_s=0.01)
    with pytest.raises(IndexPending):
        await engine.score(catalog_of(*BASE), {}, [])
    embedder.gate.set()
    await _other_tasks_done()


async def test_a_request_during_a_slow_build_joins_it_instead_of_starting_another() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()
    engine = engine_for(embedder, index_timeout_s=0.01)
    catalog = catalog_of(*BASE)
    with pytest.raises(EmbedderTimeout):
        await engine.index_for(catalog, {})
    engine.index_timeout_s = 5.0
    # The gate opens only once this request is already waiting on the running build.
    asyncio.get_running_loop().call_soon(embedder.gate.set)
    index, _ = await engine.index_for(catalog, {})
    assert index.n_tools == 3
    assert len(embedder.calls) == 1  # one build for both requests


async def test_concurrent_requests_for_one_new_catalogue_share_one_build() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    first = asyncio.create_task(engine.index_for(catalog, {}))
    second = asyncio.create_task(engine.index_for(catalog, {}))
    await embedder.entered.wait()
    embedder.gate.set()
    (one, _), (two, _) = await asyncio.gather(first, second)
    assert one is two
    assert len(embedder.calls) == 1


async def test_a_slow_query_embedding_raises_embedder_timeout() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, timeout_s=0.01)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.gate = asyncio.Event()
    with pytest.raises(EmbedderTimeout):
        await engine.score(catalog, {}, "alpha")
    embedder.gate.set()


async def test_aclose_closes_the_embedder_and_cancels_builds() -> None:
    embedder = FakeEmbedder()
    embedder.gate = asyncio.Event()
    engine = engine_for(embedder, index_timeout_s=0.01)
    with pytest.raises(EmbedderTimeout):
        await engine.index_for(catalog_of(*BASE), {})
    await engine.aclose()
    assert embedder.closed
    await _other_tasks_done_or_cancelled()


async def _other_tasks_done_or_cancelled() -> None:
    current = asyncio.current_task()
    results = await asyncio.gather(
        *(task for task in asyncio.all_tasks() if task is not current), return_exceptions=True
    )
    assert all(isinstance(result, asyncio.CancelledError) for result in results)


# --------------------------------------------------------------------------- LRU


def test_lru_cache_drops_the_least_recently_used_entry() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert (cache.get("a"), cache.get("c")) == (1, 3)


def test_lru_cache_of_size_zero_keeps_nothing() -> None:
    cache: LRUCache[str, int] = LRUCache(0)
    cache.put("a", 1)
    assert len(cache) == 0 and cache.get("a") is None


def test_lru_cache_overwrite_refreshes_the_entry() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.get("a") == 10 and cache.get("b") is None


# --------------------------------------------------------------------------- query parts


async def test_query_parts_are_embedded_in_one_call_and_a_tool_scores_its_best_part() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.calls.clear()
    parts = ["alpha beta gamma", "alpha", "gamma"]
    scored = await engine.score(catalog, {}, parts)
    assert embedder.calls == [parts]
    assert scored.values.dtype == np.float32 and scored.values.shape == (3,)
    # alpha: 1 (part "alpha"); beta: 1/√3 (the whole query); gamma: 1 (part "gamma").
    np.testing.assert_allclose(scored.values, [1.0, 1 / math.sqrt(3), 1.0], atol=1e-6)


async def test_one_text_and_a_one_part_list_score_the_same() -> None:
    engine = engine_for(FakeEmbedder())
    catalog = catalog_of(tool("alpha"), tool("beta", "alpha"), tool("gamma"))
    text = (await engine.score(catalog, {}, "alpha beta")).values
    listed = (await engine.score(catalog, {}, ["alpha beta"])).values
    np.testing.assert_array_equal(text, listed)


async def test_embed_parts_returns_one_float32_row_per_part() -> None:
    engine = engine_for(FakeEmbedder())
    vectors = await engine.embed_parts(["alpha", "beta gamma"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, len(VOCAB))
    np.testing.assert_allclose(vectors[0], bag("alpha"))


async def test_a_wrong_number_of_part_vectors_is_an_embedder_error() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.wrong_count = True
    with pytest.raises(EmbedderError):
        await engine.score(catalog, {}, ["alpha", "beta"])


async def test_slow_query_parts_raise_embedder_timeout() -> None:
    embedder = FakeEmbedder()
    engine = engine_for(embedder, timeout_s=0.01)
    catalog = catalog_of(*BASE)
    await engine.index_for(catalog, {})
    embedder.gate = asyncio.Event()
    with pytest.raises(EmbedderTimeout):
        await engine.score(catalog, {}, ["alpha", "beta"])
    embedder.gate.set()


def test_best_scores_take_the_max_over_parts_and_texts() -> None:
    vectors = np.eye(3, dtype=np.float32)
    index = ToolIndex.build(vectors, owners=[0, 1, 1], n_tools=3)
    parts = np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]], dtype=np.float32)
    best = index.best_scores(parts)
    assert best.dtype == np.float32 and best.shape == (3,)
    np.testing.assert_allclose(best, [1.0, 0.8, -1.0], atol=1e-6)
    np.testing.assert_allclose(index.best_scores(parts[:1]), index.scores(parts[0]), atol=1e-6)
    np.testing.assert_array_equal(index.best_scores(np.zeros((0, 3), np.float32)), [-1, -1, -1])


# --------------------------------------------------------------------------- name match


async def test_name_weight_adds_the_share_of_name_words_the_query_uses() -> None:
    catalog = catalog_of(tool("alpha_beta"), tool("alpha_gamma"), tool("delta"))
    plain = await engine_for(FakeEmbedder()).score(catalog, {}, "alpha beta")
    weighted = await engine_for(FakeEmbedder(), name_weight=0.2).score(catalog, {}, "alpha beta")
    np.testing.assert_array_equal(weighted.dense, plain.values)
    np.testing.assert_allclose(weighted.values, plain.values + 0.2 * np.array([1.0, 0.5, 0.0]), atol=1e-6)
    assert weighted.values.dtype == np.float32


async def test_a_one_intent_query_reports_the_tools_it_names() -> None:
    engine = engine_for(FakeEmbedder(), name_weight=0.2, named_only=True)
    catalog = catalog_of(tool("alpha_beta"), tool("alpha_gamma"), tool("beta"))
    scored = await engine.score(catalog, {}, ["open alpha beta"])
    assert scored.named is not None and scored.named.tolist() == [True, False, False]
    # The named tools are the name signal's: with named_only off, nothing is named.
    assert (await engine_for(FakeEmbedder(), name_weight=0.2).score(catalog, {}, ["open alpha beta"])).named is None
    assert (await engine.score(catalog, {}, ["open alpha beta", "then gamma"])).named is None
    assert (await engine.score(catalog, {}, ["alpha beta and gamma"])).named is None


async def test_a_name_weight_of_0_takes_the_score_out_and_leaves_the_named_tools() -> None:
    """``name_weight`` and ``named_only`` are two switches: at weight 0 the ranking is the
    other signals' alone, and a one-intent request's named tools are still reported."""
    catalog = catalog_of(tool("alpha_beta"), tool("alpha_gamma"), tool("beta"))
    plain = await engine_for(FakeEmbedder()).score(catalog, {}, ["open alpha beta"])
    named = await engine_for(FakeEmbedder(), name_weight=0.0, named_only=True).score(
        catalog, {}, ["open alpha beta"])
    np.testing.assert_array_equal(named.values, plain.values)
    assert named.named is not None and named.named.tolist() == [True, False, False]
