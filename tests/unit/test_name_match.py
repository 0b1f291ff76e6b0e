"""Name-word coverage, named tools and one-intent queries (selection/indexes/name_match.py), on
the GitHub MCP server's real tool names and small hand-made catalogues."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.support.data import REAL_CATALOGS
from selection.catalog.catalog import parse_tools
from selection.indexes.name_match import NameIndex, fold, one_intent, words

GITHUB = parse_tools(json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text()))
REQUEST = "List the open pull requests in octo/widgets"


def catalog_of(*names: str):
    return parse_tools([{"type": "function", "function": {"name": n}} for n in names])


@pytest.mark.parametrize(("word", "folded"), [
    ("requests", "request"), ("entries", "entry"), ("boxes", "box"), ("is", "is"),
    ("gas", "gas"), ("tickets", "ticket"), ("list", "list"),
])
def test_fold_removes_plural_endings_but_keeps_three_letters(word: str, folded: str) -> None:
    assert fold(word) == folded


def test_words_are_lower_case_without_function_words_or_single_characters() -> None:
    assert words("Count_for_SuiviColis in a Box") == ["count", "suivicoli", "box"]
    assert words("getPullRequests x") == ["getpullrequest"]  # camel case is name_words' job
    assert words("") == []


def test_a_tool_named_by_the_request_covers_all_its_words_and_lookalikes_fewer() -> None:
    coverage = NameIndex(GITHUB).coverage(REQUEST)
    assert coverage.dtype == np.float32 and coverage.shape == (len(GITHUB),)
    of = {tool.name: float(c) for tool, c in zip(GITHUB.tools, coverage, strict=True)}
    assert of["list_pull_requests"] == 1.0
    assert of["pull_request_read"] == pytest.approx(2 / 3)
    assert of["update_pull_request_state"] == pytest.approx(2 / 4)
    assert of["add_issue_comment"] == 0.0
    assert [GITHUB.tools[p].name for p in np.flatnonzero(coverage == 1.0)] == ["list_pull_requests"]


def test_coverage_of_an_empty_query_or_a_name_without_words_is_zero() -> None:
    index = NameIndex(catalog_of("of_the", "get_item"))
    assert not index.coverage("").any()
    np.testing.assert_array_equal(index.coverage("get the item of the day"), [0.0, 1.0])


def test_named_needs_every_word_of_a_name_of_two_words_or_more() -> None:
    index = NameIndex(catalog_of("search", "search_items", "search_all_items", "cd"))
    named = index.named("Search the items for me")
    assert named.dtype == bool
    # "search" alone is one word: not named; search_all_items lacks "all".
    assert named.tolist() == [False, True, False, False]


@pytest.mark.parametrize(("parts", "expected"), [
    ([REQUEST], True),
    (["Search Instagram for Beyonce and retrieve her followers."], False),
    (["Translate the message, then send it"], False),
    (["Get the weather; book a cab"], False),
    (["List the repositories", "Then open an issue"], False),  # two parts
    ([], False),
])
def test_one_intent_is_one_part_without_a_connective(parts: list[str], expected: bool) -> None:
    assert one_intent(parts) is expected
