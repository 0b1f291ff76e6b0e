"""The dense signal: each tool's best cosine between its texts' embeddings and the query's
parts (:meth:`selection.indexes.tool_index.ToolIndex.best_scores`), times ``dense_weight``. GAIA's tool
loader ranks by this alone."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class Dense(Signal):
    """Cosine of the best query part against the best tool text (a tool with no text
    embedded yet: -1)."""

    name = "dense"
    needs = frozenset({"dense"})

    @dataclass(frozen=True)
    class Params:
        #: Weight of the cosine (0: the dense signal is off).
        dense_weight: float = 1.0

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        if inputs.index is None or inputs.vectors is None:
            return None
        cosines = inputs.index.best_scores(inputs.vectors)
        weight = self.params.dense_weight
        return Contribution(cosines if weight == 1 else np.float32(weight) * cosines)
