"""The name signal: the share of each tool's name words that the request uses
(:meth:`selection.indexes.name_match.NameIndex.coverage`), times ``name_weight``. "list the open
pull requests" uses every word of ``list_pull_requests`` and only some of
``pull_request_read``'s, which the embedder scores alike. Its detail is the tools a
one-intent request names (:meth:`~selection.indexes.name_match.NameIndex.named`; None when the
request asks for more than one thing, or with ``named_only`` off), which the candidate
rule reads (``CandidatePolicy.named_only``). Two knobs, two effects: ``name_weight`` 0
takes the score out of the ranking and leaves the named tools; ``named_only`` off leaves
the score; the signal runs while either is on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from selection.indexes.name_match import one_intent
from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class NameMatch(Signal):
    """Name-word coverage of the whole query, in [0, 1] before its weight."""

    name = "name"
    needs = frozenset({"names"})

    @dataclass(frozen=True)
    class Params:
        #: Weight of the share of a tool's name words the request uses (0: no score).
        name_weight: float = 0.2
        #: Report the tools a one-intent request names (the named-only rule's input).
        named_only: bool = True

    @classmethod
    def switched_on(cls, values: Mapping[str, Any]) -> bool:
        """On while its score or the named tools are wanted (``name_weight`` > 0 or
        ``named_only``)."""
        defaults = cls.Params()
        return bool(values.get("name_weight", defaults.name_weight)
                    or values.get("named_only", defaults.named_only))

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        if inputs.names is None or not inputs.parts:
            return None
        weight = np.float32(self.params.name_weight)
        values = (weight * inputs.names.coverage(inputs.query) if weight
                  else np.zeros(len(inputs.catalog), dtype=np.float32))
        named = (inputs.names.named(inputs.query)
                 if self.params.named_only and one_intent(inputs.parts) else None)
        return Contribution(values, named)
