"""The group signal: a grouped tool's score drawn toward its group's match (servers,
namespaces, toolkits; :func:`selection.ranking.group_ranking.rank_with_groups`, after
Tool-to-Agent Retrieval, arXiv 2511.01854). It transforms the scores before it, so it
comes after the signals it blends; its detail is the turn's
:class:`~selection.ranking.group_ranking.GroupMatch` (the decision log's ``groups`` and
``through_group``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from selection.ranking.group_ranking import GroupRanking, rank_with_groups
from selection.ranking.signals.base import Contribution, Signal, SignalInputs


class GroupBlend(Signal):
    """``rank_with_groups(scores) − scores``: the pull toward the group's best tool, plus
    the group's BM25 and vector match."""

    name = "groups"
    needs = frozenset({"groups"})

    @dataclass(frozen=True)
    class Params:
        #: Pull of a grouped tool's score toward its group's best (0 with the two weights
        #: below: off).
        group_weight: float = 0.3
        #: Weight of the group's normalised BM25 match.
        group_lexical_weight: float = 0.2
        #: Weight of the cosine of the query against the group's mean vector.
        group_vector_weight: float = 0.0
        #: Groups of more tools than this are pulled proportionally less (0: all alike).
        group_size: int = 4

    @classmethod
    def switched_on(cls, values: Mapping[str, Any]) -> bool:
        """On when any of its three weights is set."""
        defaults = {f.name: f.default for f in fields(cls.Params)}
        weights = ("group_weight", "group_lexical_weight", "group_vector_weight")
        return any(values.get(name, defaults[name]) for name in weights)

    @property
    def ranking(self) -> GroupRanking:
        """The knobs as :func:`~selection.ranking.group_ranking.rank_with_groups` takes them."""
        params = self.params
        return GroupRanking(params.group_weight, params.group_lexical_weight,
                            params.group_vector_weight, float(params.group_size))

    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        if inputs.groups is None or not inputs.parts:
            return None
        match = rank_with_groups(scores, inputs.groups, inputs.query, inputs.vectors, self.ranking)
        return Contribution((match.values - scores).astype(np.float32), match)
