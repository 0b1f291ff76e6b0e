"""Hybrid scores (selection/ranking/pipeline.py, the signals of selection/ranking/signals/), token budget,
adaptive k and tier (selection/choosing/candidates.py), on the GitHub MCP server's real tool schemas
and small hand-made catalogues."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from benchmarks.support.data import REAL_CATALOGS
from selection.catalog.catalog import parse_tools
from selection.catalog.groups import find_groups
from selection.catalog.tokens import tool_tokens
from selection.choosing.candidates import (
    CandidatePolicy,
    TurnExpansion,
    choose,
    mean_tool_tokens,
    token_budget,
)
from selection.indexes.lexical import LexicalIndex, lexical_text
from selection.indexes.name_match import NameIndex
from selection.ranking.pipeline import rank
from selection.ranking.signals.base import SignalInputs
from selection.ranking.signals.bm25 import Bm25
from selection.ranking.signals.expansion import ExpansionInputs
from selection.ranking.signals.names import NameMatch
from selection.ranking.signals.registry import Signals

GITHUB = parse_tools(json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text()))


def tool(name: str, description: str = "", size: int = 0, params: dict[str, str] | None = None) -> dict[str, Any]:
    properties = {p: {"type": "string", "description": d} for p, d in (params or {}).items()}
    return {"type": "function", "function": {
        "name": name, "description": description + " " * size,
        "parameters": {"type": "object", "properties": properties, "required": list(properties)},
    }}


def test_lexical_text_has_name_words_description_and_parameter_names() -> None:
    text = lexical_text(GITHUB.get("list_pull_requests"))
    assert text.startswith("list pull requests ")
    assert "owner" in text and "repo" in text


def test_bm25_puts_the_tool_named_by_the_request_first() -> None:
    scores = LexicalIndex(GITHUB).scores("List the open pull requests in octo/widgets")
    assert scores.dtype == np.float32 and scores.shape == (len(GITHUB),)
    assert float(scores.max()) == pytest.approx(1.0)
    ranked = [GITHUB.tools[p].name for p in np.argsort(-scores, kind="stable")[:3]]
    assert "list_pull_requests" in ranked
    assert not LexicalIndex(GITHUB).scores("zzzz qqqq").any()


def test_the_signals_add_their_weighted_contributions_in_order() -> None:
    catalog = parse_tools([tool("list_pull_requests", "List pull requests."),
                           tool("get_me", "The signed-in user.")])
    inputs = SignalInputs(catalog, ("list the pull requests",), lexical=LexicalIndex(catalog),
                          names=NameIndex(catalog))
    bm25 = Bm25(Bm25.Params(lexical_weight=0.2))
    names = NameMatch(NameMatch.Params(name_weight=0.5))
    ranking = rank(inputs, [bm25, names])
    assert ranking.values.dtype == np.float32
    lexical = inputs.lexical.scores("list the pull requests")
    np.testing.assert_allclose(ranking.values, 0.2 * lexical + 0.5 * np.array([1.0, 0.0]))
    assert set(ranking.contributions) == {"bm25", "name"}
    assert ranking.named is not None and ranking.named.tolist() == [True, False]
    assert rank(inputs, [bm25]).named is None  # without the name signal, nothing is named
    assert not rank(inputs, []).values.any()


def test_a_signal_switched_off_by_its_setting_is_not_built() -> None:
    assert Signals.from_values({}).names == (
        "dense", "bm25", "name", "groups", "learned", "dependencies", "bundles",
    )
    off = Signals.from_values({"lexical_weight": 0.0, "bundle_mates": False})
    assert "bm25" not in off.names and "bundles" not in off.names
    assert Signals.from_values({}, without=("name",)).get("name") is None
    with pytest.raises(ValueError, match="unknown signal 'nope'"):
        Signals.from_values({}, without=("nope",))


def test_the_budget_averages_the_catalogue_mean_with_the_contenders_mean() -> None:
    mean = mean_tool_tokens(GITHUB)
    assert mean == pytest.approx(np.mean([tool_tokens(t) for t in GITHUB.tools]))
    assert token_budget(GITHUB, 8, CandidatePolicy()) == int(8 * mean)
    assert token_budget(GITHUB, 8, CandidatePolicy(token_budget=500)) == 500
    contenders = [GITHUB.get("list_pull_requests"), GITHUB.get("pull_request_read")]
    contenders_mean = np.mean([tool_tokens(t) for t in contenders])
    assert token_budget(GITHUB, 8, CandidatePolicy(), contenders=contenders) == int(
        8 * (mean + contenders_mean) / 2
    )


def test_large_contenders_raise_the_budget_above_k_times_the_catalogue_mean() -> None:
    # Eight large tools score best among 32 tiny ones: k × the catalogue's mean buys one
    # large tool; averaging in the contenders' cost buys two.
    catalog = parse_tools([tool(f"big{i}", size=2000) for i in range(8)]
                          + [tool(f"tiny{i}") for i in range(32)])
    scores = np.array([0.9 - 0.01 * i for i in range(8)] + [0.0] * 32, dtype=np.float32)
    policy = CandidatePolicy(tier_size=0)
    choice = choose(catalog, scores, top_k=4, threshold=0.1, exclude=set(), policy=policy)
    assert [c.name for c in choice.candidates] == ["big0", "big1"]
    assert 2 * tool_tokens(catalog.get("big0")) > 4 * mean_tool_tokens(catalog)


def test_candidates_fill_the_token_budget_smaller_tools_fit_and_the_rest_is_the_tier() -> None:
    catalog = parse_tools([
        tool("a", size=400), tool("b", size=4000), tool("c", size=400), tool("d", size=400),
        tool("e", size=400),
    ])
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5], dtype=np.float32)
    budget = tool_tokens(catalog.get("a")) * 3
    choice = choose(
        catalog, scores, top_k=2, threshold=0.1, exclude=set(),
        policy=CandidatePolicy(token_budget=budget, tier_size=2),
    )
    assert [c.name for c in choice.candidates] == ["a", "c", "d"]  # b is too large to fit
    assert all(c.reason == "semantic" for c in choice.candidates)
    assert choice.tier == ("b", "e")


def test_the_first_candidate_is_admitted_whatever_its_cost_and_tau_is_inclusive() -> None:
    catalog = parse_tools([tool("big", size=9000), tool("low")])
    scores = np.array([0.3, 0.1], dtype=np.float32)
    policy = CandidatePolicy(token_budget=1)
    choice = choose(catalog, scores, top_k=1, threshold=0.3, exclude=set(), policy=policy)
    assert [c.name for c in choice.candidates] == ["big"]
    assert choose(catalog, scores, top_k=1, threshold=0.31, exclude=set(), policy=policy).candidates == ()


def test_count_budget_is_classic_top_k_and_exclude_is_skipped() -> None:
    catalog = parse_tools([tool(n, size=3000 if n == "a" else 0) for n in "abcd"])
    scores = np.array([0.9, 0.8, 0.7, 0.6], dtype=np.float32)
    policy = CandidatePolicy(budget="count", tier_size=0)
    choice = choose(catalog, scores, top_k=2, threshold=0.0, exclude={"b"}, policy=policy)
    assert [c.name for c in choice.candidates] == ["a", "c"] and choice.tier == ()


def test_a_dominant_match_forwards_fewer_tools_when_a_margin_is_set() -> None:
    catalog = parse_tools([tool(n) for n in "abcd"])
    dominant = np.array([0.9, 0.5, 0.45, 0.4], dtype=np.float32)
    flat = np.array([0.6, 0.58, 0.57, 0.55], dtype=np.float32)
    policy = CandidatePolicy(dominance_margin=0.2, tier_size=0)
    pick = lambda s: [c.name for c in choose(catalog, s, top_k=4, threshold=0.0, exclude=set(), policy=policy).candidates]  # noqa: E731
    assert pick(dominant) == ["a"]
    assert pick(flat) == ["a", "b", "c", "d"]


def test_when_the_request_names_the_best_candidate_only_named_tools_are_admitted() -> None:
    catalog = parse_tools([tool(n) for n in ("list_pulls", "read_pull", "list_issues", "other")])
    scores = np.array([0.9, 0.85, 0.6, 0.5], dtype=np.float32)
    named = np.array([True, False, True, False])
    policy = CandidatePolicy(tier_size=3)
    choice = choose(catalog, scores, top_k=4, threshold=0.0, exclude=set(), policy=policy, named=named)
    assert [(c.name, c.reason) for c in choice.candidates] == [
        ("list_pulls", "named"), ("list_issues", "named"),
    ]
    assert choice.tier == ("read_pull", "other")
    # The best candidate is not named (or the rule is off, or no query named anything):
    # the whole budget as usual.
    for kwargs in (
        {"named": np.array([False, True, False, False])},
        {"named": named, "policy": CandidatePolicy(named_only=False)},
        {"named": None},
    ):
        options = {"policy": policy, **kwargs}
        picked = choose(catalog, scores, top_k=4, threshold=0.0, exclude=set(), **options)
        assert len(picked.candidates) == 4
        assert {c.reason for c in picked.candidates} == {"semantic"}


def test_a_selected_tool_brings_the_producer_of_its_identifier() -> None:
    catalog = parse_tools([
        tool("create_playlist", "Create a playlist for a user.", params={"user_id": "The user's id."}),
        tool("get_current_user", "Get the current user's profile."),
        tool("play_music", "Start playback."),
    ])
    scores = np.array([0.9, 0.2, 0.5], dtype=np.float32)
    dependencies = Signals.from_values({}).get("dependencies")
    inputs = ExpansionInputs(catalog, scores, 0.1, find_groups(catalog), {})
    expansion = TurnExpansion(lambda *args: dependencies.expand(inputs, *args), 4, 8)
    choice = choose(catalog, scores, top_k=1, threshold=0.1, exclude=set(),
                    policy=CandidatePolicy(token_budget=10_000, tier_size=1), expansion=expansion)
    assert [(c.name, c.reason, c.parent) for c in choice.candidates][:2] == [
        ("create_playlist", "semantic", None), ("get_current_user", "dependency", "create_playlist"),
    ]
