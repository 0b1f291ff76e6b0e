"""One huge tool description or many cold catalogues cannot take the proxy's CPU and
memory: tool texts are clipped before tokenizing, the tokenizer never gets a whole huge
text, and catalogue builds embed one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from selection.catalog.catalog import parse_tools
from selection.embedders.onnx import CHARS_PER_TOKEN_BOUND, OnnxEmbedder
from selection.errors import EmbedderTimeout
from selection.indexes.tool_index import tool_texts
from selection.ranking.engine import SelectionEngine
from tests.support.selection import PLAIN_SIGNALS

HUGE = "word " * 2_000_000  # 10 MB


def huge_tool() -> dict:
    return {"type": "function", "function": {
        "name": "huge", "description": HUGE,
        "parameters": {"type": "object", "properties": {
            f"p{i}": {"type": "string", "description": HUGE[:100_000]} for i in range(5)}},
    }}


def test_tool_texts_are_clipped_before_embedding() -> None:
    tool = parse_tools([huge_tool()]).tools[0]
    texts = tool_texts(tool, ["example " * 10_000], max_chars=2000)
    assert len(texts) == 3
    assert all(len(text) <= 2000 for text in texts)
    assert texts[0].startswith("huge: word word")


class RecordingTokenizer:
    """Wraps the real tokenizer, recording the longest text it was given."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.longest = 0

    def encode_batch(self, texts: list[str]) -> object:
        self.longest = max(self.longest, *(len(text) for text in texts))
        return self.inner.encode_batch(texts)  # type: ignore[attr-defined]


def test_the_embedder_never_tokenizes_a_whole_huge_text() -> None:
    embedder = OnnxEmbedder(max_tokens=256)
    embedder.load_sync()
    recording = RecordingTokenizer(embedder._tokenizer)
    embedder._tokenizer = recording  # type: ignore[assignment]
    clipped = embedder.embed_sync([HUGE])
    assert recording.longest <= 256 * CHARS_PER_TOKEN_BOUND
    whole = embedder.embed_sync([HUGE[: 256 * CHARS_PER_TOKEN_BOUND]])
    np.testing.assert_allclose(clipped, whole, atol=1e-6)  # the model reads the same tokens


class CountingEmbedder:
    """Embeds with a gate, counting the calls in progress at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.gate = asyncio.Event()

    @property
    def id(self) -> str:
        return "counting"

    @property
    def ready(self) -> bool:
        return True

    async def load(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.running += 1
        self.most = max(self.most, self.running)
        await self.gate.wait()
        self.running -= 1
        rng = np.random.default_rng(len(texts))
        vectors = rng.normal(size=(len(texts), 4)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    async def aclose(self) -> None:
        return None


async def test_catalogue_builds_embed_one_at_a_time() -> None:
    embedder = CountingEmbedder()
    engine = SelectionEngine(
        embedder, vector_cache_size=1000, index_cache_size=8, timeout_s=5.0,  # type: ignore[arg-type]
        index_timeout_s=30.0, signals=PLAIN_SIGNALS, max_builds=1,
    )
    catalogs = [
        parse_tools([{"type": "function", "function": {"name": f"c{c}_t{i}", "description": f"d{c}"}}
                     for i in range(10)])
        for c in range(3)
    ]
    builds = [asyncio.create_task(engine.index_for(catalog, {})) for catalog in catalogs]
    while embedder.running == 0:  # noqa: ASYNC110 - yields until a build gets there
        await asyncio.sleep(0)
    for _ in range(50):  # let every build reach its slot or the embedder
        await asyncio.sleep(0)
    assert embedder.running == 1
    embedder.gate.set()
    results = await asyncio.gather(*builds)
    assert [index.n_tools for index, _ in results] == [10, 10, 10]
    assert embedder.most == 1


async def test_a_large_catalogue_is_embedded_in_bounded_calls_and_resumes_after_a_failure() -> None:
    from selection.indexes.tool_vectors import CHUNK_TEXTS

    class FailingOnce(CountingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.gate.set()
            self.calls: list[list[str]] = []

        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            self.calls.append(list(texts))
            if len(self.calls) == 2:
                raise EmbedderTimeout("the second call times out")
            return await super().embed(texts)

    embedder = FailingOnce()
    engine = SelectionEngine(
        embedder, vector_cache_size=10_000, index_cache_size=8, timeout_s=5.0,  # type: ignore[arg-type]
        index_timeout_s=30.0, signals=PLAIN_SIGNALS,
    )
    catalog = parse_tools([{"type": "function", "function": {"name": f"t{i}", "description": f"d{i}"}}
                           for i in range(2 * CHUNK_TEXTS + 10)])
    with pytest.raises(EmbedderTimeout, match="times out"):
        await engine.index_for(catalog, {})
    assert [len(call) for call in embedder.calls] == [CHUNK_TEXTS, CHUNK_TEXTS]
    index, _ = await engine.index_for(catalog, {})  # resumes: the first call's texts are cached
    assert index.n_tools == len(catalog)
    again = [text for call in embedder.calls[2:] for text in call]
    assert sorted(again) == sorted(embedder.calls[1] + [f"t{i}: d{i}" for i in range(2 * CHUNK_TEXTS, 2 * CHUNK_TEXTS + 10)])
    assert max(len(call) for call in embedder.calls) <= CHUNK_TEXTS


async def test_a_call_holds_at_most_chunk_chars_of_text_but_one_text_whatever_its_length() -> None:
    from selection.indexes.tool_vectors import CHUNK_CHARS

    embedder = CountingEmbedder()
    embedder.gate.set()
    calls: list[list[str]] = []
    original = embedder.embed

    async def recording(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        return await original(texts)

    embedder.embed = recording  # type: ignore[method-assign]
    engine = SelectionEngine(
        embedder, vector_cache_size=10_000, index_cache_size=8, timeout_s=5.0,  # type: ignore[arg-type]
        index_timeout_s=30.0, signals=PLAIN_SIGNALS,
    )
    texts = ["x" * 300 for _ in range(10)] + ["y" * (2 * CHUNK_CHARS)]
    texts = [f"{i} {text}" for i, text in enumerate(texts)]
    await engine.embed(texts)
    assert sorted(t for call in calls for t in call) == sorted(texts)
    assert all(sum(map(len, call)) <= CHUNK_CHARS or len(call) == 1 for call in calls)
