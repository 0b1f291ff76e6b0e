"""The selector: which tools to forward this turn, in which order, and why. Pure and
deterministic given the turn's ranking (no I/O, no clock: ``now`` is passed in).

``loaded = CORE ∪ PINNED ∪ STICKY ∪ SEMANTIC (+ dependencies, bundle-mates) ∪ meta-tool
loads``, capped (ARCHITECTURE.md, "Request flow", step 3), in four steps: the turn's
contract (:mod:`selection.choosing.contract`: CORE, found, pinned, requested), what its ranking
wants (:mod:`selection.choosing.wanted`: the semantic candidates and the cache rule of a turn on a
block), admission under the caps (:mod:`selection.choosing.admission`), and the block's order
(:mod:`selection.choosing.block_order`). Forwarded order is KV-cache order: CORE first, then loaded
tools in admission order, new ones appended; a turn that admits nothing forwards exactly
the previous turn's list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.policy import Policy, catalog_layout
from selection.catalog.tokens import tool_tokens
from selection.choosing.admission import LoadedSet, admit, touched
from selection.choosing.block_order import Reason, SelectedTool, Selection, block
from selection.choosing.contract import Contract, read_contract
from selection.choosing.state import ConversationState, LoadedTool
from selection.choosing.turn_scores import TurnScores
from selection.choosing.wanted import TurnRanking, Wanted, wanted
from selection.learning.learned import learned_names
from selection.ranking.pipeline import Ranking
from selection.ranking.signals.bundles import BundleMates
from selection.ranking.signals.expansion import Expansion, ExpansionInputs
from selection.ranking.signals.registry import Signals

__all__ = ["Selection", "SelectedTool", "TurnFacts", "select"]

#: The expansions a selection runs when none are given: every registered one, at its
#: default knobs.
DEFAULT_EXPANSIONS: tuple[Expansion, ...] = Signals.from_values({}).expansions


@dataclass(frozen=True)
class TurnFacts:
    """What a turn's selection reads besides the catalogue, its ranking, the policy and
    the conversation's state.

    ``now``: Unix seconds; stamps admissions and uses. ``pinned``: tools that must be
    forwarded (``tool_choice``, calls in the history); they take no semantic slot, so top-k
    always brings k candidates beyond them. ``requested``: tools a meta-tool loaded this
    turn; admitted before semantic ones. ``top_k``: overrides ``policy.top_k``.
    ``token_cap``: prompt tokens the forwarded tools that are neither CORE nor pinned may
    take (None: no cap). ``exact``: exact prompt tokens per tool fingerprint (the
    upstream's tokenizer), else :func:`selection.catalog.tokens.tool_tokens` estimates.
    ``history_tokens``: prompt tokens of the conversation's messages after the system
    prompt (what the upstream evaluates again when the tools change). ``found``: tools a
    search found in the conversation (with ``state.found``): kept loaded like pins.
    ``preload``: whether semantic candidates are admitted (False: the client deferred
    tools and ``Policy.preload_deferred`` is off). ``client_core``: the client's CORE in
    forwarding order when it runs its own deferral (None: ``catalog.kept``).
    ``count_evicts``: whether ``policy.max_tools`` evicts (False where an eviction costs
    the upstream every tool after it: :mod:`selection.choosing.admission`). ``frozen``:
    the block is in the upstream's cached prefix and stays as it is (tools reach the model
    in the conversation instead: :mod:`selection.clients.bridge`); what the turn wants
    beyond it is reported as :attr:`Selection.outside`."""

    now: float
    pinned: Sequence[str] = ()
    requested: Sequence[str] = ()
    top_k: int | None = None
    token_cap: int | None = None
    exact: Mapping[str, int] | None = None
    history_tokens: int = 0
    found: Sequence[str] = ()
    preload: bool = True
    client_core: Sequence[str] | None = None
    count_evicts: bool = True
    frozen: bool = False


def select(
    catalog: Catalog,
    ranking: Ranking | None,
    policy: Policy,
    state: ConversationState,
    facts: TurnFacts,
    expansions: Sequence[Expansion] = DEFAULT_EXPANSIONS,
) -> Selection:
    """Select the tools to forward (see the module docstring).

    ``ranking``: the turn's scores (None: no semantic signal, so nothing is admitted
    semantically); ``state``: the conversation's state before this turn (not modified);
    ``expansions``: those the turn runs (dependencies within the candidates' budget,
    bundle-mates after them).

    The client's CORE comes first on every turn, before toolprune's CORE, outside every
    cap. On a block that held a meta-tool (``state.meta_at``), the tier and the
    meta-tool's place are kept, so its text and everything before it stay byte-identical
    in the upstream's cache; admitted tools follow it. Priority at the caps: pinned,
    requested, semantic (by score), bundle-mates.
    """
    layout = catalog_layout(catalog, policy)
    contract = read_contract(
        catalog, layout, state, client_core=facts.client_core, found=facts.found,
        pinned=facts.pinned, requested=facts.requested,
    )
    scores = None if ranking is None else ranking.values
    k = policy.top_k if facts.top_k is None else facts.top_k
    wants = Wanted()
    if ranking is not None and facts.preload:
        turn = TurnRanking(ranking.values, ranking.named, k)
        wants = wanted(catalog, turn, policy, state, contract, layout, expansions)
    reasons = _reasons(catalog, ranking, contract, wants, layout.mates, expansions, k)
    score_of: Mapping[str, float] = {} if scores is None else TurnScores(catalog, scores)
    loaded = _admitted(catalog, policy, state, facts, contract, wants, reasons, score_of)
    frozen = facts.frozen
    return block(
        catalog, scores, state, contract, loaded, reasons, wants, score_of,
        has_block=state.turn > 0 or bool(state.loaded),
        outside=[name for name in reasons if name not in loaded.loaded] if frozen else (),
        missing=[c.name for c in wants.semantic
                 if c.name not in loaded.loaded and c.name not in wants.spare] if frozen else (),
    )


def _reasons(
    catalog: Catalog, ranking: Ranking | None, contract: Contract, wants: Wanted,
    mates: Mapping[str, tuple[str, ...]], expansions: Sequence[Expansion], k: int,
) -> dict[str, Reason]:
    """Every tool the turn selects, in admission priority, with why: found, pinned,
    requested, semantic (``learned`` when only the learned boost brought it), then
    bundle-mates of the requested and semantic ones."""
    learned: set[str] = set()
    boost = None if ranking is None else ranking.boost
    if ranking is not None and boost is not None and wants.semantic:
        learned = learned_names(catalog, ranking.values, boost, [c.name for c in wants.semantic], k)
    reasons: dict[str, Reason] = {}
    for name in contract.found:
        reasons.setdefault(name, "found")
    for name in contract.pinned:
        reasons.setdefault(name, "pinned")
    for name in contract.requested:
        reasons.setdefault(name, "requested")
    for candidate in wants.semantic:
        reasons.setdefault(
            candidate.name, "learned" if candidate.name in learned else candidate.reason
        )
    bundles = next((e for e in expansions if isinstance(e, BundleMates)), None)
    if bundles is not None:
        inputs = ExpansionInputs(catalog, np.zeros(0, np.float32), 0.0, None, mates)
        for parent in [*contract.requested, *(c.name for c in wants.semantic)]:
            for mate in bundles.expand(inputs, parent, set(contract.core), len(catalog)):
                reasons.setdefault(mate, "bundle")
    return reasons


def _admitted(
    catalog: Catalog, policy: Policy, state: ConversationState, facts: TurnFacts,
    contract: Contract, wants: Wanted, reasons: Mapping[str, Reason],
    score_of: Mapping[str, float],
) -> LoadedSet:
    """The conversation's loaded tools after admitting ``reasons`` under the caps."""
    core = contract.core_set
    loaded = {
        name: LoadedTool(times.admitted_at, times.last_used_at)
        for name, times in state.loaded.items()
        if catalog.index_of(name) is not None and name not in core
    }
    touched(loaded, reasons, facts.now)

    def cost(name: str) -> int:
        tool = catalog.get(name)
        return tool_tokens(tool, facts.exact) if tool is not None else 0

    loaded_set = LoadedSet(
        loaded, max_tools=policy.max_tools, token_cap=facts.token_cap,
        pinned=contract.pinned_set, selected=frozenset(reasons), cost=cost,
        score=score_of.get, count_evicts=facts.count_evicts,
    )
    if facts.frozen:  # the block stays as the upstream's cache holds it
        return loaded_set
    loaded_set.fit()
    admit(loaded_set, reasons, facts.now, spare=wants.spare, room_only=wants.room_only,
          insurance=policy.refresh_share * facts.history_tokens)
    return loaded_set
