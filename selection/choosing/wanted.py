"""Which tools a turn wants by its ranking: its semantic candidates (:func:`selection.choosing.candidates.choose`)
under the cache rule of a turn that starts from a block.

A turn on a block (a later turn, or a new conversation on its agent's block) changes it
only when its ``refresh_rank`` best tools are not all forwarded or the history called a
tool new to it; then the upstream evaluates the history again, once. It admits its best
tools the block lacks (what made it change), with their dependencies, and, as insurance
against another change (which would cost that history again, and more), candidates up to
``refresh_top_k`` (``spare``) whose schemas cost at most ``refresh_share`` × the history's
tokens. Those within the turn's top-k (its token budget) may evict the least recently used
tool (a change of the block is paid already, and with chunk reuse a removal costs
nothing); the others come into free room only (``room_only``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.policy import CatalogLayout, Policy
from selection.choosing.candidates import Candidate, Choice, TurnExpansion, choose
from selection.choosing.contract import Contract
from selection.choosing.state import ConversationState
from selection.choosing.turn_scores import TurnScores
from selection.ranking.signals.dependencies import Dependencies
from selection.ranking.signals.expansion import Expansion, ExpansionInputs


@dataclass(frozen=True)
class Wanted:
    """A turn's semantic candidates in admission order, the tier (names, best first), and
    which candidates are insurance (``spare``: admitted only within the history's share)
    or may only take free room (``room_only``: never evicting)."""

    semantic: tuple[Candidate, ...] = ()
    tier: tuple[str, ...] = ()
    spare: frozenset[str] = field(default_factory=frozenset)
    room_only: frozenset[str] = field(default_factory=frozenset)


def block_serves(
    score_of: TurnScores, forwarded: set[str], rank: int, named: Sequence[str] = ()
) -> bool:
    """Whether the ``rank`` best-scored tools of the turn are all ``forwarded`` already
    (``Policy.refresh_rank``; ties broken by catalogue order), or, for a one-intent request
    that names its tools (``named``), those."""
    if named:
        return all(name in forwarded for name in named)
    return all(name in forwarded for name in score_of.best(rank))


@dataclass(frozen=True)
class TurnRanking:
    """What :func:`wanted` reads of the turn's ranking: ``scores`` float32
    ``(len(catalog),)``, ``named`` bool ``(len(catalog),)`` or None, ``top_k``."""

    scores: np.ndarray
    named: np.ndarray | None
    top_k: int


def wanted(
    catalog: Catalog, ranking: TurnRanking, policy: Policy, state: ConversationState,
    contract: Contract, layout: CatalogLayout, expansions: Sequence[Expansion],
) -> Wanted:
    """The turn's semantic candidates on ``state`` (see the module docstring)."""
    scores, k = ranking.scores, ranking.top_k
    score_of = TurnScores(catalog, scores)
    has_block = state.turn > 0 or bool(state.loaded)
    held = set(contract.core) | set(contract.pinned) | set(state.loaded)
    named_names = [] if ranking.named is None else [
        catalog.tools[p].name for p in np.flatnonzero(ranking.named).tolist()
    ]
    refresh = not has_block or (
        not contract.requested
        and not block_serves(score_of, held, policy.refresh_rank, named_names)
    )
    candidates = partial(_candidates, catalog, ranking, policy, contract, layout, expansions)
    choice = candidates(k)
    result = Wanted(tier=choice.tier)
    if refresh and not has_block:
        result = Wanted(choice.candidates, choice.tier)
    elif refresh:
        result = _refreshed(choice, score_of, named_names, held, policy, k)
    changing = any(name not in state.loaded for name in contract.pinned)
    if has_block and not contract.requested and (refresh or changing) and k > 0:
        result = _insured(result, candidates(max(k, policy.refresh_top_k)), choice)
    return result


def _candidates(
    catalog: Catalog, ranking: TurnRanking, policy: Policy, contract: Contract,
    layout: CatalogLayout, expansions: Sequence[Expansion], k: int,
) -> Choice:
    """:func:`~selection.choosing.candidates.choose` at ``k``, the dependency expansion (when on)
    bringing each admitted tool's producers."""
    dependencies = next((e for e in expansions if isinstance(e, Dependencies)), None)
    groups = layout.groups if layout.groups.shapes_ranking else None
    inputs = ExpansionInputs(catalog, ranking.scores, policy.threshold, groups, layout.mates)
    return choose(
        catalog, ranking.scores, top_k=k, threshold=policy.threshold,
        exclude=set(contract.core) | set(contract.pinned), policy=policy.candidates,
        max_count=policy.max_tools, named=ranking.named,
        expansion=None if dependencies is None else TurnExpansion(
            partial(dependencies.expand, inputs), dependencies.params.max_dependencies,
            dependencies.params.dependency_parents,
        ),
    )


def _refreshed(
    choice: Choice, score_of: TurnScores, named: Sequence[str], held: set[str],
    policy: Policy, k: int,
) -> Wanted:
    """A block the turn's best tools outgrew: those it lacks (τ inclusive), with the
    dependencies the choice gave them; past the token budget they take free room only."""
    best = named or score_of.best(min(policy.refresh_rank, k))
    semantic = [
        Candidate(name, score_of[name], "semantic")
        for name in best
        if name not in held and score_of[name] >= policy.threshold
    ]
    needed = {c.name for c in semantic}
    semantic += [
        c for c in choice.candidates
        if c.parent in needed and c.name not in held and c.name not in needed
    ]
    top = {c.name for c in choice.candidates}
    return Wanted(tuple(semantic), choice.tier, frozenset(), frozenset(needed - top))


def _insured(result: Wanted, wide: Choice, choice: Choice) -> Wanted:
    """``result`` and, as insurance, the candidates of the wide choice it lacks (``spare``;
    outside the turn's own choice they take free room only), with the wide choice's tier."""
    chosen = {c.name for c in result.semantic}
    extra = [c for c in wide.candidates if c.name not in chosen]
    spare = frozenset(c.name for c in extra)
    top = {c.name for c in choice.candidates}
    return Wanted((*result.semantic, *extra), wide.tier, spare,
                  result.room_only | (spare - top))
