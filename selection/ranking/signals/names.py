"""The name signal: the share of each tool's name words that the request uses
(:meth:`selection.indexes.name_match.NameIndex.coverage`), times ``name_weight``. "list the open
pull requests" uses every word of ``list_pull_requests`` and only some of
``pull_request_read``'s, which the embedder scores alike. Its detail is the tools a
one-intent request names (:meth:`~selection.indexes.name_match.NameIndex.named`; None when the
request asks for more than one thing), which the candidate rule reads
(``CandidatePolicy.named_only``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selection.indexes.name_match import one_intent
from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class NameMatch(Signal):
    """Name-word coverage of the whole query, in [0, 1] before its weight."""

    name = "name"
    needs = frozenset({"names"})

    @dataclass(frozen=True)
    class Params:
        #: Weight of the share of a tool's name words the request uses (0: off).
        name_weight: float = 0.2

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        if inputs.names is None or not inputs.parts:
            return None
        coverage = inputs.names.coverage(inputs.query)
        named = inputs.names.named(inputs.query) if one_intent(inputs.parts) else None
        return Contribution(np.float32(self.params.name_weight) * coverage, named)
