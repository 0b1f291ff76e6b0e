"""What a ranking signal is: one interface, :meth:`Signal.score`, over one turn's inputs.

A signal reads what the engine prepared for the turn (:class:`SignalInputs`: the query,
its vectors and the catalogue's indexes; the engine does every embedding and disk read)
and the scores of the signals before it, and returns its contribution, added to those
scores. Pure: no I/O, no clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, Self

import numpy as np

from selection.catalog.catalog import Catalog
from selection.indexes.lexical import LexicalIndex
from selection.indexes.name_match import NameIndex
from selection.indexes.tool_index import ToolIndex
from selection.learning.learned import LearnedIndex
from selection.ranking.group_ranking import GroupIndex


@dataclass(frozen=True)
class SignalInputs:
    """One turn's ranking inputs, prepared by :meth:`selection.ranking.engine.SelectionEngine.inputs`.

    ``parts``: the query's parts, the whole query first (:func:`selection.conversation.query.query_parts`).
    ``vectors``: their embeddings, float32 ``(len(parts), d)``, rows L2-normalised (None:
    not embedded). ``index``: the catalogue's dense index (``partial``: being built, tools
    not embedded yet score -1; None: none). ``lexical``: its BM25 index, ``names`` its name
    words, ``groups`` its group index (None when its groups do not shape the ranking or the
    index is partial), ``learned`` its learned state (None: none). Each is None when no
    enabled signal needs it."""

    catalog: Catalog
    parts: tuple[str, ...]
    vectors: np.ndarray | None = None
    index: ToolIndex | None = None
    partial: bool = False
    lexical: LexicalIndex | None = None
    names: NameIndex | None = None
    groups: GroupIndex | None = None
    learned: LearnedIndex | None = None

    @property
    def query(self) -> str:
        """The whole query (the first part; empty when there is none)."""
        return self.parts[0] if self.parts else ""


@dataclass(frozen=True)
class Contribution:
    """A signal's part of one turn's scores: ``values`` float32 ``(len(catalog),)``, added
    to the scores before it; ``detail``: what else it found, for the decision log and the
    candidate rules (the name signal's named tools, the group signal's match…)."""

    values: np.ndarray
    detail: Any = None


#: What a signal can ask the engine to prepare: the :class:`SignalInputs` field of that name
#: (``dense``: ``vectors`` and ``index``).
Need = Literal["dense", "lexical", "names", "groups", "learned"]


class Configured:
    """What signals and expansions share: a frozen dataclass :attr:`Params` of their knobs,
    whose fields are named as the settings that set them (``TOOLPRUNE_<FIELD>``); its
    first field switches them (0 or False: off)."""

    Params: ClassVar[type]

    def __init__(self, params: Any) -> None:
        self.params = params

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Self:
        """Built with the knobs of ``values`` (setting name → value; a knob missing from it
        keeps its default)."""
        known = {f.name: values[f.name] for f in fields(cls.Params) if f.name in values}
        return cls(cls.Params(**known))

    @classmethod
    def switched_on(cls, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` leave it on (its first knob is not 0 or False)."""
        first = fields(cls.Params)[0]
        return bool(values.get(first.name, first.default))


class Signal(Configured, ABC):
    """A ranking signal. Subclasses set :attr:`name` (its registry key and the name
    ``toolprune eval --ablate`` takes), :attr:`needs` and :attr:`Params`
    (:class:`Configured`)."""

    name: ClassVar[str]
    needs: ClassVar[frozenset[Need]] = frozenset()

    @abstractmethod
    def score(self, inputs: SignalInputs, scores: np.ndarray) -> Contribution | None:
        """This signal's contribution for the turn (None: nothing to add), given the scores
        of the signals before it (float32 ``(len(catalog),)``; zeros for the first)."""
