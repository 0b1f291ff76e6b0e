"""What an expansion is: a rule that brings more tools with the ones a turn admits, one
interface, :meth:`Expansion.expand`. Ranking signals decide *which* tools a turn wants;
expansions add the tools those need beside them (the producers of an identifier, the rest
of a bundle). Pure: no I/O."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

import numpy as np

from selection.catalog import Catalog
from selection.groups import CatalogGroups


@dataclass(frozen=True)
class ExpansionInputs:
    """What a turn's expansions read: the catalogue, the turn's fused scores (float32
    ``(len(catalog),)``), τ (a tool an expansion adds scores at least this), the
    catalogue's groups (None: not ranked by groups) and its bundle mates (tool → the
    other members of its bundles, :attr:`selection.policy.CatalogLayout.mates`)."""

    catalog: Catalog
    scores: np.ndarray
    threshold: float
    groups: CatalogGroups | None
    mates: Mapping[str, tuple[str, ...]]


class Expansion(ABC):
    """An expansion. Subclasses set :attr:`name` (registry key, ``--ablate`` name),
    :attr:`budgeted` (True: its tools share the candidates' token budget and count,
    admitted right after their parent; False: admitted after every candidate, into
    whatever room the caps leave) and a frozen dataclass :attr:`Params` whose fields are
    named as the settings that set them; its first field switches it (0 or False: off)."""

    name: ClassVar[str]
    budgeted: ClassVar[bool]
    Params: ClassVar[type]

    def __init__(self, params: Any) -> None:
        self.params = params

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Self:
        """The expansion with the knobs of ``values`` (setting name → value)."""
        known = {f.name: values[f.name] for f in fields(cls.Params) if f.name in values}
        return cls(cls.Params(**known))

    @classmethod
    def switched_on(cls, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` leave the expansion on (its first knob is not 0 or False)."""
        first = fields(cls.Params)[0]
        return bool(values.get(first.name, first.default))

    @abstractmethod
    def expand(
        self, inputs: ExpansionInputs, parent: str, present: set[str], room: int
    ) -> list[str]:
        """The tools ``parent`` brings, at most ``room``, none of ``present``, in
        admission order."""
