"""The candidates a turn admits by its ranking, and the tier the meta-tool lists.

Candidates (:func:`choose`): tools in score order (τ inclusive) are admitted while they
fit a token budget (``top_k`` × the mean tool cost of the catalogue and of the turn's best
2 × ``top_k`` candidates, averaged: a catalogue of small tools gets more of them and one
of large tools fewer, and the budget follows the cost of the tools actually in contention)
and stay within ``dominance_margin`` of the best score (one dominant match: few tools;
flat scores: the whole budget); when a one-intent request names the best candidate
(every word of its name; :mod:`selection.indexes.name_match`), only the tools it names are
candidates. Each admitted tool among the first few brings what the dependency expansion
gives it (the producers of the identifiers it needs, :mod:`selection.ranking.signals.dependencies`),
within the same budget. The next ``tier_size`` tools by score form the *tier*: listed by name and purpose
in the meta-tool, loadable in one round. Pure functions, no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from selection.catalog.catalog import Catalog, Tool
from selection.catalog.policy import CandidatePolicy
from selection.catalog.tokens import tool_tokens
from selection.choosing.turn_scores import best_positions
from selection.indexes.tool_index import LRUCache

CandidateReason = Literal["semantic", "named", "dependency"]

#: :func:`choose` considers the best ``SCAN_FACTOR`` × top-k + ``SCAN_EXTRA`` tools only.
SCAN_FACTOR = 4
SCAN_EXTRA = 16
#: :func:`token_budget` averages in the cost of the best ``CONTENDER_FACTOR`` × top-k
#: candidates.
CONTENDER_FACTOR = 2


@dataclass(frozen=True)
class Candidate:
    """A tool a turn admits: ``score`` is its own score; ``parent`` the tool whose
    identifier it produces (reason ``dependency``). Reason ``named``: a semantic
    candidate admitted because a one-intent request names it (the others were not)."""

    name: str
    score: float
    reason: CandidateReason
    parent: str | None = None


@dataclass(frozen=True)
class Choice:
    """Candidates to admit, in admission order, and the tier (names, best first)."""

    candidates: tuple[Candidate, ...]
    tier: tuple[str, ...]


@dataclass(frozen=True)
class TurnExpansion:
    """What a turn's budgeted expansion adds: ``expand(parent, present, room)`` → the tools
    ``parent`` brings (at most ``room``, none of ``present``), in admission order; for the
    first ``parents`` admitted tools, at most ``most`` tools a turn."""

    expand: Callable[[str, set[str], int], list[str]]
    most: int
    parents: int

#: Mean tool tokens by catalogue fingerprint (estimated costs only).
_MEANS: LRUCache[str, float] = LRUCache(256)


def mean_tool_tokens(catalog: Catalog, exact: Mapping[str, int] | None = None) -> float:
    """Mean :func:`~selection.catalog.tokens.tool_tokens` over the catalogue (0 when empty)."""
    if not len(catalog):
        return 0.0
    cached = _MEANS.get(catalog.fingerprint) if exact is None else None
    if cached is None:
        cached = float(statistics.fmean(tool_tokens(tool, exact) for tool in catalog.tools))
        if exact is None:
            _MEANS.put(catalog.fingerprint, cached)
    return cached


def token_budget(catalog: Catalog, top_k: int, policy: CandidatePolicy,
                 exact: Mapping[str, int] | None = None,
                 contenders: Sequence[Tool] = ()) -> int:
    """The turn's budget of candidate schema tokens: ``policy.token_budget``, or
    ``top_k`` × the mean of :func:`mean_tool_tokens` and the mean cost of
    ``contenders`` (the turn's best 2 × ``top_k`` candidates; the catalogue mean alone
    when there are none). The catalogue's mean alone under-spends where the tools in
    contention are larger than the catalogue's average (BFCL multi-turn: 8 × mean bought
    fewer tools than dense top-8, recall 0.825 → 0.806); their mean alone lets a turn
    of large candidates spend as much as count top-k (benchmarks/README.md)."""
    if policy.token_budget > 0:
        return policy.token_budget
    if top_k <= 0:
        return 0
    mean = mean_tool_tokens(catalog, exact)
    if contenders:
        mean = (mean + statistics.fmean(tool_tokens(t, exact) for t in contenders)) / 2
    return int(top_k * mean)


class _Admissions:
    """The candidates admitted so far, within a count ``limit`` and a token ``budget``
    (the first one always fits)."""

    def __init__(self, limit: int, budget: int) -> None:
        self.limit = limit
        self.budget = budget
        self.chosen: list[Candidate] = []
        self.taken: set[str] = set()
        self.spent = 0

    @property
    def full(self) -> bool:
        return len(self.chosen) >= self.limit or self.spent >= self.budget

    def admit(self, candidate: Candidate, cost: int) -> bool:
        if len(self.chosen) >= self.limit or (self.chosen and self.spent + cost > self.budget):
            return False
        self.chosen.append(candidate)
        self.taken.add(candidate.name)
        self.spent += cost
        return True


def _ranked(catalog: Catalog, scores: np.ndarray, top_k: int, exclude: set[str]) -> list[int]:
    """The positions in contention, best first (ties in catalogue order): only the best
    few are looked at, so a large catalogue is not scanned for small tools that would fit
    what is left of the budget."""
    window = best_positions(scores, SCAN_FACTOR * top_k + len(exclude) + SCAN_EXTRA).tolist()
    return [p for p in window if catalog.tools[p].name not in exclude]


def choose(
    catalog: Catalog,
    scores: np.ndarray,
    *,
    top_k: int,
    threshold: float,
    exclude: set[str],
    policy: CandidatePolicy,
    max_count: int | None = None,
    exact: Mapping[str, int] | None = None,
    named: np.ndarray | None = None,
    expansion: TurnExpansion | None = None,
) -> Choice:
    """The candidates of one turn (see the module docstring).

    ``scores``: float32 ``(len(catalog),)``, fused score per tool. ``exclude``: tools
    already forwarded for another reason (CORE, pinned): never candidates, cost nothing.
    ``max_count``: most candidates admitted (default: no count limit beyond the budget;
    with ``policy.budget == "count"``, ``top_k``).
    A first candidate is always admitted when one scores ≥ τ, whatever its cost.
    ``named``: bool ``(len(catalog),)``, the tools a one-intent request names; with
    ``policy.named_only``, when the best candidate is named, only named tools are
    semantic candidates (the others stay in score order for the tier). ``expansion``: what
    the first admitted tools bring (reason ``dependency``; None: nothing).
    """
    if top_k <= 0 or len(catalog) == 0:
        return Choice((), ())
    ranked = _ranked(catalog, scores, top_k, exclude)
    limit = max_count if max_count is not None else len(catalog)
    if policy.budget == "count":
        budget, limit = 2**62, min(limit, top_k)
    else:
        contenders = [catalog.tools[p] for p in ranked[: CONTENDER_FACTOR * top_k]]
        budget = token_budget(catalog, top_k, policy, exact, contenders)
    floor = threshold
    if policy.dominance_margin is not None:
        floor = max(floor, float(scores.max()) - policy.dominance_margin)
    named_turn = bool(policy.named_only and named is not None and ranked and named[ranked[0]])
    admissible = [p for p in ranked if named[p]] if named_turn else ranked
    admissions = _Admissions(limit, budget)
    refused = _admit_ranked(catalog, scores, admissible, floor, admissions, exact, expansion,
                            "named" if named_turn else "semantic", exclude)
    rest = (catalog.tools[p].name for p in ranked)
    tier = [name for name in dict.fromkeys([*refused, *rest]) if name not in admissions.taken]
    return Choice(tuple(admissions.chosen), tuple(tier[: policy.tier_size]))


def _admit_ranked(
    catalog: Catalog, scores: np.ndarray, admissible: Sequence[int], floor: float,
    admissions: _Admissions, exact: Mapping[str, int] | None, expansion: TurnExpansion | None,
    reason: CandidateReason, exclude: set[str],
) -> list[str]:
    """Admit ``admissible`` in order while they score at least ``floor`` and fit, each of
    the expansion's first parents followed by what it brings for it; the expansion's
    tools the budget had no room for, which the tier lists first."""
    refused: list[str] = []
    parents = 0
    for position in admissible:
        tool = catalog.tools[position]
        if float(scores[position]) < floor or admissions.full:
            break
        if tool.name in admissions.taken:
            continue
        candidate = Candidate(tool.name, float(scores[position]), reason)
        if not admissions.admit(candidate, tool_tokens(tool, exact)):
            continue  # too large for what is left: a smaller one may still fit
        if expansion is None or parents >= expansion.parents:
            continue
        parents += 1
        room = expansion.most - sum(c.reason == "dependency" for c in admissions.chosen)
        if room <= 0:
            continue
        for name in expansion.expand(tool.name, exclude | admissions.taken, room):
            position_of = catalog.index_of(name)
            assert position_of is not None
            producer = Candidate(name, float(scores[position_of]), "dependency", tool.name)
            if not admissions.admit(producer, tool_tokens(catalog.tools[position_of], exact)):
                refused.append(name)
    return refused


def semantic_candidates(
    catalog: Catalog, scores: np.ndarray, top_k: int, threshold: float, exclude: set[str]
) -> list[tuple[str, float]]:
    """The ``top_k`` best-scored tools not in ``exclude`` whose score is ≥ ``threshold``
    (τ, inclusive), best first; ties broken by catalogue order.

    ``scores``: float32 array of shape ``(len(catalog),)``, the score per tool.
    """
    if top_k <= 0 or len(catalog) == 0:
        return []
    order = np.argsort(-scores, kind="stable")
    chosen: list[tuple[str, float]] = []
    for position in order:
        score = float(scores[position])
        if score < threshold or len(chosen) >= top_k:
            break
        name = catalog.tools[position].name
        if name not in exclude:
            chosen.append((name, score))
    return chosen
