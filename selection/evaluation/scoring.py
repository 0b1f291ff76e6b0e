"""Scoring labelled cases as the proxy would (``toolprune eval``): the scorer protocol,
the proxy's own scorer, and the per-case scores that the replay then selects from.

The query is scored once per case and ``select`` replayed per k and per method (the
planner would embed the same query again for each k). System-prompt tool blocks (the
text path) are not evaluated: the data sets send native ``tools``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.policy import Policy, catalog_layout
from selection.catalog.text_path import text_called_tools
from selection.conversation.history import called_tools, read_tool_choice
from selection.conversation.query import query_parts
from selection.errors import SelectionError
from selection.evaluation.cases import Case
from selection.evaluation.methods import (
    DENSE,
    METHODS,
    ORACLE,
    STICKY,
    TOOLPRUNE,
    Method,
    ablated,
)
from selection.ranking.engine import SelectionEngine
from selection.ranking.pipeline import Ranking
from selection.ranking.signals.expansion import Expansion
from selection.ranking.signals.registry import NAMES, Signals


class Scorer(Protocol):
    """Scores every tool of a catalogue against a query text."""

    name: str
    #: Whether the policy's τ applies to these scores (cosines) or not (BM25).
    uses_threshold: bool
    #: The expansions a selection on these scores runs (dependencies, bundle-mates).
    expansions: tuple[Expansion, ...]
    #: The methods replayed on these scores (:mod:`selection.evaluation.replay`).
    methods: tuple[Method, ...]

    async def prepare(self, catalog: Catalog) -> float:
        """Build what scoring ``catalog`` needs; the seconds spent embedding for it."""
        ...

    async def score(self, catalog: Catalog, query: Sequence[str]) -> Ranking:
        """The catalogue's ranking for ``query`` (:func:`~selection.conversation.query.query_parts`,
        the whole query first): per-tool scores (float32, catalogue order; ``dense``: the
        cosines alone, when the scorer has them) and the seconds spent embedding."""
        ...


class EngineScorer:
    """The proxy's scorer: :meth:`SelectionEngine.score` (cached tool vectors, faiss
    index per catalogue, the policy's example utterances, the catalogue's groups as the
    policy lays them out) with ``signals`` (default: the engine's), replayed as ``methods``
    (default: the product's pipeline, the dense anchor and the oracle)."""

    uses_threshold = True

    def __init__(
        self, engine: SelectionEngine, policy: Policy, name: str = "embed", *,
        signals: Signals | None = None, methods: tuple[Method, ...] | None = None,
    ) -> None:
        self.engine = engine
        self.policy = policy
        self.name = name
        self.signals = engine.signals if signals is None else signals
        self.expansions = self.signals.expansions
        self.methods = (METHODS[TOOLPRUNE], METHODS[DENSE], METHODS[ORACLE]) if methods is None \
            else methods

    async def prepare(self, catalog: Catalog) -> float:
        return (await self.engine.index_for(catalog, self.policy.examples))[1]

    async def score(self, catalog: Catalog, query: Sequence[str]) -> Ranking:
        groups = catalog_layout(catalog, self.policy).groups
        return await self.engine.score(catalog, self.policy.examples, query, groups,
                                       self.signals)


#: What ``toolprune eval --ablate`` takes: every signal and expansion, and ``sticky``.
ABLATIONS = (*NAMES, STICKY)


def ablation_scorers(
    engine: SelectionEngine, policy: Policy, names: Sequence[str]
) -> list[EngineScorer]:
    """One scorer per name of ``names`` (of :data:`ABLATIONS`): the engine's signals less
    that one, replayed as the pipeline without it (``-NAME``). Raises ValueError for a
    name that is not one."""
    unknown = [name for name in names if name not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown --ablate {unknown[0]!r}; known: {', '.join(ABLATIONS)}")
    return [
        EngineScorer(engine, policy, f"-{name}", methods=(ablated(name),),
                     signals=engine.signals if name == STICKY else engine.signals.without(name))
        for name in names
    ]


@dataclass
class ScoredCase:
    """A case after scoring. ``mode``: ``select`` (pruned), ``small`` (a catalogue the
    policy forwards whole, :meth:`~selection.catalog.policy.Policy.forwards_whole`: passed
    through, though still scored so that its expected tools have ranks), ``fallback``
    (unparseable catalogue or scorer error: passed through whole). ``scores`` (what
    ``select`` gets) is None when the case is not pruned or had no query. ``ranks``: best
    rank of each requirement (1-based, None when unranked). Embedding time counts pruned
    cases only, as the proxy spends it.
    ``ranking``: the whole ranking (``scores`` are its values; the dense anchor ranks by its
    ``dense`` cosines), None when ``scores`` is."""

    case: Case
    catalog: Catalog | None
    mode: str
    scores: np.ndarray | None
    pinned: list[str]
    ranks: list[int | None]
    score_s: float = 0.0
    query_embedding_s: float = 0.0
    ranking: Ranking | None = None


@dataclass
class ScoredRun:
    """Every case of a set scored by one scorer: its name, whether τ applies, the
    expansions a selection on it runs, the cases, the seconds spent indexing and embedding
    queries, and the scorer's errors."""

    scorer: str
    uses_threshold: bool
    expansions: tuple[Expansion, ...]
    cases: list[ScoredCase]
    index_s: float
    query_embedding_s: float
    errors: int


def _rank_of(scores: np.ndarray, position: int) -> int:
    """1-based rank of ``position`` in the order ``semantic_candidates`` uses (score
    descending, ties by catalogue order)."""
    value = scores[position]
    return int(1 + np.count_nonzero(scores > value) + np.count_nonzero(scores[:position] == value))


def requirement_ranks(case: Case, catalog: Catalog | None, scores: np.ndarray | None) -> list[int | None]:
    ranks: list[int | None] = []
    for unit in case.requirements:
        best: int | None = None
        if catalog is not None and scores is not None:
            for name in unit:
                position = catalog.index_of(name)
                if position is not None:
                    rank = _rank_of(scores, position)
                    best = rank if best is None else min(best, rank)
        ranks.append(best)
    return ranks


def _tool_choice_of(case: Case) -> tuple[str | None, frozenset[str] | None]:
    """(pinned name, allowed set) from a case's ``tool_choice``, read as the proxy reads it."""
    if case.tool_choice is None:
        return None, None
    choice = read_tool_choice({"tool_choice": case.tool_choice})
    return choice.pinned, choice.allowed


async def score_cases(
    cases: Sequence[Case],
    scorer: Scorer,
    *,
    forwards_whole: Callable[[Catalog], bool],
    query_user_messages: int,
    query_chars: int,
    query_parts_max: int = 6,
    progress: Callable[[Iterable[Case]], Iterable[Case]] | None = None,
) -> ScoredRun:
    """Score every case as the proxy would, catalogue index built (and timed) apart."""
    run = ScoredRun(scorer.name, scorer.uses_threshold, scorer.expansions, [], 0.0, 0.0, 0)
    for case in progress(cases) if progress else cases:
        if case.catalog is None:
            run.cases.append(ScoredCase(case, None, "fallback", None, [], requirement_ranks(case, None, None)))
            continue
        if forwards_whole(case.catalog):
            # Forwarded whole (before tool_choice is read, as in the planner); scored only
            # to rank the expected tools, for MRR: not counted as embedding or latency.
            catalog = case.catalog
            scores = None
            query = query_parts(case.messages, query_user_messages, query_chars, query_parts_max)
            try:
                await scorer.prepare(catalog)
                scores = (await scorer.score(catalog, query)).values if query else None
            except SelectionError:
                run.errors += 1
            run.cases.append(ScoredCase(case, catalog, "small", None, [], requirement_ranks(case, catalog, scores)))
            continue
        choice_pin, allowed = _tool_choice_of(case)
        catalog = case.catalog if allowed is None else case.catalog.restricted_to(set(allowed))
        pinned = [  # as proxy/turn/planner.py pins
            *([choice_pin] if choice_pin else []),
            *called_tools(case.messages),
            *text_called_tools(case.messages, set(catalog.names)),
        ]
        query = query_parts(case.messages, query_user_messages, query_chars, query_parts_max)
        scores = ranking = None
        score_s = embedding_s = 0.0
        try:
            run.index_s += await scorer.prepare(catalog)
            if query:
                started = time.perf_counter()
                ranking = await scorer.score(catalog, query)
                scores, embedding_s = ranking.values, ranking.embedding_s
                score_s = time.perf_counter() - started
        except SelectionError:
            run.errors += 1
            run.cases.append(ScoredCase(case, catalog, "fallback", None, pinned, requirement_ranks(case, catalog, None)))
            continue
        run.query_embedding_s += embedding_s
        run.cases.append(
            ScoredCase(
                case, catalog, "select", scores, pinned,
                requirement_ranks(case, catalog, scores), score_s, embedding_s, ranking,
            )
        )
    return run
