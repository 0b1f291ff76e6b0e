"""What an expansion is: a rule that brings more tools with the ones a turn admits, one
interface, :meth:`Expansion.expand`. Ranking signals decide *which* tools a turn wants;
expansions add the tools those need beside them (the producers of an identifier, the rest
of a bundle). Pure: no I/O."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.groups import CatalogGroups
from selection.ranking.signals.base import Configured


@dataclass(frozen=True)
class ExpansionInputs:
    """What a turn's expansions read: the catalogue, the turn's fused scores (float32
    ``(len(catalog),)``), τ (a tool an expansion adds scores at least this), the
    catalogue's groups (None: not ranked by groups) and its bundle mates (tool → the
    other members of its bundles, :attr:`selection.catalog.policy.CatalogLayout.mates`)."""

    catalog: Catalog
    scores: np.ndarray
    threshold: float
    groups: CatalogGroups | None
    mates: Mapping[str, tuple[str, ...]]


class Expansion(Configured, ABC):
    """An expansion. Subclasses set :attr:`name` (registry key, ``--ablate`` name),
    :attr:`budgeted` (True: its tools share the candidates' token budget and count,
    admitted right after their parent; False: admitted after every candidate, into
    whatever room the caps leave) and :attr:`Params`
    (:class:`~selection.ranking.signals.base.Configured`)."""

    name: ClassVar[str]
    budgeted: ClassVar[bool]

    @abstractmethod
    def expand(
        self, inputs: ExpansionInputs, parent: str, present: set[str], room: int
    ) -> list[str]:
        """The tools ``parent`` brings, at most ``room``, none of ``present``, in
        admission order."""
