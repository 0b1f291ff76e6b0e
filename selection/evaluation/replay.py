"""Replaying scored cases through ``select`` for each method
(:mod:`selection.evaluation.methods`) and k (``toolprune eval``).

Per k, ``select`` runs with ``top_k = k`` and ``max_tools = max(policy.max_tools, k)``
(``k = all``: the catalogue size), conversation state carried per conversation, as the
proxy would. Each outcome also records the forwarded schema tokens
(:func:`selection.catalog.tokens.tool_tokens`, estimated), the meta-tool the planner would add
(and its tokens), and what is *reachable in one meta round*: forwarded, listed by name in
the meta-tool (the tier, or the full ``load_tools`` menu), or among the
``search_tools`` results for the task's own words (the top
:data:`SEARCH_RESULTS` of the case's scores, and of each group the tier names under a
heading: ``search_tools(query, server=…)``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from selection.catalog.catalog import Catalog, canonical_json
from selection.catalog.groups import CatalogGroups
from selection.catalog.policy import CandidatePolicy, Policy, catalog_layout
from selection.catalog.tokens import BYTES_PER_TOKEN, tool_tokens
from selection.choosing.candidates import semantic_candidates
from selection.choosing.prefix import block_signature, estimated_text_tokens, split_system
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from selection.clients.meta_tools import build_meta_tools
from selection.evaluation.methods import METHODS, TOOLPRUNE, Method
from selection.evaluation.scoring import ScoredCase, ScoredRun, requirement_ranks
from selection.ranking.pipeline import Ranking
from selection.ranking.signals.dependencies import Dependencies

#: Tools a ``search_tools`` call returns (as ``selection.clients.tool_search.SEARCH_RESULTS``).
SEARCH_RESULTS = 5
#: Catalogues above this get ``search_tools`` (the settings default).
SEARCH_TOOLS_MIN_CATALOG = 100

@dataclass
class CaseOutcome:
    """One case at one k: ``forwarded`` names in forwarding order; ``satisfied`` per
    requirement; ``reachable`` per requirement (forwarded, listed or searched); schema
    tokens of the forwarded tools and of the meta-tool; ``select_s``: the select call's
    time (0 when passed through); ``block``: the forwarded tools with the meta-tool's
    entry in its place (:func:`selection.choosing.prefix.block_signature`; CORE first), what the
    prefix-cache model prices; ``ranks``: each requirement's best rank in the order the
    method ranks by (the dense cosines for ``dense``; None for the oracle, which ranks
    nothing, and where unranked)."""

    case: ScoredCase
    forwarded: list[str]
    satisfied: list[bool]
    select_s: float
    reachable: list[bool]
    schema_tokens: int = 0
    meta_tokens: int = 0
    block: list[str] | None = None
    ranks: list[int | None] | None = None

    @property
    def requirement_ranks(self) -> list[int | None]:
        return self.case.ranks if self.ranks is None else self.ranks

    @property
    def recall(self) -> float:
        return sum(self.satisfied) / len(self.satisfied) if self.satisfied else 1.0


def policy_for_k(
    policy: Policy, k: int | None, catalog_size: int, uses_threshold: bool,
    ranking: CandidatePolicy | None = None,
) -> Policy:
    """The policy a k of the sweep runs with: ``top_k = k``, ``max_tools = max(policy
    .max_tools, k)`` (``all``: the catalogue size); τ off for scores that are not cosines;
    ``ranking`` replaces the policy's candidate policy when given."""
    top_k = catalog_size if k is None else k
    return replace(
        policy,
        top_k=top_k,
        max_tools=max(policy.max_tools, top_k),
        threshold=policy.threshold if uses_threshold else -math.inf,
        candidates=policy.candidates if ranking is None else ranking,
    )


def _definition_tokens(definitions: Sequence[object]) -> int:
    return sum(math.ceil(len(canonical_json(d)) / BYTES_PER_TOKEN) for d in definitions)


def server_search(
    catalog: Catalog, groups: CatalogGroups, scores: np.ndarray, tier: Sequence[str]
) -> set[str]:
    """What ``search_tools(query, server=…)`` finds for the task's own words in each group
    the meta-tool's tier names (a heading): that group's :data:`SEARCH_RESULTS`
    best-scored tools (only groups the meta-tool shows: :attr:`CatalogGroups.listed`)."""
    shown = set(groups.listed)
    headings = {int(groups.of[p]) for name in tier
                if (p := catalog.index_of(name)) is not None and groups.of[p] >= 0
                and groups.groups[groups.of[p]] in shown}
    found: set[str] = set()
    for group in headings:
        members = np.flatnonzero(groups.of == group)
        best = members[np.argsort(-scores[members], kind="stable")[:SEARCH_RESULTS]]
        found.update(catalog.tools[position].name for position in best)
    return found


def method_ranking(scored: ScoredCase, method: Method) -> tuple[Ranking | None, list[int | None]]:
    """The ranking ``method`` selects by on ``scored`` (the dense cosines alone for
    ``dense``) and each requirement's best rank in it (None throughout for the oracle,
    which ranks nothing)."""
    ranking = scored.ranking
    if ranking is not None and method.scores == "dense":
        ranking = Ranking(ranking.dense) if ranking.dense is not None else None
    if method.oracle:
        return ranking, [None] * len(scored.case.requirements)
    if ranking is scored.ranking:
        return ranking, scored.ranks
    return ranking, requirement_ranks(scored.case, scored.catalog,
                                      None if ranking is None else ranking.values)


def replay(
    run: ScoredRun, policy: Policy, k: int | None, method: Method | None = None
) -> list[CaseOutcome]:
    """Run ``select`` for every case in order, carrying each conversation's state."""
    method = method or METHODS[TOOLPRUNE]
    states: dict[str, ConversationState] = {}
    outcomes = []
    clock = 0.0
    for scored in run.cases:
        case = scored.case
        catalog = scored.catalog
        clock += 1.0
        select_s = 0.0
        listed: set[str] = set()
        meta_tokens = 0
        block = None
        ranking, ranks = method_ranking(scored, method)
        scores = None if ranking is None else ranking.values
        if scored.mode != "select":
            forwarded = list(catalog.names) if catalog else list(case.tool_names)
        elif method.oracle:
            assert catalog is not None
            forwarded = list(dict.fromkeys(
                [*scored.pinned, *(unit[0] for unit in case.requirements if catalog.get(unit[0]))]
            ))
        else:
            assert catalog is not None
            carried = states.get(case.conversation) if method.sticky else None
            state = carried or ConversationState()
            turn_policy = policy_for_k(policy, k, len(catalog), run.uses_threshold, method.ranking)
            started = time.perf_counter()
            history = estimated_text_tokens(split_system(case.messages)[1])
            selection = select(
                catalog, ranking, turn_policy, state,
                TurnFacts(now=clock, pinned=scored.pinned, history_tokens=history),
                run.expansions if method.dependencies
                else tuple(e for e in run.expansions if not isinstance(e, Dependencies)),
            )
            select_s = time.perf_counter() - started
            selection.state.turn += 1
            states[case.conversation] = selection.state
            forwarded = selection.names
            if set(catalog.names) - set(forwarded):
                search = len(catalog) > SEARCH_TOOLS_MIN_CATALOG
                core = {t.name for t in selection.tools if t.reason == "core"}
                groups = catalog_layout(catalog, turn_policy).groups
                meta = build_meta_tools(
                    catalog, core, groups.listed, search=search, tier=selection.tier,
                )
                meta_tokens = _definition_tokens(meta.definitions)
                listed.update(selection.tier)
                if not search and not selection.tier:
                    listed.update(catalog.names)  # the full menu lists every tool
                if search and scores is not None:
                    found = semantic_candidates(catalog, scores, SEARCH_RESULTS, -math.inf, set())
                    listed.update(name for name, _ in found)
                    listed.update(server_search(catalog, groups, scores, selection.tier))
            else:
                selection.state.meta_at = None  # as the planner: no meta-tool forwarded
            core_names = [t.name for t in selection.tools if t.reason == "core"]
            block = [*core_names, *block_signature(
                selection.state.loaded, selection.tier, selection.state.meta_at
            )]
        chosen = set(forwarded)
        satisfied = [any(name in chosen for name in unit) for unit in case.requirements]
        reachable = [
            ok or any(name in listed for name in unit)
            for ok, unit in zip(satisfied, case.requirements, strict=True)
        ]
        schema_tokens = 0
        if catalog is not None:
            schema_tokens = sum(tool_tokens(tool) for name in forwarded if (tool := catalog.get(name)))
        outcomes.append(
            CaseOutcome(
                scored, forwarded, satisfied, select_s, reachable, schema_tokens, meta_tokens,
                block, ranks,
            )
        )
    return outcomes
