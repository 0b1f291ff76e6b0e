"""Tests for selection.choosing.selector: the pure selection rules, with exact hand-made scores.

Every test builds its scores as float32 arrays by hand, so which tool is admitted, and why,
is known exactly. Property tests (Hypothesis) check the invariants over random
catalogues, scores, policies and multi-turn sequences.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selection.catalog.catalog import Catalog, parse_tools
from selection.catalog.policy import Bundle, Policy
from selection.choosing.block_order import LEFT_OUT_REPORTED, Selection
from selection.choosing.candidates import semantic_candidates
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState, LoadedTool
from tests.support.selection import ranked

# τ used by most tests; every unscored tool gets 0.0, well below it.
TAU = 0.5


def catalog_of(*names: str) -> Catalog:
    return parse_tools(
        [
            {"type": "function", "function": {"name": name, "description": f"The {name} tool."}}
            for name in names
        ]
    )


def scores_for(catalog: Catalog, default: float = 0.0, **by_name: float) -> np.ndarray:
    values = np.full(len(catalog), default, dtype=np.float32)
    for name, score in by_name.items():
        position = catalog.index_of(name)
        assert position is not None, name
        values[position] = score
    return values


def policy(**overrides: object) -> Policy:
    knobs: dict[str, object] = {"top_k": 8, "threshold": TAU, "max_tools": 16}
    knobs.update(overrides)
    return Policy(**knobs)  # type: ignore[arg-type]


def state_of(*loaded: tuple[str, float, float]) -> ConversationState:
    """A state whose loaded tools are ``(name, admitted_at, last_used_at)``, in order."""
    return ConversationState({name: LoadedTool(a, u) for name, a, u in loaded})


def reasons(selection: Selection) -> dict[str, str]:
    return {tool.name: tool.reason for tool in selection.tools}


# --------------------------------------------------------------------------- CORE


def test_core_tools_are_always_forwarded_first_in_catalogue_order() -> None:
    catalog = catalog_of("alpha", "get_me", "beta", "core_b", "get_repo", "gamma")
    chosen = select(catalog, ranked(scores_for(catalog, beta=0.9, gamma=0.8)), policy(core=("core_b", "get_*")), state_of(("alpha", 1.0, 1.0)), TurnFacts(now=2.0))
    assert chosen.names[:3] == ["get_me", "core_b", "get_repo"]
    assert [t.reason for t in chosen.tools[:3]] == ["core", "core", "core"]
    assert chosen.names == ["get_me", "core_b", "get_repo", "alpha", "beta", "gamma"]


def test_core_glob_patterns_match_whole_names_case_sensitively() -> None:
    catalog = catalog_of("get_me", "forget_me", "Get_it", "list_x")
    chosen = select(catalog, None, policy(core=("get_*", "list_?")), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["get_me", "list_x"]


def test_core_tools_are_forwarded_even_with_no_scores_and_empty_state() -> None:
    catalog = catalog_of("a", "b", "c")
    chosen = select(catalog, None, policy(core=("b",)), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["b"]
    assert chosen.state.loaded == {}


def test_core_tools_never_take_a_top_k_slot_or_enter_the_loaded_state() -> None:
    catalog = catalog_of("core", "a", "b")
    chosen = select(catalog, ranked(scores_for(catalog, core=1.0, a=0.9, b=0.8)), policy(core=("core",), top_k=1), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["core", "a"]
    assert list(chosen.state.loaded) == ["a"]
    assert chosen.admitted == ("a",)


def test_core_tools_do_not_count_against_the_cap() -> None:
    catalog = catalog_of("c1", "c2", "c3", "a", "b")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), policy(core=("c*",), max_tools=2), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["c1", "c2", "c3", "a", "b"]


def test_a_core_tool_left_in_an_old_state_is_forwarded_once_as_core() -> None:
    catalog = catalog_of("a", "core")
    chosen = select(catalog, None, policy(core=("core",)), state_of(("core", 1, 1), ("a", 1, 1)), TurnFacts(now=2))
    assert chosen.names == ["core", "a"]
    assert reasons(chosen) == {"core": "core", "a": "sticky"}
    assert list(chosen.state.loaded) == ["a"]


# --------------------------------------------------------------------------- PINNED


def test_pinned_tools_are_forwarded_without_score_beyond_the_cap() -> None:
    catalog = catalog_of("a", "b", "p1", "p2")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.9)), policy(max_tools=1), state_of(("b", 1, 1)), TurnFacts(now=2, pinned=["p1", "p2"]))
    assert chosen.names == ["p1", "p2", "a"]
    assert reasons(chosen)["p1"] == "pinned" and reasons(chosen)["p2"] == "pinned"
    # The cap (1) applies to the others only: a replaced b.
    assert [n for n in chosen.names if n not in ("p1", "p2")] == ["a"]
    assert chosen.evicted == ("b",)


def test_pinned_tools_are_never_evicted_even_when_least_recently_used() -> None:
    catalog = catalog_of("old_pinned", "x", "new")
    state = state_of(("old_pinned", 0, 0), ("x", 5, 5))
    chosen = select(catalog, ranked(scores_for(catalog, new=0.9)), policy(max_tools=1), state, TurnFacts(now=9, pinned=["old_pinned"]))
    assert chosen.names == ["old_pinned", "new"]
    assert chosen.evicted == ("x",)


def test_pinned_tools_are_admitted_first_in_admission_order() -> None:
    catalog = catalog_of("s", "p", "r")
    chosen = select(catalog, ranked(scores_for(catalog, s=0.9)), policy(), ConversationState(), TurnFacts(now=1, pinned=["p"], requested=["r"]))
    assert chosen.admitted == ("p", "r", "s")
    assert chosen.names == ["p", "r", "s"]
    assert [t.reason for t in chosen.tools] == ["pinned", "requested", "semantic"]


def test_unknown_pinned_names_are_ignored() -> None:
    catalog = catalog_of("a", "b")
    chosen = select(catalog, None, policy(), ConversationState(), TurnFacts(now=1, pinned=["ghost", "b"]))
    assert chosen.names == ["b"]
    assert "ghost" not in chosen.state.loaded


def test_pinned_names_repeated_are_forwarded_once() -> None:
    catalog = catalog_of("a", "b")
    chosen = select(catalog, None, policy(), ConversationState(), TurnFacts(now=1, pinned=["b", "b", "a", "b"]))
    assert chosen.names == ["b", "a"]


def test_a_pinned_core_tool_is_forwarded_once_as_core() -> None:
    catalog = catalog_of("a", "core")
    chosen = select(catalog, None, policy(core=("core",)), ConversationState(), TurnFacts(now=1, pinned=["core"]))
    assert chosen.names == ["core"]
    assert reasons(chosen) == {"core": "core"}


def test_a_sticky_tool_that_is_pinned_is_reported_pinned_and_keeps_its_place() -> None:
    catalog = catalog_of("a", "b", "c")
    chosen = select(catalog, None, policy(), state_of(("a", 1, 1), ("b", 1, 1)), TurnFacts(now=2, pinned=["a"]))
    assert chosen.names == ["a", "b"]
    assert reasons(chosen) == {"a": "pinned", "b": "sticky"}
    assert chosen.admitted == ()
    assert chosen.state.loaded["a"] == LoadedTool(1, 2)


# --------------------------------------------------------------------------- SEMANTIC


def test_threshold_is_inclusive_a_score_equal_to_tau_is_admitted() -> None:
    catalog = catalog_of("equal", "below", "above")
    below = float(np.nextafter(np.float32(TAU), np.float32(0)))
    chosen = select(catalog, ranked(scores_for(catalog, equal=TAU, below=below, above=0.75)), policy(), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["above", "equal"]
    assert "below" not in chosen.names


def test_threshold_is_inclusive_for_a_tau_that_float32_cannot_represent() -> None:
    # τ given in the policy as float32's value of 0.3 (what a float32 score of 0.3 is).
    tau = float(np.float32(0.3))
    catalog = catalog_of("a", "b")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.3)), policy(threshold=tau), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["a"]


def test_top_k_admits_only_the_k_best_scored_tools_best_first() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.6, b=0.9, c=0.7, d=0.8, e=0.55)), policy(top_k=3), ConversationState(), TurnFacts(now=1))
    assert chosen.admitted == ("b", "d", "c")
    assert [(t.name, t.reason, t.score) for t in chosen.tools] == [
        ("b", "semantic", pytest.approx(0.9)),
        ("d", "semantic", pytest.approx(0.8)),
        ("c", "semantic", pytest.approx(0.7)),
    ]


def test_top_k_ties_are_broken_by_catalogue_order() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    chosen = select(catalog, ranked(scores_for(catalog, b=0.7, c=0.7, d=0.7)), policy(top_k=2), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["b", "c"]


def test_top_k_argument_overrides_the_policy_for_one_turn() -> None:
    catalog = catalog_of("a", "b", "c")
    scores = scores_for(catalog, a=0.9, b=0.8, c=0.7)
    chosen = select(catalog, ranked(scores), policy(top_k=1), ConversationState(), TurnFacts(now=1, top_k=3))
    assert chosen.names == ["a", "b", "c"]


def test_top_k_zero_admits_nothing_semantically() -> None:
    catalog = catalog_of("a", "b")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.9)), policy(top_k=0), ConversationState(), TurnFacts(now=1))
    assert chosen.names == []


def test_scores_none_admits_nothing_semantically() -> None:
    catalog = catalog_of("a", "b", "c")
    chosen = select(catalog, None, policy(threshold=-1.0), state_of(("b", 1, 1)), TurnFacts(now=2, requested=["c"]))
    assert chosen.names == ["b", "c"]
    assert reasons(chosen) == {"b": "sticky", "c": "requested"}
    assert chosen.left_out == ()
    assert all(tool.score is None for tool in chosen.tools)


def test_a_reselection_after_meta_calls_keeps_the_first_rounds_reasons() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    ranking = ranked(scores_for(catalog, a=0.9))
    first = select(catalog, ranking, policy(), state_of(("b", 1, 1)), TurnFacts(now=2))
    assert reasons(first) == {"b": "sticky", "a": "semantic"}
    again = select(catalog, ranking, policy(), first.state, TurnFacts(now=2, requested=["c"]))
    assert reasons(again) == {"b": "sticky", "a": "sticky", "c": "requested"}  # as stored
    kept = again.keeping_reasons(first)
    assert reasons(kept) == {"b": "sticky", "a": "semantic", "c": "requested"}
    assert kept.names == again.names and kept.state == again.state
    assert [t.score for t in kept.tools] == [t.score for t in again.tools]


def test_semantic_candidates_skip_excluded_names_without_losing_a_slot() -> None:
    catalog = catalog_of("a", "b", "c")
    found = semantic_candidates(
        catalog, scores_for(catalog, a=0.9, b=0.8, c=0.7), 2, TAU, exclude={"a"}
    )
    assert found == [("b", pytest.approx(0.8)), ("c", pytest.approx(0.7))]


def test_semantic_candidates_for_an_empty_catalogue_are_empty() -> None:
    assert semantic_candidates(catalog_of(), np.zeros(0, np.float32), 3, 0.0, set()) == []


def test_scores_are_reported_for_every_forwarded_tool_when_scored() -> None:
    catalog = catalog_of("core", "sticky", "new")
    chosen = select(catalog, ranked(scores_for(catalog, core=0.1, sticky=0.2, new=0.9)), policy(core=("core",)), state_of(("sticky", 1, 1)), TurnFacts(now=2))
    assert [(t.name, t.reason, t.score) for t in chosen.tools] == [
        ("core", "core", pytest.approx(0.1)),
        ("sticky", "sticky", pytest.approx(0.2)),
        ("new", "semantic", pytest.approx(0.9)),
    ]


# --------------------------------------------------------------------------- STICKY


def test_sticky_tools_from_state_are_forwarded_in_their_admission_order() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    chosen = select(catalog, None, policy(), state_of(("c", 1, 1), ("a", 2, 2)), TurnFacts(now=3))
    assert chosen.names == ["c", "a"]
    assert reasons(chosen) == {"c": "sticky", "a": "sticky"}


def test_sticky_tools_missing_from_the_catalogue_are_dropped() -> None:
    catalog = catalog_of("a", "b")
    chosen = select(catalog, None, policy(), state_of(("gone", 1, 1), ("a", 1, 1)), TurnFacts(now=2))
    assert chosen.names == ["a"]
    assert list(chosen.state.loaded) == ["a"]


def test_a_tool_selected_again_keeps_its_place_and_refreshes_its_last_use() -> None:
    catalog = catalog_of("a", "b", "c")
    chosen = select(catalog, ranked(scores_for(catalog, b=0.9)), policy(), state_of(("b", 1, 1), ("c", 2, 2)), TurnFacts(now=7))
    assert chosen.names == ["b", "c"]
    assert chosen.admitted == ()
    assert reasons(chosen)["b"] == "semantic"
    assert chosen.state.loaded["b"] == LoadedTool(admitted_at=1, last_used_at=7)
    assert chosen.state.loaded["c"] == LoadedTool(admitted_at=2, last_used_at=2)


def test_selection_does_not_modify_the_given_state() -> None:
    catalog = catalog_of("a", "b", "c")
    state = state_of(("a", 1, 1), ("b", 2, 2))
    before = state.to_json()
    select(catalog, ranked(scores_for(catalog, a=0.9, c=0.8)), policy(max_tools=2), state, TurnFacts(now=5))
    assert state.to_json() == before


def test_new_state_keeps_the_turn_and_meta_call_counters() -> None:
    catalog = catalog_of("a")
    state = ConversationState({}, turn=4, meta_calls=2)
    chosen = select(catalog, None, policy(), state, TurnFacts(now=1))
    assert (chosen.state.turn, chosen.state.meta_calls) == (4, 2)


# --------------------------------------------------------------------------- BUNDLES


def test_bundle_mates_are_admitted_with_their_member() -> None:
    catalog = catalog_of("create_pr", "merge_pr", "review_pr", "other")
    pol = policy(bundles=(Bundle("prs", ("create_pr", "merge_pr", "review_pr")),))
    chosen = select(catalog, ranked(scores_for(catalog, merge_pr=0.9)), pol, ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["merge_pr", "create_pr", "review_pr"]
    assert reasons(chosen) == {"merge_pr": "semantic", "create_pr": "bundle", "review_pr": "bundle"}


def test_bundle_mates_come_after_every_semantic_candidate() -> None:
    catalog = catalog_of("a1", "a2", "b")
    pol = policy(bundles=(Bundle("a", ("a1", "a2")),))
    chosen = select(catalog, ranked(scores_for(catalog, a1=0.9, b=0.8)), pol, ConversationState(), TurnFacts(now=1))
    assert chosen.admitted == ("a1", "b", "a2")


def test_bundle_mates_of_requested_tools_are_admitted() -> None:
    catalog = catalog_of("a1", "a2", "b")
    pol = policy(bundles=(Bundle("a", ("a1", "a2")),))
    chosen = select(catalog, None, pol, ConversationState(), TurnFacts(now=1, requested=["a2"]))
    assert chosen.names == ["a2", "a1"]
    assert reasons(chosen) == {"a2": "requested", "a1": "bundle"}


def test_bundle_mates_that_are_core_stay_core() -> None:
    catalog = catalog_of("a1", "a2", "a3")
    pol = policy(core=("a3",), bundles=(Bundle("a", ("a1", "a2", "a3")),))
    chosen = select(catalog, ranked(scores_for(catalog, a1=0.9)), pol, ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["a3", "a1", "a2"]
    assert reasons(chosen) == {"a3": "core", "a1": "semantic", "a2": "bundle"}


def test_namespace_bundles_are_derived_from_server_prefixes() -> None:
    catalog = catalog_of("gh__get_pr", "gh__merge_pr", "fs__read", "fs__write")
    chosen = select(catalog, ranked(scores_for(catalog, fs__read=0.9)), policy(), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["fs__read", "fs__write"]
    assert reasons(chosen)["fs__write"] == "bundle"


def test_namespace_bundles_are_not_derived_when_disabled_or_single_namespace() -> None:
    catalog = catalog_of("gh__get_pr", "gh__merge_pr", "fs__read", "fs__write")
    scores = scores_for(catalog, fs__read=0.9)
    off = select(catalog, ranked(scores), policy(derive_bundles=False), ConversationState(), TurnFacts(now=1))
    assert off.names == ["fs__read"]
    single = catalog_of("gh__get_pr", "gh__merge_pr", "plain")
    one = select(single, ranked(scores_for(single, gh__get_pr=0.9)), policy(), ConversationState(), TurnFacts(now=1))
    assert one.names == ["gh__get_pr"]


def test_bundles_larger_than_max_bundle_size_do_not_travel_together() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    pol = policy(bundles=(Bundle("big", ("a", "b", "c")),), max_bundle_size=2)
    chosen = select(catalog, ranked(scores_for(catalog, a=0.9)), pol, ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["a"]


# --------------------------------------------------------------------------- CAP


def test_at_the_cap_the_least_recently_used_unpinned_tool_is_evicted() -> None:
    catalog = catalog_of("x", "y", "z")
    state = state_of(("x", 1, 10), ("y", 2, 5))
    chosen = select(catalog, ranked(scores_for(catalog, z=0.9)), policy(max_tools=2), state, TurnFacts(now=11))
    assert chosen.evicted == ("y",)
    assert chosen.admitted == ("z",)
    assert chosen.names == ["x", "z"]
    assert list(chosen.state.loaded) == ["x", "z"]


def test_eviction_ties_on_last_use_evict_the_latest_in_the_block() -> None:
    # The longest prefix of the block (and of the upstream's KV cache of it) stays.
    catalog = catalog_of("x", "y", "z")
    state = state_of(("x", 1, 5), ("y", 2, 5))
    chosen = select(catalog, ranked(scores_for(catalog, z=0.9)), policy(max_tools=2), state, TurnFacts(now=11))
    assert chosen.evicted == ("y",)
    assert chosen.names == ["x", "z"]


def test_eviction_spares_tools_selected_this_turn() -> None:
    catalog = catalog_of("x", "y", "z")
    # x is the least recently used but selected again this turn: y goes instead.
    state = state_of(("x", 1, 1), ("y", 2, 5))
    chosen = select(catalog, ranked(scores_for(catalog, x=0.8, z=0.9)), policy(max_tools=2), state, TurnFacts(now=11))
    assert chosen.evicted == ("y",)
    assert chosen.names == ["x", "z"]


def test_eviction_never_touches_core_tools() -> None:
    catalog = catalog_of("core", "x", "z")
    chosen = select(catalog, ranked(scores_for(catalog, z=0.9)), policy(core=("core",), max_tools=1), state_of(("x", 1, 1)), TurnFacts(now=2))
    assert chosen.names == ["core", "z"]
    assert chosen.evicted == ("x",)


def test_when_nothing_is_evictable_lower_priority_candidates_are_not_admitted() -> None:
    catalog = catalog_of("a", "b", "c")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.7, b=0.9, c=0.8)), policy(max_tools=2), ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["b", "c"]
    assert chosen.evicted == ()
    assert "a" in dict(chosen.left_out)


def test_requested_tools_are_admitted_before_semantic_ones_at_the_cap() -> None:
    catalog = catalog_of("r", "s")
    chosen = select(catalog, ranked(scores_for(catalog, s=0.99)), policy(max_tools=1), ConversationState(), TurnFacts(now=1, requested=["r"]))
    assert chosen.names == ["r"]
    assert reasons(chosen) == {"r": "requested"}
    assert chosen.left_out[0] == ("s", pytest.approx(0.99))


def test_unknown_and_core_requested_names_are_ignored() -> None:
    catalog = catalog_of("core", "a")
    chosen = select(catalog, None, policy(core=("core",)), ConversationState(), TurnFacts(now=1, requested=["nope", "core", "a"]))
    assert chosen.names == ["core", "a"]
    assert chosen.admitted == ("a",)


def test_semantic_candidates_are_admitted_before_bundle_mates_at_the_cap() -> None:
    catalog = catalog_of("a1", "a2", "b")
    pol = policy(bundles=(Bundle("a", ("a1", "a2")),), max_tools=2)
    chosen = select(catalog, ranked(scores_for(catalog, a1=0.9, b=0.6)), pol, ConversationState(), TurnFacts(now=1))
    assert chosen.names == ["a1", "b"]


def test_cap_holds_after_a_pinned_tool_is_no_longer_pinned() -> None:
    catalog = catalog_of("a", "b", "c", "f")
    pol = policy(max_tools=2, top_k=2)
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), pol, ConversationState(), TurnFacts(now=1, pinned=["f"]))
    assert first.names == ["f", "a", "b"]  # pinned f does not count: 2 ≤ cap
    second = select(catalog, None, pol, first.state, TurnFacts(now=2))  # f no longer pinned
    assert len(second.names) <= pol.max_tools


def test_a_state_over_the_cap_is_brought_back_under_it_when_a_tool_is_admitted() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    state = state_of(("a", 1, 1), ("b", 1, 2), ("c", 1, 3))
    chosen = select(catalog, ranked(scores_for(catalog, d=0.9)), policy(max_tools=2), state, TurnFacts(now=4))
    assert "d" in chosen.names
    assert len(chosen.names) <= 2


# --------------------------------------------------------------------------- ORDER


def test_new_tools_are_appended_in_admission_order() -> None:
    catalog = catalog_of("a", "b", "c", "d", "e")
    state = state_of(("d", 1, 1), ("b", 2, 2))
    chosen = select(catalog, ranked(scores_for(catalog, a=0.7, e=0.9)), policy(), state, TurnFacts(now=3, pinned=["c"]))
    assert chosen.names == ["d", "b", "c", "e", "a"]
    assert chosen.admitted == ("c", "e", "a")
    assert list(chosen.state.loaded) == chosen.names


def test_an_evicted_tool_readmitted_goes_to_the_end() -> None:
    catalog = catalog_of("x", "y", "z")
    pol = policy(max_tools=2)
    one = select(catalog, ranked(scores_for(catalog, x=0.9, y=0.8)), pol, ConversationState(), TurnFacts(now=1))
    two = select(catalog, ranked(scores_for(catalog, z=0.9, y=0.6)), pol, one.state, TurnFacts(now=2))
    (gone,) = two.evicted
    assert gone in ("x", "y") and two.names[-1] == "z" and gone not in two.names
    three = select(catalog, ranked(scores_for(catalog, **{gone: 0.9})), pol, two.state, TurnFacts(now=3))
    assert len(three.names) == 2 and three.names[-1] == gone  # back, at the end


def test_turn_that_admits_nothing_forwards_the_previous_list() -> None:
    catalog = catalog_of("core", "a", "b", "c", "d")
    pol = policy(core=("core",), max_tools=3)
    first = select(catalog, ranked(scores_for(catalog, c=0.9, a=0.8)), pol, ConversationState(), TurnFacts(now=1, requested=["d"]))
    # Nothing above τ, only tools already loaded selected again: the list is unchanged.
    second = select(catalog, ranked(scores_for(catalog, a=0.95, b=0.4)), pol, first.state, TurnFacts(now=2))
    assert second.admitted == () and second.evicted == ()
    assert second.names == first.names
    third = select(catalog, None, pol, second.state, TurnFacts(now=3, pinned=["c"], requested=["a"]))
    assert third.names == first.names
    assert list(third.state.loaded) == list(first.state.loaded)


# --------------------------------------------------------------------------- LEFT OUT


def test_left_out_reports_best_scored_missing_tools_best_first() -> None:
    names = [f"t{i}" for i in range(10)]
    catalog = catalog_of(*names)
    values = {f"t{i}": i / 10 for i in range(10)}  # t9 best
    chosen = select(catalog, ranked(scores_for(catalog, **values)), policy(top_k=2, threshold=0.0, core=("t0",)), state_of(("t3", 1, 1)), TurnFacts(now=2))
    assert chosen.names == ["t0", "t3", "t9", "t8"]
    assert [name for name, _ in chosen.left_out] == ["t7", "t6", "t5", "t4", "t2"]
    assert chosen.left_out[0][1] == pytest.approx(0.7)
    assert len(chosen.left_out) == LEFT_OUT_REPORTED


def test_left_out_includes_tools_scored_below_tau() -> None:
    catalog = catalog_of("a", "b")
    chosen = select(catalog, ranked(scores_for(catalog, a=0.2, b=0.1)), policy(), ConversationState(), TurnFacts(now=1))
    assert chosen.names == []
    assert chosen.left_out == (("a", pytest.approx(0.2)), ("b", pytest.approx(0.1)))


def test_evicted_tools_are_reported_left_out() -> None:
    catalog = catalog_of("x", "z")
    chosen = select(catalog, ranked(scores_for(catalog, x=0.3, z=0.9)), policy(max_tools=1), state_of(("x", 1, 1)), TurnFacts(now=2))
    assert chosen.names == ["z"]
    assert chosen.left_out == (("x", pytest.approx(0.3)),)


# --------------------------------------------------------------------------- properties

POOL = [
    "a", "b", "c", "d", "e", "f",
    "gh__x", "gh__y", "gh__z", "fs__p", "fs__q",
    "get_me", "get_it", "list_all",
]  # fmt: skip
CORE_PATTERNS = ["get_*", "a", "fs__*", "nomatch*", "list_?ll"]
SCORE_VALUES = [-0.2, 0.0, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Catalog, Policy, list[dict]]:
    names = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=len(POOL), unique=True))
    catalog = catalog_of(*names)
    bundles = tuple(
        Bundle(f"b{i}", tuple(members))
        for i, members in enumerate(
            draw(
                st.lists(
                    st.lists(st.sampled_from(POOL), min_size=1, max_size=4, unique=True),
                    max_size=3,
                )
            )
        )
    )
    pol = Policy(
        core=tuple(draw(st.lists(st.sampled_from(CORE_PATTERNS), max_size=2, unique=True))),
        top_k=draw(st.integers(0, 5)),
        threshold=draw(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])),
        max_tools=draw(st.integers(1, 4)),
        bundles=bundles,
        derive_bundles=draw(st.booleans()),
        max_bundle_size=draw(st.integers(1, 4)),
    )
    turns = []
    for _ in range(draw(st.integers(1, 6))):
        scored = draw(st.booleans())
        scores = (
            np.array(
                draw(
                    st.lists(
                        st.sampled_from(SCORE_VALUES), min_size=len(names), max_size=len(names)
                    )
                ),
                dtype=np.float32,
            )
            if scored
            else None
        )
        turns.append(
            {
                "scores": scores,
                # Calls in the history: the history only grows, so do these pins.
                "new_pins": draw(st.lists(st.sampled_from([*POOL, "ghost"]), max_size=2)),
                "requested": draw(st.lists(st.sampled_from([*POOL, "ghost"]), max_size=3)),
                "top_k": draw(st.one_of(st.none(), st.integers(0, 4))),
            }
        )
    return catalog, pol, turns


def _run(catalog: Catalog, pol: Policy, turns: Sequence[dict]):
    state = ConversationState()
    pinned: list[str] = []
    previous: list[str] | None = None
    for number, turn in enumerate(turns, start=1):
        pinned.extend(turn["new_pins"])
        chosen = select(catalog, ranked(turn["scores"]), pol, state, TurnFacts(now=float(number), pinned=list(pinned), requested=turn["requested"], top_k=turn["top_k"]))
        yield previous, pinned, chosen
        previous = chosen.names
        state = chosen.state


PROPERTY_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY_SETTINGS
@given(scenarios())
def test_property_core_and_pinned_tools_are_always_forwarded(scenario) -> None:
    catalog, pol, turns = scenario
    core = [name for name in catalog.names if pol.is_core(name)]
    for _, pinned, chosen in _run(catalog, pol, turns):
        assert chosen.names[: len(core)] == core
        assert all(tool.reason == "core" for tool in chosen.tools[: len(core)])
        for name in pinned:
            if catalog.get(name) is not None:
                assert name in chosen.names


@PROPERTY_SETTINGS
@given(scenarios())
def test_property_the_cap_holds_for_tools_neither_core_nor_pinned(scenario) -> None:
    catalog, pol, turns = scenario
    for _, pinned, chosen in _run(catalog, pol, turns):
        others = [n for n in chosen.names if not pol.is_core(n) and n not in pinned]
        assert len(others) <= pol.max_tools


@PROPERTY_SETTINGS
@given(scenarios())
def test_property_no_tool_is_forwarded_twice_and_all_are_in_the_catalogue(scenario) -> None:
    catalog, pol, turns = scenario
    for _, _, chosen in _run(catalog, pol, turns):
        assert len(chosen.names) == len(set(chosen.names))
        assert set(chosen.names) <= set(catalog.names)


@PROPERTY_SETTINGS
@given(scenarios())
def test_property_order_is_stable_across_turns(scenario) -> None:
    catalog, pol, turns = scenario
    core = [name for name in catalog.names if pol.is_core(name)]
    for previous, _, chosen in _run(catalog, pol, turns):
        current = chosen.names[len(core) :]
        # The state's loaded set is exactly the forwarded non-CORE tools, in order.
        assert list(chosen.state.loaded) == current
        if previous is None:
            assert list(chosen.admitted) == current
            continue
        before = previous[len(core) :]
        kept = [name for name in before if name in current]
        assert current[: len(kept)] == kept
        assert current[len(kept) :] == list(chosen.admitted)
        assert set(before) - set(current) == set(chosen.evicted)
        if not chosen.admitted:
            assert chosen.names == previous


@PROPERTY_SETTINGS
@given(scenarios())
def test_property_left_out_is_the_best_scored_unforwarded_tools(scenario) -> None:
    catalog, pol, turns = scenario
    for (_, _, chosen), turn in zip(_run(catalog, pol, turns), turns, strict=True):
        if turn["scores"] is None:
            assert chosen.left_out == ()
            continue
        missing = sorted(
            (
                float(s)
                for n, s in zip(catalog.names, turn["scores"], strict=True)
                if n not in chosen.names
            ),
            reverse=True,
        )
        assert [s for _, s in chosen.left_out] == missing[:LEFT_OUT_REPORTED]
        assert not set(dict(chosen.left_out)) & set(chosen.names)


def test_a_frozen_block_admits_nothing_and_reports_what_the_turn_wanted_outside_it() -> None:
    catalog = catalog_of("a", "b", "c", "d")
    first = select(catalog, ranked(scores_for(catalog, a=0.9, b=0.8)), policy(top_k=2), ConversationState(),
                   TurnFacts(now=1))
    state = first.state
    state.turn = 1
    later = select(catalog, ranked(scores_for(catalog, c=0.95, d=0.9)), policy(top_k=2), state,
                   TurnFacts(now=2, pinned=["d"], frozen=True))
    assert later.names == first.names == ["a", "b"] and not later.changed
    assert later.outside == ("d", "c")  # pinned first, then what the ranking wants
    unfrozen = select(catalog, ranked(scores_for(catalog, c=0.95, d=0.9)), policy(top_k=2), state,
                      TurnFacts(now=2, pinned=["d"]))
    assert "d" in unfrozen.names and unfrozen.outside == ()
