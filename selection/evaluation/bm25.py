"""The BM25 anchor of ``toolprune eval`` (library ``bm25s``): Anthropic's tool-search tool
in its BM25 variant ranks tools by BM25 over their names and descriptions, top-k.

Each tool is one document: its name split into words plus its description (the same
name words the embedding index uses). Tokenisation is ``bm25s.tokenize``: lower-cased,
words of two or more characters, English stop words removed, no stemming. Scores are
BM25 (Lucene variant, k1=1.5, b=0.75), not cosines: a threshold τ means nothing for
them, so the evaluation ranks BM25 by pure top-k.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from selection.catalog.catalog import Catalog, Tool, name_words
from selection.choosing.selector import DEFAULT_EXPANSIONS
from selection.evaluation.methods import BM25, METHODS
from selection.indexes.lexical import bm25_tokens
from selection.indexes.tool_index import LRUCache
from selection.ranking.pipeline import Ranking


def bm25_text(tool: Tool) -> str:
    """The text a tool is indexed by: name words and description."""
    words = name_words(tool.name)
    return f"{words} {tool.description}" if tool.description else words


class BM25Scorer:
    """Scores a catalogue against a query with BM25; one index per catalogue (LRU).
    Replayed as its own top-k anchor, bundle-mates and no dependencies."""

    name = "bm25"
    #: BM25 scores are not cosines: τ is not applied to them.
    uses_threshold = False
    expansions = DEFAULT_EXPANSIONS
    methods = (METHODS[BM25],)

    def __init__(self, index_cache_size: int = 64) -> None:
        self._indexes: LRUCache[str, object] = LRUCache(index_cache_size)

    def _index(self, catalog: Catalog) -> tuple[object, float]:
        import bm25s

        retriever = self._indexes.get(catalog.fingerprint)
        if retriever is not None:
            return retriever, 0.0
        started = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(bm25_tokens([bm25_text(tool) for tool in catalog.tools]), show_progress=False)
        self._indexes.put(catalog.fingerprint, retriever)
        return retriever, time.perf_counter() - started

    async def prepare(self, catalog: Catalog) -> float:
        """Build the catalogue's index if needed; the seconds it took."""
        return self._index(catalog)[1]

    async def score(
        self, catalog: Catalog, query: str | Sequence[str]
    ) -> Ranking:
        """BM25 score per catalogue tool, float32 ``(len(catalog),)``; no embedding (0 s).
        ``query``: a text, or query parts (only the first, the whole query, is used)."""
        retriever, _ = self._index(catalog)
        text = query if isinstance(query, str) else (query[0] if query else "")
        tokens = bm25_tokens([text])[0]
        if not tokens or len(catalog) == 0:
            return Ranking(np.zeros(len(catalog), dtype=np.float32))
        scores = retriever.get_scores(tokens)  # type: ignore[attr-defined]
        return Ranking(np.asarray(scores, dtype=np.float32))
