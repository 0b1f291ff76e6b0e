"""A turn's score per tool, read by name, and its best tools, without walking the catalogue.

The ranking gives one float32 score per catalogue tool. Choosing reads a few of them by
name and asks for the few best: at 10,000 tools a ``{name: score}`` dict or a full sort
per request costs milliseconds of Python for a handful of lookups. :class:`TurnScores`
reads the array in place, and :func:`best_positions` finds the ``n`` best with a
partition (numpy, linear) and sorts those alone, in the order a stable sort of the whole
array gives (score descending, ties in catalogue order).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from selection.catalog.catalog import Catalog


def best_positions(scores: np.ndarray, n: int) -> np.ndarray:
    """The positions of the ``n`` best ``scores`` (float ``(len,)``), best first, ties in
    position order: the first ``n`` of ``np.argsort(-scores, kind="stable")``, int64."""
    size = len(scores)
    if n >= size:
        return np.argsort(-scores, kind="stable")
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    negated = -np.asarray(scores)
    edge = np.partition(negated, n - 1)[n - 1]  # the n-th best score, negated
    contenders = np.flatnonzero(negated <= edge)  # every tie at the edge, in order
    return contenders[np.argsort(negated[contenders], kind="stable")][:n]


class TurnScores(Mapping[str, float]):
    """The turn's scores by tool name (a view of ``scores``, float ``(len(catalog),)``:
    nothing is copied), and its best tools (:meth:`best`)."""

    def __init__(self, catalog: Catalog, scores: np.ndarray) -> None:
        self.catalog = catalog
        self.scores = scores

    def __getitem__(self, name: str) -> float:
        position = self.catalog.index_of(name)
        if position is None:
            raise KeyError(name)
        return float(self.scores[position])

    def __iter__(self) -> Iterator[str]:
        return iter(self.catalog.names)

    def __len__(self) -> int:
        return len(self.catalog)

    def best(self, n: int) -> list[str]:
        """The names of the ``n`` best-scored tools, best first, ties in catalogue
        order (as ``heapq.nlargest`` over a ``{name: score}`` dict in catalogue order)."""
        tools = self.catalog.tools
        return [tools[p].name for p in best_positions(self.scores, n).tolist()]
