"""The guard of learned selection: replay held-back requests of the traffic through the
dense part of the proxy's ranking, with a candidate state and with the state in use, and
decide whether the candidate is better and with which ``gain`` and ``centering``
(:mod:`selection.learned`). Pure: no I/O (:mod:`proxy.usage.learning` reads the log,
splits it into folds and records the outcome).

A candidate is judged as cross-validation: each fold's requests are ranked by a candidate
learned from the other folds. Every pair of :data:`GAINS` × :data:`CENTERINGS` but
(0, 0) is tried on the same folds; the best mean recall@k wins if it beats the state in
use and does not cost the *untouched* requests — held-back requests none of whose tools
the candidate's teaching folds ever called, the stand-ins for tools nobody used yet —
more than :data:`UNTOUCHED_TOLERANCE` of their mean recall@k. Ties go to the smaller
gain, then the smaller centering. A few lucky requests must not promote a state: the
mean of the per-request differences (chosen − in use) must exceed
:data:`STANDARD_ERRORS` standard errors (a one-sided paired t statistic above 2, since
the chosen pair is the best of seven tried on the same requests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog import Catalog
from selection.learned import LearnedIndex, LearnedState

#: Boosts the guard chooses among (0: none; see :data:`selection.learned.GAIN`).
GAINS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
#: Shares of the traffic's mean query vector taken off a query vector before the dense
#: ranking, that the guard chooses among (0: none).
CENTERINGS: tuple[float, ...] = (0.0, 0.5)
#: Most mean recall@k the untouched held-back requests may lose to a promotion: the loss
#: the goal allows never-called tools (none made ToolBench's guard pick a pair whose replay
#: lost nothing and that lost more on cases it never saw: 0.032 against 0.014).
UNTOUCHED_TOLERANCE = 0.01
#: How many standard errors the mean per-request gain must exceed.
STANDARD_ERRORS = 2.0


@dataclass(frozen=True)
class HeldBack:
    """One held-back request: ``vector`` float32 (d,), L2-normalised, its query vector;
    ``tools``: the tools its calls used; ``untouched``: none of them was called in the
    teaching folds."""

    vector: np.ndarray
    tools: tuple[str, ...]
    untouched: bool


@dataclass(frozen=True)
class Fold:
    """A candidate learned from the other folds, and the requests it is judged on."""

    candidate: LearnedState
    held: Sequence[HeldBack]


@dataclass(frozen=True)
class Judgement:
    """Mean recall@k over every held-back request (``before``: the state in use, or the
    unlearned ranking; ``after``: the chosen candidate), the same over the ``untouched``
    ones (how many), the chosen ``gain`` and ``centering``, and whether it is ``better``."""

    before: float
    after: float
    untouched: int
    untouched_before: float
    untouched_after: float
    gain: float
    centering: float
    better: bool


def dense_scores(
    held: Sequence[HeldBack],
    best_scores: Callable[[np.ndarray], np.ndarray],
    learned: LearnedIndex | None,
) -> list[np.ndarray]:
    """Per held-back request, float32 ``(n_tools,)``: ``best_scores`` (the catalogue
    index's per-tool best cosine for float32 (1, d) queries,
    :meth:`selection.index.ToolIndex.best_scores`) of its query vector, centred by
    ``learned`` (as it is without): the dense part of the replayed ranking, which depends
    on a state's centring but not on its gain."""
    return [
        best_scores(learned.center(query) if learned is not None else query)
        for query in (request.vector.reshape(1, -1) for request in held)
    ]


def recalls(
    held: Sequence[HeldBack],
    dense: Sequence[np.ndarray],
    catalog: Catalog,
    learned: LearnedIndex | None,
    k: int,
) -> np.ndarray:
    """Recall@k of each held-back request, float64 ``(len(held),)``: ranked by its
    ``dense`` scores (:func:`dense_scores` with the same ``learned``) plus ``learned``'s
    boost (none: the unlearned dense ranking)."""
    out = np.ones(len(held), dtype=np.float64)
    for i, (request, scores) in enumerate(zip(held, dense, strict=True)):
        if learned is not None:
            scores = scores + learned.boost(request.vector.reshape(1, -1))
        top = set(np.argsort(-scores, kind="stable")[:k].tolist())
        wanted = {catalog.index_of(name) for name in request.tools} - {None}
        if wanted:
            out[i] = sum(position in top for position in wanted) / len(wanted)
    return out


def judge(
    folds: Sequence[Fold],
    in_use: LearnedState | None,
    catalog: Catalog,
    best_scores: Callable[[np.ndarray], np.ndarray],
    k: int,
) -> Judgement:
    """Judge the folds' candidates against ``in_use`` (module docstring)."""
    held = [request for fold in folds for request in fold.held]
    untouched = np.asarray([request.untouched for request in held], dtype=bool)
    bound = LearnedIndex.bind(in_use, catalog) if in_use is not None else None
    before = recalls(held, dense_scores(held, best_scores, bound), catalog, bound, k)
    dense: dict[tuple[int, float], list[np.ndarray]] = {}  # (fold, centering) → its rows
    best: tuple[np.ndarray, float, float] | None = None  # per-request recalls, gain, centering
    for gain in GAINS:
        for centering in CENTERINGS:
            if gain == 0 and centering == 0:
                continue
            parts = []
            for position, fold in enumerate(folds):
                learned = LearnedIndex.bind(
                    dataclasses.replace(fold.candidate, gain=gain, centering=centering), catalog
                )
                if (position, centering) not in dense:
                    dense[(position, centering)] = dense_scores(fold.held, best_scores, learned)
                rows = dense[(position, centering)]
                parts.append(recalls(fold.held, rows, catalog, learned, k))
            after = np.concatenate(parts)
            spared = _mean(after[untouched]) >= _mean(before[untouched]) - UNTOUCHED_TOLERANCE
            if spared and (best is None or after.mean() > best[0].mean()):
                best = (after, gain, centering)
    if best is None:  # every candidate cost the untouched requests
        best = (before, 0.0, 0.0)
    after, gain, centering = best
    return Judgement(float(before.mean()), float(after.mean()), int(untouched.sum()),
                     _mean(before[untouched]), _mean(after[untouched]), gain, centering,
                     _significant(after - before))


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else 0.0


def _significant(differences: np.ndarray) -> bool:
    """Whether the mean of paired ``differences`` is above zero by more than
    :data:`STANDARD_ERRORS` standard errors (one-sided paired t)."""
    if len(differences) < 2 or differences.mean() <= 0:
        return False
    spread = float(differences.std(ddof=1)) / np.sqrt(len(differences))
    return float(differences.mean()) > STANDARD_ERRORS * spread
