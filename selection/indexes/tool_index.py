"""Tool vectors and per-catalogue faiss indexes, both cached.

Each tool is indexed by several texts (:func:`tool_texts`); its score for a query is the
best of its texts' cosines. Vectors are cached by embedder id and text
(:mod:`selection.indexes.tool_vectors`), so a catalogue seen before costs no embedding and a
catalogue that changed by one tool costs that tool's texts only. Indexes (``faiss.IndexFlatIP`` over L2-normalised float32 vectors,
so inner product = cosine) are cached per (embedder, catalogue, examples).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from selection.catalog.catalog import Catalog, Tool, fingerprint, name_words

if TYPE_CHECKING:  # imported when the first index is built: ~15 MiB a proxy may never need
    import faiss


#: Default clip of a tool text, characters: past what a 256-token embedder reads.
MAX_TOOL_TEXT_CHARS = 2000


def tool_texts(
    tool: Tool, examples: Sequence[str] = (), max_chars: int = MAX_TOOL_TEXT_CHARS
) -> list[str]:
    """The texts a tool is indexed by: name words with the description; name words with
    the parameters (name and description each); each example utterance. Each is clipped
    to ``max_chars`` characters, so a huge description never reaches the tokenizer whole
    (the embedder would keep only its first tokens anyway)."""
    words = name_words(tool.name)
    description = tool.description[:max_chars]
    texts = [f"{words}: {description}" if description else words]
    parameters = tool.parameter_texts()
    if parameters:
        joined, size = [], 0
        for text in parameters:  # stop joining once past the clip
            if size > max_chars:
                break
            joined.append(text[:max_chars])
            size += len(joined[-1]) + 2
        texts.append(f"{words} ({'; '.join(joined)})")
    texts.extend(example[:max_chars] for example in examples if example.strip())
    return [text[:max_chars] for text in texts]


def encodable(text: str) -> str:
    """``text`` with lone surrogates (valid in JSON strings, not in UTF-8) replaced by
    U+FFFD, so every embedder and hash can encode it."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A bounded mapping that drops the least recently used entry first."""

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._data: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self._max <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        """The value for ``key``; when missing, ``build()``, stored and returned."""
        value = self.get(key)
        if value is None:
            value = build()
            self.put(key, value)
        return value


@dataclass(frozen=True)
class ToolIndex:
    """A faiss inner-product index over one catalogue's tool texts.

    ``owners[i]`` is the catalogue position of the tool that text ``i`` belongs to.
    """

    index: faiss.IndexFlatIP
    owners: np.ndarray  # int64, shape (n_texts,)
    n_tools: int

    @classmethod
    def build(cls, vectors: np.ndarray, owners: Sequence[int], n_tools: int) -> ToolIndex:
        """``vectors``: float32 (n_texts, d), rows L2-normalised."""
        import faiss

        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        return cls(index, np.asarray(owners, dtype=np.int64), n_tools)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Per-tool best cosine for one query vector.

        ``query``: float32, shape (d,), L2-normalised. Returns float32 shape (n_tools,);
        a tool with no text scores -1.
        """
        return self.best_scores(query.reshape(1, -1))

    def text_vectors(self) -> np.ndarray:
        """The indexed text vectors, float32 ``(n_texts, d)``: a view of the flat index's
        own storage (no copy; taken per call, so it never outlives a reallocation — the
        index is not added to after build). Read only."""
        import faiss

        n_texts = self.index.ntotal
        if n_texts == 0:
            return np.zeros((0, self.index.d), dtype=np.float32)
        vectors = faiss.rev_swig_ptr(self.index.get_xb(), n_texts * self.index.d)
        return vectors.reshape(n_texts, self.index.d)

    def best_scores(self, queries: np.ndarray) -> np.ndarray:
        """Per-tool best cosine over several query vectors (the parts of one query): for
        each tool, the max over its texts and over ``queries``.

        ``queries``: float32, shape (p, d), rows L2-normalised. Returns float32 shape
        (n_tools,); a tool with no text (or ``p`` = 0) scores -1. One matrix product
        against the index's vectors (faster than a faiss search ranking every text).
        """
        best = np.full(self.n_tools, -1.0, dtype=np.float32)
        if self.index.ntotal == 0 or queries.shape[0] == 0:
            return best
        similarities = np.asarray(queries, dtype=np.float32) @ self.text_vectors().T  # (p, n_texts)
        np.maximum.at(best, self.owners, similarities.max(axis=0))
        return best


def index_key(embedder_id: str, catalog: Catalog, examples: Mapping[str, Sequence[str]]) -> str:
    """Cache key of a catalogue's index: embedder, catalogue and the examples that apply."""
    relevant = {name: list(examples[name]) for name in catalog.names if name in examples}
    return fingerprint([embedder_id, catalog.fingerprint, relevant])
