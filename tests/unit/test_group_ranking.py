"""Tests for selection.ranking.group_ranking: a grouped tool's score draws on its group's match,
an ungrouped catalogue ranks exactly as without groups, and the engine reports which
group matched (through the deterministic bag-of-words embedder of test_engine)."""

from __future__ import annotations

import numpy as np

from selection.catalog.catalog import DeclaredGroup, build_catalog, parse_tools
from selection.catalog.groups import find_groups
from selection.ranking.group_ranking import GroupIndex, GroupRanking, rank_with_groups
from tests.unit.test_engine import FakeEmbedder, engine_for, tool

#: Two servers and an ungrouped tool: the "alpha" server's second tool says nothing of
#: alpha (a few words, as many MCP tools), the toolkit's name does.
TOOLS = [
    tool("alpha__search", "alpha search"),
    tool("alpha__health", "health"),
    tool("beta__search", "beta search"),
    tool("beta__list", "beta list"),
    tool("lone", "gamma"),
]
RANKING = GroupRanking(weight=0.5, lexical_weight=0.0, vector_weight=0.0, size_scale=0.0)
#: The same knobs, as the settings the group signal reads.
KNOBS = {"group_weight": 0.5, "group_lexical_weight": 0.0, "group_vector_weight": 0.0,
         "group_size": 0}


def test_a_grouped_tool_is_drawn_toward_its_groups_best_and_a_lone_tool_keeps_its_score() -> None:
    catalog = parse_tools(TOOLS)
    groups = find_groups(catalog)
    values = np.array([0.8, 0.1, 0.3, 0.2, 0.4], dtype=np.float32)
    match = rank_with_groups(values, GroupIndex(catalog, groups), "alpha", None, RANKING)
    # alpha__health: halfway from 0.1 to its server's best (0.8); beta__list toward 0.3
    np.testing.assert_allclose(match.values, [0.8, 0.45, 0.3, 0.25, 0.4], rtol=1e-6)
    assert match.matched()[0] == ("alpha", 0.800000011920929)
    assert match.values[1] > match.values[4]  # health now outranks the lone tool


def test_large_groups_draw_less() -> None:
    catalog = parse_tools(TOOLS)
    values = np.array([0.8, 0.0, 0.3, 0.2, 0.4], dtype=np.float32)
    scaled = GroupRanking(weight=0.5, lexical_weight=0.0, vector_weight=0.0, size_scale=1.0)
    match = rank_with_groups(values, GroupIndex(catalog, find_groups(catalog)), "", None, scaled)
    assert match.values[1] == np.float32(0.2)  # 0.5 × 1/2 of the way to 0.8


def test_a_query_that_names_a_groups_words_lifts_all_its_tools() -> None:
    catalog = parse_tools(TOOLS)
    values = np.array([0.2, 0.2, 0.2, 0.2, 0.2], dtype=np.float32)
    lexical = GroupRanking(weight=0.0, lexical_weight=0.5, vector_weight=0.0)
    match = rank_with_groups(values, GroupIndex(catalog, find_groups(catalog)), "beta", None, lexical)
    assert match.values[2] == match.values[3] > match.values[0] == match.values[1]
    assert match.values[4] == np.float32(0.2)  # the lone tool shares no word with "beta"


def test_through_group_names_the_tools_that_came_in_by_their_group() -> None:
    catalog = parse_tools(TOOLS)
    values = np.array([0.8, 0.1, 0.3, 0.2, 0.4], dtype=np.float32)
    match = rank_with_groups(values, GroupIndex(catalog, find_groups(catalog)), "", None, RANKING)
    admitted = [(name, "semantic") for name in ("alpha__search", "alpha__health")]
    report = match.report(catalog, admitted)
    assert report["through_group"] == {"alpha__health": "alpha"}  # lone (0.4) scored higher
    assert report["groups"][0] == ["alpha", 0.8]


async def test_the_engine_ranks_a_grouped_catalogue_by_groups_and_a_flat_one_as_before() -> None:
    engine = engine_for(FakeEmbedder(), **KNOBS)
    grouped = parse_tools(TOOLS)
    plain = await engine.score(grouped, {}, "alpha")
    ranked = await engine.score(grouped, {}, "alpha", find_groups(grouped))
    assert plain.groups is None and ranked.groups is not None
    assert ranked.values[1] > plain.values[1]  # alpha__health rises with its server
    assert ranked.groups.matched()[0][0] == "alpha"
    flat = parse_tools([tool("search", "alpha search"), tool("health", "health")])
    without = await engine.score(flat, {}, "alpha", find_groups(flat))
    assert without.groups is None
    np.testing.assert_array_equal(without.values, (await engine.score(flat, {}, "alpha")).values)


async def test_a_groups_vector_is_its_tools_mean_and_embedded_only_when_weighted() -> None:
    plain_catalog = parse_tools(TOOLS)
    declared = (DeclaredGroup("alpha", ("alpha__search", "alpha__health")),
                DeclaredGroup("beta", ("beta__search", "beta__list"), "beta records"))
    catalog = build_catalog(plain_catalog.tools, declared=declared)
    groups = find_groups(catalog)
    embedder = FakeEmbedder()
    engine = engine_for(embedder, group_weight=0.0, group_lexical_weight=0.0,
                        group_vector_weight=1.0)
    ranked = await engine.score(catalog, {}, "beta", groups)
    plain = await engine.score(catalog, {}, "beta")
    lift = ranked.values - plain.values
    assert lift[2] == lift[3] > 0  # beta's vector (its tools' and its description's mean)
    assert lift[0] == lift[1] == 0  # alpha's tools share no word with the query
    assert "beta: beta records" in embedder.texts  # the declared description, embedded
    assert ranked.groups is not None and ranked.groups.matched()[0][0] == "beta"
    unweighted_embedder = FakeEmbedder()
    unweighted = engine_for(unweighted_embedder, **KNOBS)
    await unweighted.score(catalog, {}, "beta", groups)
    assert "beta: beta records" not in unweighted_embedder.texts
