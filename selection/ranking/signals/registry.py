"""Every ranking signal and expansion, in pipeline order: the one place a new one is
registered.

Ranking signals (:class:`~selection.ranking.signals.base.Signal`) score every tool, each adding its
contribution to the scores of those before it; expansions
(:class:`~selection.ranking.signals.expansion.Expansion`) bring more tools with the ones a turn
admits. Each is switched by its first setting (``TOOLPRUNE_<FIELD>``, 0 or false: off;
the name signal by both of its two: :class:`~selection.ranking.signals.names.NameMatch`) and
named by its ``name`` in ``toolprune eval --ablate``. Adding one: a module in this package,
a line here, its setting in ``config/`` (the field its ``Params`` names), a test.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from selection.ranking.signals.base import Need, Signal
from selection.ranking.signals.bm25 import Bm25
from selection.ranking.signals.bundles import BundleMates
from selection.ranking.signals.dense import Dense
from selection.ranking.signals.dependencies import Dependencies
from selection.ranking.signals.expansion import Expansion
from selection.ranking.signals.groups import GroupBlend
from selection.ranking.signals.learned import LearnedPrior
from selection.ranking.signals.names import NameMatch

#: The ranking signals, in the order their contributions are added (a signal that
#: transforms the scores, as the group signal does, sees those of the signals before it).
SIGNALS: tuple[type[Signal], ...] = (Dense, Bm25, NameMatch, GroupBlend, LearnedPrior)
#: The expansions.
EXPANSIONS: tuple[type[Expansion], ...] = (Dependencies, BundleMates)
#: Every name ``--ablate`` takes.
NAMES: tuple[str, ...] = tuple(kind.name for kind in (*SIGNALS, *EXPANSIONS))


@dataclass(frozen=True)
class Signals:
    """The signals and expansions a selector runs: those switched on, in registry order."""

    ranking: tuple[Signal, ...]
    expansions: tuple[Expansion, ...]

    @classmethod
    def from_values(cls, values: Mapping[str, Any], without: Collection[str] = ()) -> Signals:
        """Those ``values`` (setting name → value; a missing one keeps its default) switch
        on, less the ones named in ``without``. Raises ValueError for a name in ``without``
        that is not registered."""
        unknown = set(without) - set(NAMES)
        if unknown:
            raise ValueError(f"unknown signal {sorted(unknown)[0]!r}; known: {', '.join(NAMES)}")
        return cls(
            tuple(kind.from_values(values) for kind in SIGNALS
                  if kind.name not in without and kind.switched_on(values)),
            tuple(kind.from_values(values) for kind in EXPANSIONS
                  if kind.name not in without and kind.switched_on(values)),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(item.name for item in (*self.ranking, *self.expansions))

    @property
    def needs(self) -> frozenset[Need]:
        """What the engine must prepare for these signals."""
        return frozenset(need for signal in self.ranking for need in signal.needs)

    def get(self, name: str) -> Signal | Expansion | None:
        return next((item for item in (*self.ranking, *self.expansions) if item.name == name), None)

    def without(self, *names: str) -> Signals:
        """These signals less ``names``."""
        return Signals(tuple(s for s in self.ranking if s.name not in names),
                       tuple(e for e in self.expansions if e.name not in names))
