"""Ranking a catalogue for one turn: the ranking signals in the registry's order
(:mod:`selection.ranking.signals.registry`), each adding its contribution to the scores of those
before it. With the defaults, a tool's score is its dense cosine + 0.1 × the whole query's
normalised BM25 + 0.2 × its name-word coverage, drawn toward its group's match, plus what
the agent's traffic taught. A weighted sum of normalised scores rather than reciprocal
rank fusion: RRF throws away the score gaps that adaptive k reads (and measured worse,
docs/measured.md "Ranking"). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from selection.ranking.group_ranking import GroupMatch
from selection.ranking.signals.base import Contribution, Signal, SignalInputs


@dataclass(frozen=True)
class Ranking:
    """One turn's scores. ``values``: float32 ``(len(catalog),)``, the sum of the signals'
    contributions in catalogue order; ``contributions``: each signal's, by name (what the
    decision log reports and ``toolprune eval --ablate`` takes apart); ``embedding_s``:
    seconds spent embedding (the query and any tool texts it waited for);
    ``lexical_only``: the catalogue's dense index was being built and nothing of it was
    embedded in time, so ``values`` is the normalised BM25 score alone, in [0, 1];
    ``partial``: the index was being built and the dense cosines are those of the texts
    embedded so far (-1 for a tool with none); ``query_vector``: the whole query's vector,
    float32 ``(d,)``, what the usage log keeps instead of its text when learning is on."""

    values: np.ndarray
    contributions: Mapping[str, Contribution] = field(default_factory=dict)
    embedding_s: float = 0.0
    lexical_only: bool = False
    partial: bool = False
    query_vector: np.ndarray | None = None

    @classmethod
    def of(
        cls, values: np.ndarray, *, named: np.ndarray | None = None,
        boost: np.ndarray | None = None,
    ) -> Ranking:
        """A ranking of ``values`` (float32 ``(n,)``) alone, with the name signal's
        ``named`` tools and the learned signal's ``boost`` (already in ``values``) when
        given: what a replay of scores computed elsewhere selects by."""
        values = np.asarray(values, dtype=np.float32)
        contributions: dict[str, Contribution] = {}
        if named is not None:
            contributions["name"] = Contribution(np.zeros_like(values), named)
        if boost is not None:
            contributions["learned"] = Contribution(np.asarray(boost, dtype=np.float32), boost)
        return cls(values, contributions)

    def _detail(self, name: str) -> object:
        contribution = self.contributions.get(name)
        return None if contribution is None else contribution.detail

    def without(self, name: str) -> np.ndarray:
        """``values`` less signal ``name``'s contribution (float32 ``(len(catalog),)``):
        the ranking the other signals give (a signal that transforms, as the group
        signal does, is undone only as it added)."""
        contribution = self.contributions.get(name)
        if contribution is None:
            return self.values
        return (self.values - contribution.values).astype(np.float32)

    @property
    def dense(self) -> np.ndarray | None:
        """The dense signal's contribution (the cosines), float32 ``(len(catalog),)``."""
        contribution = self.contributions.get("dense")
        return None if contribution is None else contribution.values

    @property
    def named(self) -> np.ndarray | None:
        """The tools a one-intent request names, bool ``(len(catalog),)`` (the name
        signal's detail); None when it asks for more, or without the name signal."""
        named = self._detail("name")
        return named if isinstance(named, np.ndarray) else None

    @property
    def groups(self) -> GroupMatch | None:
        """The groups' part of the ranking (the group signal's detail), or None."""
        match = self._detail("groups")
        return match if isinstance(match, GroupMatch) else None

    @property
    def boost(self) -> np.ndarray | None:
        """The learned boost in ``values``, float32 ``(len(catalog),)``, or None."""
        boost = self._detail("learned")
        return boost if isinstance(boost, np.ndarray) else None


def rank(inputs: SignalInputs, signals: Sequence[Signal]) -> Ranking:
    """The ``signals``' scores for one turn, each given the sum of those before it."""
    values = np.zeros(len(inputs.catalog), dtype=np.float32)
    contributions: dict[str, Contribution] = {}
    for signal in signals:
        contribution = signal.score(inputs, values)
        if contribution is None:
            continue
        contributions[signal.name] = contribution
        values = (values + contribution.values).astype(np.float32)
    return Ranking(values, contributions)


def lexical_ranking(scores: np.ndarray) -> Ranking:
    """The ranking of a turn on a catalogue with nothing embedded yet: its normalised
    BM25 ``scores`` (float32 ``(len(catalog),)``, in [0, 1]) alone."""
    return Ranking(np.asarray(scores, dtype=np.float32), lexical_only=True)
