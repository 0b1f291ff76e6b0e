"""A turn's selection as forwarded: the tools in block order with why each is there, the
tools left out, the meta-tool's tier and place, and the conversation's next state. The
block order is the upstream's KV-cache order: the client's CORE, toolprune's CORE, then
the loaded tools in admission order with the meta-tool after the tools of the block's
first request. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from selection.catalog.catalog import Catalog
from selection.choosing.admission import LoadedSet
from selection.choosing.contract import Contract
from selection.choosing.state import ConversationState
from selection.choosing.turn_scores import best_positions
from selection.choosing.wanted import Wanted

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
    """A forwarded tool and the reason it is there (``score``: its score, when scored)."""

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
    ``outside``: on a frozen block, the tools the turn selected (found, pinned, requested,
    wanted by its ranking) that stay out of it, in priority order: they reach the model
    in the conversation. ``missing``: of those, the turn's best tools and their
    dependencies, what a block that grows would have admitted as needed (insurance aside).
    """

    tools: tuple[SelectedTool, ...]
    admitted: tuple[str, ...]
    evicted: tuple[str, ...]
    left_out: tuple[tuple[str, float], ...]
    state: ConversationState
    tier: tuple[str, ...] = ()
    parents: tuple[tuple[str, str], ...] = ()
    outside: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the forwarded tools differ from the previous turn's."""
        return bool(self.admitted or self.evicted)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def keeping_reasons(self, earlier: Selection) -> Selection:
        """This re-selection with the reasons and dependency parents ``earlier`` (the same
        request's previous round) gave the tools it forwarded: after meta-calls the turn is
        selected again on the state the first round stored, which holds that round's tools
        as loaded and would call each of them ``sticky``."""
        before = {tool.name: tool for tool in earlier.tools}
        tools = tuple(
            before[tool.name] if tool.reason == "sticky" and tool.name in before else tool
            for tool in self.tools
        )
        forwarded = set(self.names)
        parents = {**dict(self.parents), **dict(earlier.parents)}
        return replace(self, tools=tools, parents=tuple(
            (name, parent) for name, parent in parents.items() if name in forwarded))

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


def left_out(catalog: Catalog, scores: np.ndarray, forwarded: set[str]) -> list[tuple[str, float]]:
    """The :data:`LEFT_OUT_REPORTED` best-scored tools not ``forwarded``, ``(name, score)``,
    best first, ties in catalogue order (a stable sort)."""
    found: list[tuple[str, float]] = []  # at most len(forwarded) of the best are passed over
    for position in best_positions(scores, LEFT_OUT_REPORTED + len(forwarded)).tolist():
        name = catalog.tools[position].name
        if name not in forwarded:
            found.append((name, float(scores[position])))
            if len(found) == LEFT_OUT_REPORTED:
                break
    return found


def block(
    catalog: Catalog, scores: np.ndarray | None, state: ConversationState, contract: Contract,
    loaded: LoadedSet, reasons: Mapping[str, Reason], wants: Wanted,
    score_of: Mapping[str, float], *, has_block: bool, outside: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> Selection:
    """The turn's :class:`Selection`. On a block that held a meta-tool (``state.meta_at``)
    the meta-tool keeps its text and place (the upstream's cached prefix): tools admitted
    now follow it, tools evicted before it move it up, and a tier tool admitted since
    stays listed (loading it again is a no-op). A new block puts the meta-tool after its
    tools."""
    client = set(contract.client)
    tools = [
        SelectedTool(name, "client" if name in client else "core", score_of.get(name))
        for name in contract.core
    ]
    tools += [
        SelectedTool(name, reasons.get(name, "sticky"), score_of.get(name))
        for name in loaded.loaded
    ]
    forwarded = contract.core_set | set(loaded.loaded)
    if has_block and state.meta_at is not None:
        meta_at = sum(name in loaded.loaded for name in list(state.loaded)[: state.meta_at])
        tier = tuple(name for name in state.tier if catalog.index_of(name) is not None)
    else:
        meta_at = len(loaded.loaded)
        tier = tuple(name for name in wants.tier
                     if name not in forwarded and catalog.index_of(name) is not None)
    new_state = ConversationState(
        loaded.loaded, state.turn, state.meta_calls, list(tier), state.history_tokens,
        meta_at=meta_at, found=list(contract.found), delivered=list(state.delivered),
        exchanges=list(state.exchanges), seen=state.seen,
    )
    parents = tuple(
        (c.name, c.parent) for c in wants.semantic
        if c.parent is not None and c.name in loaded.loaded
    )
    return Selection(
        tuple(tools), tuple(loaded.admitted), tuple(loaded.evicted),
        tuple(left_out(catalog, scores, forwarded)) if scores is not None else (),
        new_state, tier, parents, tuple(outside), tuple(missing),
    )
