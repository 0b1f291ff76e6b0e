"""The selector: which tools to forward this turn, in which order, and why. Pure and
deterministic given the per-tool scores (no I/O, no clock: ``now`` is passed in).

``loaded = CORE ∪ PINNED ∪ STICKY ∪ SEMANTIC (+ dependencies, bundle-mates) ∪ meta-tool
loads``, capped (ARCHITECTURE.md, "Request flow", step 3); the semantic candidates and
their dependencies come from :func:`selection.ranking.choose` (token budget). Forwarded
order is KV-cache order: CORE in catalogue
order, then loaded tools in admission order, new ones appended; a turn that admits
nothing forwards exactly the previous turn's list.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from selection.catalog import Catalog
from selection.learned import learned_names
from selection.policy import Policy, catalog_layout
from selection.ranking import Candidate, Choice, choose
from selection.state import ConversationState, LoadedTool
from selection.tokens import tool_tokens

Reason = Literal[
    "client", "core", "found", "pinned", "requested", "semantic", "named", "dependency",
    "bundle", "sticky", "learned", "whole",
]
#: Where a forwarded tool came from (:attr:`Selection.provenance`): the client kept it
#: loaded (not deferred), toolprune loaded it by its own ranking (and CORE, pins,
#: stickiness), or a search the model made found it.
Origin = Literal["client", "toolprune", "search"]

#: How many of the best-scored tools that were left out a selection reports.
LEFT_OUT_REPORTED = 5


@dataclass(frozen=True)
class SelectedTool:
    """A forwarded tool and the reason it is there (``score``: its cosine, when scored)."""

    name: str
    reason: Reason
    score: float | None = None


@dataclass(frozen=True)
class Selection:
    """The outcome of one turn.

    ``tools``: forwarded client tools in forwarding order. ``admitted`` / ``evicted``:
    changes to the loaded set this turn. ``left_out``: best-scored tools not forwarded,
    ``(name, score)``, best first. ``state``: the conversation state to store.
    ``tier``: tools not forwarded that the meta-tool lists by name this turn (best
    first). ``parents``: dependency → the forwarded tool whose identifier it produces.
    """

    tools: tuple[SelectedTool, ...]
    admitted: tuple[str, ...]
    evicted: tuple[str, ...]
    left_out: tuple[tuple[str, float], ...]
    state: ConversationState
    tier: tuple[str, ...] = ()
    parents: tuple[tuple[str, str], ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the forwarded tools differ from the previous turn's."""
        return bool(self.admitted or self.evicted)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    @property
    def provenance(self) -> dict[str, Origin]:
        """Each forwarded tool's origin: ``client`` (the client's CORE: not deferred),
        ``search`` (found by a search or loaded by a meta-tool call, this turn or earlier
        in the conversation), ``toolprune`` (everything else)."""
        origins: dict[str, Origin] = {}
        for tool in self.tools:
            if tool.reason == "client":
                origins[tool.name] = "client"
            elif tool.reason in ("found", "requested") or tool.name in self.state.found:
                origins[tool.name] = "search"
            else:
                origins[tool.name] = "toolprune"
        return origins


def block_serves(
    score_of: dict[str, float], forwarded: set[str], rank: int, named: Sequence[str] = ()
) -> bool:
    """Whether the ``rank`` best-scored tools of the turn are all ``forwarded`` already
    (``Policy.refresh_rank``; ties broken by catalogue order), or, for a one-intent request
    that names its tools (``named``), those."""
    if named:
        return all(name in forwarded for name in named)
    best = heapq.nlargest(rank, score_of, key=score_of.__getitem__) if rank > 0 else []
    return all(name in forwarded for name in best)


def _unique_known(names: Sequence[str], catalog: Catalog, exclude: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        if catalog.index_of(name) is not None and name not in exclude:
            seen.setdefault(name, None)
    return list(seen)


def select(
    catalog: Catalog,
    scores: np.ndarray | None,
    policy: Policy,
    state: ConversationState,
    *,
    now: float,
    pinned: Sequence[str] = (),
    requested: Sequence[str] = (),
    top_k: int | None = None,
    token_cap: int | None = None,
    exact: Mapping[str, int] | None = None,
    history_tokens: int = 0,
    named: np.ndarray | None = None,
    found: Sequence[str] = (),
    preload: bool = True,
    boost: np.ndarray | None = None,
    client_core: Sequence[str] | None = None,
) -> Selection:
    """Select the tools to forward.

    Args:
        catalog: the request's catalogue.
        scores: cosine score per catalogue tool, float32 shape ``(len(catalog),)``, or None
            when there is no semantic signal (then nothing is admitted semantically).
        policy: CORE patterns, bundles, top-k, τ, cap.
        state: the conversation's state before this turn (not modified).
        now: current time, Unix seconds; stamps admissions and uses.
        pinned: tools that must be forwarded (``tool_choice``, calls in the history); they
            take no semantic slot, so top-k always brings k candidates beyond them.
        requested: tools a meta-tool loaded this turn; admitted before semantic ones.
        top_k: overrides ``policy.top_k`` for this turn.
        token_cap: prompt tokens the forwarded tools that are neither CORE nor pinned may
            take (the planner's share of the upstream's context, less the messages); None:
            no token cap.
        exact: exact prompt tokens per tool fingerprint (the upstream's tokenizer), else
            :func:`selection.tokens.tool_tokens` estimates.
        history_tokens: prompt tokens of the conversation's messages (after the system
            prompt): what the upstream evaluates again when the tools change.
        named: the tools a one-intent request names (:attr:`selection.engine.Scores.named`).
        found: tools a search found in the conversation (with ``state.found``): kept
            loaded like pinned tools, and in the new state's ``found``.
        preload: whether semantic candidates are admitted (False: the client deferred
            tools and ``Policy.preload_deferred`` is off).
        boost: the learned part of ``scores`` (:attr:`selection.engine.Scores.boost`): a
            semantic candidate outside the top-k without it has reason ``learned``.
        client_core: the client's CORE in forwarding order, when the client runs its own
            deferral (:mod:`proxy.turn.deferral`); None: ``catalog.kept``, the tools it did
            not defer when it deferred any.

    The client's CORE comes first on every turn, before toolprune's CORE, outside every
    cap.

    A turn that starts from a block (a later turn, or a new conversation on its agent's
    block: ``state.turn`` > 0 or tools loaded) admits semantic candidates only when the
    turn's ``policy.refresh_rank`` best tools are not all forwarded or a pinned tool is
    new (see :class:`~selection.policy.Policy`). On a block that held a meta-tool
    (``state.meta_at``), the tier and the meta-tool's place are kept, so its text and
    everything before it stay byte-identical in the upstream's cache; admitted tools
    follow it. A new block puts the meta-tool after its tools
    (``Selection.state.meta_at``).

    At a cap (``policy.max_tools`` tools that are neither CORE nor pinned, or
    ``token_cap``), the least recently used tool not selected this turn is evicted; when
    nothing is evictable, the lowest-priority candidates are not admitted. A loaded set
    over a cap (a pin ended, the cap was lowered) is brought back under it first.
    Priority: pinned, requested, semantic (by score), bundle-mates.
    """
    layout = catalog_layout(catalog, policy)
    client = catalog.kept if client_core is None else tuple(
        name for name in client_core if catalog.get(name) is not None
    )
    core = [*client, *(name for name in layout.core if name not in set(client))]
    core_set = set(core)
    found_names = _unique_known([*state.found, *found], catalog, core_set)
    pinned_names = _unique_known([*found_names, *pinned], catalog, core_set)
    pinned_set = set(pinned_names)
    requested_names = _unique_known(requested, catalog, core_set | pinned_set)

    score_of: dict[str, float] = {}
    semantic: list[Candidate] = []
    tier: tuple[str, ...] = ()
    # A turn on a block changes it only when its best tools are not all forwarded or the
    # history called a tool new to it; then the upstream evaluates the history again,
    # once. It admits its best tools the block lacks (what made it change), with their
    # dependencies, and, as insurance against another change (which would cost that
    # history again, and more), candidates up to ``refresh_top_k`` (``spare``) whose
    # schemas cost at most ``refresh_share`` × the history's tokens. Those within the
    # turn's top-k (its token budget) may evict the least recently used tool (a change of
    # the block is paid already, and with chunk reuse a removal costs nothing); the others
    # come into free room only (``room_only``).
    has_block = state.turn > 0 or bool(state.loaded)
    changing = any(name not in state.loaded for name in pinned_names)
    spare: set[str] = set()
    room_only: set[str] = set()  # admitted into free room only, never evicting
    if scores is not None:
        score_of = dict(zip(catalog.names, np.asarray(scores).tolist(), strict=True))
    if scores is not None and preload:
        held = core_set | pinned_set | set(state.loaded)
        # A meta round (``requested``): the model named what it needs; the turn's own
        # candidates were admitted when it was planned.
        named_names = [] if named is None else [
            tool.name for tool, is_named in zip(catalog.tools, named, strict=True) if is_named
        ]
        refresh = not has_block or (
            not requested_names
            and not block_serves(score_of, held, policy.refresh_rank, named_names)
        )
        k = policy.top_k if top_k is None else top_k

        def candidates(k: int) -> Choice:
            return choose(
                catalog, scores, top_k=k, threshold=policy.threshold,
                exclude=core_set | pinned_set, policy=policy.ranking, max_count=policy.max_tools,
                named=named, group_of=layout.groups.of if layout.groups.shapes_ranking else None,
            )

        choice = candidates(k)
        tier = choice.tier
        top = {c.name for c in choice.candidates}
        if refresh and not has_block:
            semantic = list(choice.candidates)
        elif refresh:
            best = named_names or heapq.nlargest(
                min(policy.refresh_rank, k), score_of, key=score_of.__getitem__
            )
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
            room_only = needed - top  # past the token budget: no eviction for them
        if has_block and not requested_names and (refresh or changing) and k > 0:
            wide = candidates(max(k, policy.refresh_top_k))
            chosen = {c.name for c in semantic}
            extra = [c for c in wide.candidates if c.name not in chosen]
            semantic += extra
            spare = {c.name for c in extra}
            room_only |= spare - top
            tier = wide.tier

    mates = layout.mates
    bundle_names = [
        mate
        for name in [*requested_names, *(c.name for c in semantic)]
        for mate in mates.get(name, ())
        if mate not in core_set
    ]

    learned: set[str] = set()
    if boost is not None and scores is not None and semantic:
        k = policy.top_k if top_k is None else top_k
        learned = learned_names(catalog, scores, boost, [c.name for c in semantic], k)
    reasons: dict[str, Reason] = {}
    for name in found_names:
        reasons.setdefault(name, "found")
    for name in pinned_names:
        reasons.setdefault(name, "pinned")
    for name in requested_names:
        reasons.setdefault(name, "requested")
    for candidate in semantic:
        reasons.setdefault(
            candidate.name, "learned" if candidate.name in learned else candidate.reason
        )
    for name in bundle_names:
        reasons.setdefault(name, "bundle")

    loaded = {
        name: LoadedTool(times.admitted_at, times.last_used_at)
        for name, times in state.loaded.items()
        if catalog.index_of(name) is not None and name not in core_set
    }
    for name in reasons:
        if name in loaded:
            loaded[name].last_used_at = now
    selected_now = set(reasons)

    admitted: list[str] = []
    evicted: list[str] = []

    def cost(name: str) -> int:
        tool = catalog.get(name)
        return tool_tokens(tool, exact) if tool is not None else 0

    cap = token_cap if token_cap is not None else math.inf
    uncapped = [name for name in loaded if name not in pinned_set]
    spent = sum(cost(name) for name in uncapped)
    count = len(uncapped)

    def evict(over_context: bool) -> bool:
        """Evict the least recently used tool not selected this turn; past the token cap
        (the prompt would not fit the context), else the lowest-scored selected one.
        False when nothing is evictable."""
        nonlocal count, spent
        victims = [n for n in loaded if n not in pinned_set and n not in selected_now]
        if victims:
            # Ties (tools admitted together): the latest in the block, so the longest
            # prefix of it, and of the upstream's KV cache, stays.
            victim = min(reversed(victims), key=lambda n: loaded[n].last_used_at)
        elif over_context and (victims := [n for n in loaded if n not in pinned_set]):
            victim = min(reversed(victims), key=lambda n: score_of.get(n, -math.inf))
        else:
            return False
        del loaded[victim]
        evicted.append(victim)
        count -= 1
        spent -= cost(victim)
        return True

    def make_room(name_cost: int) -> bool:
        """Evict until one more tool of ``name_cost`` tokens fits both caps."""
        while count + 1 > policy.max_tools or spent + name_cost > cap:
            if not evict(over_context=False):
                return False
        return True

    # A pin ended, the cap was lowered or the context shrank: back under the caps first.
    while (count > policy.max_tools or spent > cap) and evict(over_context=spent > cap):
        pass
    insurance = policy.refresh_share * history_tokens
    for name in reasons:  # insertion order is admission priority
        if name in loaded:
            continue
        if name not in pinned_set:
            name_cost = cost(name)
            if name in spare and name_cost > insurance:
                continue
            full = count + 1 > policy.max_tools or spent + name_cost > cap
            if name in room_only and full:
                continue
            if not make_room(name_cost):
                continue
            if name in spare:
                insurance -= name_cost
            count += 1
            spent += name_cost
        loaded[name] = LoadedTool(admitted_at=now, last_used_at=now)
        admitted.append(name)

    client_set = set(client)
    tools = [
        SelectedTool(name, "client" if name in client_set else "core", score_of.get(name))
        for name in core
    ]
    tools += [
        SelectedTool(name, reasons.get(name, "sticky"), score_of.get(name)) for name in loaded
    ]
    forwarded = core_set | set(loaded)
    left_out: list[tuple[str, float]] = []
    if scores is not None:  # best first, ties in catalogue order (a stable sort)
        for position in np.argsort(-scores, kind="stable"):
            name = catalog.tools[position].name
            if name not in forwarded:
                left_out.append((name, float(scores[position])))
                if len(left_out) == LEFT_OUT_REPORTED:
                    break
    if has_block and state.meta_at is not None:
        # The meta-tool keeps its text and its place in the block (the upstream's cached
        # prefix): tools admitted now follow it, tools evicted before it move it up. A
        # tier tool admitted since stays listed (loading it again is a no-op).
        meta_at = sum(name in loaded for name in list(state.loaded)[: state.meta_at])
        tier = tuple(name for name in state.tier if catalog.index_of(name) is not None)
    else:
        meta_at = len(loaded)
        tier = tuple(name for name in tier if name not in forwarded and catalog.index_of(name) is not None)
    new_state = ConversationState(
        loaded, state.turn, state.meta_calls, list(tier), state.history_tokens, meta_at=meta_at,
        found=found_names,
    )
    parents = tuple(
        (c.name, c.parent) for c in semantic if c.parent is not None and c.name in loaded
    )
    return Selection(
        tuple(tools), tuple(admitted), tuple(evicted), tuple(left_out), new_state, tier, parents
    )
