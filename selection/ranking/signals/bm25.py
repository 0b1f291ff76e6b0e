"""The BM25 signal: the whole query's BM25 score over each tool's name words, description
and parameter names (:class:`selection.indexes.lexical.LexicalIndex`), normalised by the turn's
best, times ``lexical_weight``: a request that uses a tool's own words finds it where the
embedder prefers another."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class Bm25(Signal):
    """Normalised BM25 of the whole query (``parts[0]``), in [0, 1] before its weight."""

    name = "bm25"
    needs = frozenset({"lexical"})

    @dataclass(frozen=True)
    class Params:
        #: Weight of the normalised BM25 score (0: off).
        lexical_weight: float = 0.1

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        if inputs.lexical is None or not inputs.parts:
            return None
        return Contribution(np.float32(self.params.lexical_weight) * inputs.lexical.scores(inputs.query))
