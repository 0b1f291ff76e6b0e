"""The learned signal: what the agent's own traffic taught about this catalogue
(:mod:`selection.learning.learned`): each tool gains ``gain × weight × max(0, cos(part, evidence) −
floor)`` for requests like those that led to it (Tool2Vec's idea, Moghaddam et al., 2024),
and, with a state that centres queries, the change in the dense cosines when the traffic's
common direction is taken off the query ("All-but-the-Top", Mu & Viswanath, ICLR 2018).
Nothing without a promoted state for the catalogue. Its detail is the boost alone, float32
``(len(catalog),)``: a tool admitted only thanks to it has reason ``learned``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class LearnedPrior(Signal):
    """The promoted state's boost (and centring) for the turn's query parts."""

    name = "learned"
    needs = frozenset({"learned", "dense"})

    @dataclass(frozen=True)
    class Params:
        #: Rank with the learned states promoted for a catalogue (``learn``; off: they are
        #: kept but not applied).
        learned_prior: bool = True

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        learned, vectors = inputs.learned, inputs.vectors
        if learned is None or vectors is None:
            return None
        boost = learned.boost(vectors)
        values = boost
        centred = learned.center(vectors)
        if centred is not vectors and inputs.index is not None:
            values = boost + inputs.index.best_scores(centred) - inputs.index.best_scores(vectors)
        return Contribution(values.astype(np.float32), boost)
