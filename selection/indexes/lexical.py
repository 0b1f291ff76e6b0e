"""BM25 over a catalogue's tool texts (library ``bm25s``): the index the lexical signal
(:mod:`selection.ranking.signals.bm25`), the group index and a catalogue still being embedded are
ranked by. Pure: no I/O.

A tool's text is its name as words, its description and its parameter names
(:func:`lexical_text`): the fields Anthropic's tool search tool matches in its BM25
variant. Tokenisation is ``bm25s.tokenize``: lower-cased words of two or more characters,
English stop words removed, no stemming; scoring Lucene BM25 with k1 = 1.5, b = 0.75
(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from selection.catalog.catalog import Catalog, Tool, name_words


def lexical_text(tool: Tool) -> str:
    """The text BM25 indexes for a tool: name words, description and parameter names."""
    properties = tool.parameters.get("properties")
    parameters = (
        " ".join(name_words(str(p)) for p in properties) if isinstance(properties, Mapping) else ""
    )
    return " ".join(part for part in (name_words(tool.name), tool.description, parameters) if part)


def bm25_tokens(texts: Sequence[str]) -> list[list[str]]:
    """The words BM25 sees of each text (``bm25s.tokenize``: lower-cased words of two or
    more characters, English stop words removed, no stemming), one list per text."""
    import bm25s

    return bm25s.tokenize(list(texts), return_ids=False, show_progress=False)


class LexicalIndex:
    """BM25 over one catalogue's :func:`lexical_text` (see the module docstring);
    ``build_s``: the seconds building it took."""

    def __init__(self, catalog: Catalog) -> None:
        import bm25s

        started = time.perf_counter()
        self._size = len(catalog)
        self._retriever = bm25s.BM25()
        if self._size:
            self._retriever.index(
                bm25_tokens([lexical_text(tool) for tool in catalog.tools]), show_progress=False
            )
        self.build_s = time.perf_counter() - started

    def scores(self, query: str) -> np.ndarray:
        """BM25 score per tool for ``query``, float32 ``(len(catalog),)``, normalised to
        [0, 1] by the best (all zeros when no query word is in the catalogue)."""
        return normalised_bm25(self._retriever, query, self._size)


def normalised_bm25(retriever: Any, query: str, size: int) -> np.ndarray:
    """The BM25 scores of ``query`` by ``retriever`` (a ``bm25s.BM25`` over ``size``
    texts tokenised by :func:`bm25_tokens`, or unindexed when ``size`` is 0), float32
    ``(size,)`` normalised to [0, 1] by the best (all zeros when no query word is in any
    text)."""
    tokens = bm25_tokens([query])[0] if query.strip() else []
    if not tokens or not size:
        return np.zeros(size, dtype=np.float32)
    raw = np.asarray(retriever.get_scores(tokens), dtype=np.float32)
    best = float(raw.max())
    return raw / best if best > 0 else np.zeros(size, dtype=np.float32)
