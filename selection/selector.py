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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from selection.catalog import Catalog
from selection.policy import Policy, catalog_layout
from selection.ranking import Candidate, choose
from selection.state import ConversationState, LoadedTool

Reason = Literal[
    "core", "pinned", "requested", "semantic", "named", "dependency", "bundle", "sticky"
]

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
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]


def semantic_candidates(
    catalog: Catalog, scores: np.ndarray, top_k: int, threshold: float, exclude: set[str]
) -> list[tuple[str, float]]:
    """The ``top_k`` best-scored tools not in ``exclude`` whose score is ≥ ``threshold``
    (τ, inclusive), best first; ties broken by catalogue order.

    ``scores``: float32 array of shape ``(len(catalog),)``, cosine per tool.
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
    named: np.ndarray | None = None,
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
        named: the tools a one-intent request names (:attr:`selection.engine.Scores.named`).

    At the cap (``policy.max_tools`` tools that are neither CORE nor pinned), the least
    recently used tool not selected this turn is evicted; when nothing is evictable, the
    lowest-priority candidates are not admitted. A loaded set over the cap (a pin ended,
    or the cap was lowered) is brought back under it first. Priority: pinned, requested, semantic
    (by score), bundle-mates.
    """
    layout = catalog_layout(catalog, policy)
    core = list(layout.core)
    core_set = set(core)
    pinned_names = _unique_known(pinned, catalog, core_set)
    pinned_set = set(pinned_names)
    requested_names = _unique_known(requested, catalog, core_set | pinned_set)

    score_of: dict[str, float] = {}
    semantic: list[Candidate] = []
    tier: tuple[str, ...] = ()
    if scores is not None:
        score_of = {tool.name: float(s) for tool, s in zip(catalog.tools, scores, strict=True)}
        k = policy.top_k if top_k is None else top_k
        choice = choose(
            catalog, scores, top_k=k, threshold=policy.threshold,
            exclude=core_set | pinned_set, policy=policy.ranking, max_count=policy.max_tools,
            named=named,
        )
        semantic, tier = list(choice.candidates), choice.tier

    mates = layout.mates
    bundle_names = [
        mate
        for name in [*requested_names, *(c.name for c in semantic)]
        for mate in mates.get(name, ())
        if mate not in core_set
    ]

    reasons: dict[str, Reason] = {}
    for name in pinned_names:
        reasons.setdefault(name, "pinned")
    for name in requested_names:
        reasons.setdefault(name, "requested")
    for candidate in semantic:
        reasons.setdefault(candidate.name, candidate.reason)
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

    def evict_least_recently_used() -> bool:
        victims = [n for n in loaded if n not in pinned_set and n not in selected_now]
        if not victims:
            return False
        victim = min(victims, key=lambda n: loaded[n].last_used_at)  # ties: oldest admission
        del loaded[victim]
        evicted.append(victim)
        return True

    uncapped = sum(1 for name in loaded if name not in pinned_set)
    while uncapped > policy.max_tools and evict_least_recently_used():  # a pin ended, cap lowered
        uncapped -= 1
    for name in reasons:  # insertion order is admission priority
        if name in loaded:
            continue
        if name not in pinned_set and uncapped >= policy.max_tools:
            if not evict_least_recently_used():
                continue
            uncapped -= 1
        loaded[name] = LoadedTool(admitted_at=now, last_used_at=now)
        admitted.append(name)
        if name not in pinned_set:
            uncapped += 1

    tools = [SelectedTool(name, "core", score_of.get(name)) for name in core]
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
    new_state = ConversationState(loaded, state.turn, state.meta_calls)
    parents = tuple(
        (c.name, c.parent) for c in semantic if c.parent is not None and c.name in loaded
    )
    return Selection(
        tuple(tools), tuple(admitted), tuple(evicted), tuple(left_out), new_state,
        tuple(name for name in tier if name not in forwarded), parents,
    )
