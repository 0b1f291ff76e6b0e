"""The guard of learned selection: replay held-back requests of the traffic through the
proxy's ranking, with a candidate state and with the state in use, and decide whether the
candidate is better and with which ``gain`` and ``centering`` (:mod:`selection.learning.learned`).
Pure: no I/O (:mod:`proxy.usage.learning` reads the log, splits it into folds and records
the outcome).

A request is replayed from the ranking the proxy logged for it
(:mod:`selection.learning.logged_ranking`: its fused scores with every term, BM25, name match and
groups included, which the query vector alone cannot give back), with the candidate's
boost added and, for a candidate whose centring differs from the state in use, the change
centring makes to the dense part. A request logged without a ranking (by an older proxy)
is replayed through the dense part alone.

A candidate is judged as cross-validation: each fold's requests are ranked by a candidate
learned from the other folds. Every pair of :data:`GAINS` × :data:`CENTERINGS` but
(0, 0) is tried on the same folds. A pair that costs the *untouched* requests —
held-back requests none of whose tools the candidate's teaching folds ever called, the
stand-ins for tools nobody used yet — more than :data:`UNTOUCHED_TOLERANCE` of their mean
recall@k is out. A few lucky requests must not promote a state: of the others, the pair
whose gain is surest wins — the highest lower bound of the mean per-request difference
(candidate − in use) less :data:`STANDARD_ERRORS` standard errors — and is promoted when
that bound is above zero (a one-sided paired t statistic above 2, since the pair is the
best of seven tried on the same requests). Ties go to the smaller gain, then the smaller
centering. Choosing by the largest mean instead let a pair with a larger but noisier
gain veto a sure one: ToolBench's teaching half was rejected on gain 1 and centring 0.5
(+0.018, t = 1.7) while gain 0.5 alone gained +0.016 at t = 2.1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog
from selection.learning.learned import LearnedIndex, LearnedState
from selection.learning.logged_ranking import LoggedRanking

#: Boosts the guard chooses among (0: none; see :data:`selection.learning.learned.GAIN`).
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
    teaching folds; ``ranking``: the proxy's unboosted ranking of it (None: not logged)."""

    vector: np.ndarray
    tools: tuple[str, ...]
    untouched: bool
    ranking: LoggedRanking | None = None


@dataclass(frozen=True)
class Fold:
    """A candidate learned from the other folds, and the requests it is judged on."""

    candidate: LearnedState
    held: Sequence[HeldBack]


@dataclass(frozen=True)
class Judgement:
    """Mean recall@k over every held-back request (``before``: the state in use, or the
    unlearned ranking; ``after``: the chosen candidate), the same over the ``untouched``
    ones (how many), the chosen ``gain`` and ``centering``, and whether it is ``better``
    (its gain's lower bound is above zero)."""

    before: float
    after: float
    untouched: int
    untouched_before: float
    untouched_after: float
    gain: float
    centering: float
    better: bool


def base_scores(
    held: Sequence[HeldBack],
    catalog: Catalog,
    best_scores: Callable[[np.ndarray], np.ndarray],
    learned: LearnedIndex | None,
    logged: LearnedIndex | None,
) -> list[np.ndarray]:
    """Per held-back request, float32 ``(len(catalog),)``: the replayed ranking before a
    boost, which depends on a state's centring but not on its gain. A request with a
    logged ranking: its scores (:meth:`LoggedRanking.values`), plus, when ``learned``
    centres otherwise than ``logged`` (the state in use, which it is taken to be logged
    with), the change that makes to the dense part. Without: the dense part alone. The
    dense part is ``best_scores`` (the catalogue index's per-tool best cosine for float32
    (1, d) queries, :meth:`selection.indexes.tool_index.ToolIndex.best_scores`) of the query vector,
    centred by a state (as it is without one)."""

    def dense(query: np.ndarray, state: LearnedIndex | None) -> np.ndarray:
        return best_scores(state.center(query) if state is not None else query)

    recentred = not _same_shift(learned, logged)
    rows = []
    for request in held:
        query = request.vector.reshape(1, -1)
        if request.ranking is None:
            rows.append(dense(query, learned))
        elif recentred:
            rows.append(request.ranking.values(len(catalog)) + dense(query, learned)
                        - dense(query, logged))
        else:
            rows.append(request.ranking.values(len(catalog)))
    return rows


def _same_shift(one: LearnedIndex | None, other: LearnedIndex | None) -> bool:
    first = one.shift if one is not None else None
    second = other.shift if other is not None else None
    if first is None or second is None:
        return first is second
    return bool(np.array_equal(first, second))


def recalls(
    held: Sequence[HeldBack],
    base: Sequence[np.ndarray],
    catalog: Catalog,
    learned: LearnedIndex | None,
    k: int,
) -> np.ndarray:
    """Recall@k of each held-back request, float64 ``(len(held),)``: ranked by its
    ``base`` scores (:func:`base_scores` with the same ``learned``) plus ``learned``'s
    boost (none: the ranking as logged)."""
    out = np.ones(len(held), dtype=np.float64)
    for i, (request, scores) in enumerate(zip(held, base, strict=True)):
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
    before = recalls(held, base_scores(held, catalog, best_scores, bound, bound), catalog,
                     bound, k)
    base: dict[tuple[int, float], list[np.ndarray]] = {}  # (fold, centering) → its rows
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
                if (position, centering) not in base:
                    base[(position, centering)] = base_scores(
                        fold.held, catalog, best_scores, learned, bound
                    )
                rows = base[(position, centering)]
                parts.append(recalls(fold.held, rows, catalog, learned, k))
            after = np.concatenate(parts)
            spared = _mean(after[untouched]) >= _mean(before[untouched]) - UNTOUCHED_TOLERANCE
            if spared and (best is None or _surely(after - before) > _surely(best[0] - before)):
                best = (after, gain, centering)
    if best is None:  # every candidate cost the untouched requests
        best = (before, 0.0, 0.0)
    after, gain, centering = best
    return Judgement(float(before.mean()), float(after.mean()), int(untouched.sum()),
                     _mean(before[untouched]), _mean(after[untouched]), gain, centering,
                     _surely(after - before) > 0)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else 0.0


def _surely(differences: np.ndarray) -> float:
    """The gain paired ``differences`` surely show: their mean less
    :data:`STANDARD_ERRORS` standard errors (above zero: a one-sided paired t above
    ``STANDARD_ERRORS``); -inf for fewer than two, or a mean not above zero."""
    if len(differences) < 2 or differences.mean() <= 0:
        return -np.inf
    spread = float(differences.std(ddof=1)) / np.sqrt(len(differences))
    return float(differences.mean()) - STANDARD_ERRORS * spread
