"""The client's deferral contract in selection (selection/catalog/catalog.py, selection/choosing/selector.py,
selection/choosing/state.py): tools without ``defer_loading`` are the client's CORE, forwarded first
on every turn; deferred tools are the pool; toolprune's own pre-loading from the pool can be
switched off; found tools stay loaded; each forwarded tool's provenance. Hand-made
catalogues and exact scores, so every admission is known."""

from __future__ import annotations

from typing import Any

import numpy as np

from selection.catalog.catalog import Catalog, defers_loading, parse_tools, without_deferral
from selection.catalog.policy import Policy
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from tests.support.selection import ranked


def entry(name: str, deferred: bool | None = None, nested: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": f"The {name} tool."}
    tool: dict[str, Any] = {"type": "function", "function": function}
    if deferred is not None:
        (function if nested else tool)["defer_loading"] = deferred
    return tool


def deferred_catalog(kept: list[str], deferred: list[str]) -> Catalog:
    return parse_tools([*(entry(n) for n in kept), *(entry(n, True) for n in deferred)])


def scores(catalog: Catalog, **by_name: float) -> np.ndarray:
    values = np.zeros(len(catalog), dtype=np.float32)
    for name, score in by_name.items():
        values[catalog.index_of(name)] = score
    return values


POLICY = Policy(top_k=2, threshold=0.5, max_tools=16, core=("core_*",))


def test_defer_loading_is_read_on_the_entry_or_its_function_and_removed_for_the_upstream() -> None:
    top, nested, plain = entry("a", True), entry("b", True, nested=True), entry("c")
    assert defers_loading(top) and defers_loading(nested) and not defers_loading(plain)
    assert not defers_loading(entry("d", False))
    assert without_deferral(top) == entry("a") and without_deferral(nested) == entry("b")
    assert without_deferral(plain) is plain  # nothing to remove: the client's own object
    assert "defer_loading" in top  # the client's entry is never modified


def test_without_deferral_the_catalogue_has_no_client_core() -> None:
    catalog = parse_tools([entry("a"), entry("b"), entry("c", False)])
    assert catalog.deferred == frozenset() and catalog.kept == ()


def test_the_client_core_is_every_tool_it_did_not_defer_in_catalogue_order() -> None:
    catalog = parse_tools([entry("x", True), entry("k2"), entry("y", True), entry("k1")])
    assert catalog.deferred == {"x", "y"}
    assert catalog.kept == ("k2", "k1")


def test_the_client_core_comes_first_every_turn_then_toolprune_core_then_preloaded() -> None:
    catalog = deferred_catalog(["k1", "k2"], ["core_me", "d1", "d2", "d3"])
    selection = select(catalog, ranked(scores(catalog, d2=0.9, k1=0.99)), POLICY, ConversationState(), TurnFacts(now=1))
    assert selection.names == ["k1", "k2", "core_me", "d2"]
    assert [t.reason for t in selection.tools] == ["client", "client", "core", "semantic"]
    assert selection.provenance == {
        "k1": "client", "k2": "client", "core_me": "toolprune", "d2": "toolprune",
    }
    # A later turn: the client's CORE is still there, though no score names it.
    later = select(catalog, ranked(scores(catalog, d3=0.9)), POLICY, selection.state, TurnFacts(now=2))
    assert later.names[:3] == ["k1", "k2", "core_me"]


def test_preloading_off_loads_nothing_by_ranking() -> None:
    catalog = deferred_catalog(["k1"], ["d1", "d2", "d3"])
    selection = select(catalog, ranked(scores(catalog, d1=0.9, d2=0.8)), POLICY, ConversationState(), TurnFacts(now=1, preload=False))
    assert selection.names == ["k1"]
    assert selection.left_out[0] == ("d1", np.float32(0.9))  # still reported
    # Tools called in the history and tools found still load.
    pinned = select(catalog, None, POLICY, ConversationState(), TurnFacts(now=1, pinned=["d3"], preload=False))
    assert pinned.names == ["k1", "d3"]


def test_found_tools_stay_loaded_and_are_remembered_with_their_provenance() -> None:
    catalog = deferred_catalog(["k1"], [f"d{i}" for i in range(6)])
    tight = Policy(top_k=2, threshold=0.5, max_tools=1)
    first = select(catalog, None, tight, ConversationState(), TurnFacts(now=1, found=["d4", "d5", "zz"], preload=False))
    assert first.names == ["k1", "d4", "d5"]  # past max_tools: found tools take no slot
    assert first.state.found == ["d4", "d5"]  # unknown names are dropped
    assert [t.reason for t in first.tools] == ["client", "found", "found"]
    # Later turns keep them, from the state alone, and still say a search found them.
    later = select(catalog, ranked(scores(catalog, d0=0.9, d1=0.8)), tight, first.state, TurnFacts(now=2))
    assert {"d4", "d5"} <= set(later.names)
    assert later.provenance["d4"] == "search" and later.provenance["d5"] == "search"
    restored = ConversationState.from_json(later.state.to_json())
    assert restored.found == ["d4", "d5"]


def test_a_state_without_found_tools_serialises_as_before() -> None:
    state = ConversationState()
    assert "found" not in state.to_json()
    assert ConversationState.from_json(state.to_json()).found == []


def test_no_deferral_selects_exactly_as_before() -> None:
    plain = parse_tools([entry(n) for n in ("a", "b", "c", "d")])
    flagged = parse_tools([entry(n, False) for n in ("a", "b", "c", "d")])
    values = scores(plain, b=0.9, c=0.7)
    one = select(plain, ranked(values), POLICY, ConversationState(), TurnFacts(now=1))
    two = select(flagged, ranked(values), POLICY, ConversationState(), TurnFacts(now=1))
    assert one.names == two.names == ["b", "c"]
    assert {t.reason for t in one.tools} == {"semantic"}
    assert set(one.provenance.values()) == {"toolprune"}
