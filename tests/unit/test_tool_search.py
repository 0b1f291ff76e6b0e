"""The client's search tool, emulated (selection/clients/tool_search.py): regex semantics (Python
``re.search`` over names, descriptions, argument names and descriptions; 200 characters;
errors), the natural-language search over the pool, the function offered upstream, and
the answers the upstream model reads. Real GitHub MCP catalogue (tests/data)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from selection.catalog.catalog import Catalog, parse_tools
from selection.clients.tool_search import (
    EXECUTION_TIME_EXCEEDED,
    INVALID_TOOL_INPUT,
    MAX_PATTERN_CHARS,
    SEARCH_RESULTS,
    ClientSearch,
    SearchResult,
    ranked_search,
    regex_search,
    search_argument,
    search_meta_tools,
)
from tests.support.agent_prompts import load_catalog


def deferred(tools: list[dict[str, Any]], keep: set[str]) -> Catalog:
    """``tools`` with every tool not in ``keep`` deferred."""
    return parse_tools([
        tool if tool["function"]["name"] in keep else {**tool, "defer_loading": True}
        for tool in tools
    ])


@pytest.fixture(scope="module")
def github() -> Catalog:
    return deferred(load_catalog("github_mcp_server"), {"get_me", "search_repositories"})


def tool(name: str, description: str = "", **arguments: str) -> dict[str, Any]:
    properties = {arg: {"type": "string", "description": about} for arg, about in arguments.items()}
    return {
        "type": "function", "defer_loading": True,
        "function": {"name": name, "description": description,
                     "parameters": {"type": "object", "properties": properties}},
    }


def test_a_regex_finds_name_matches_first_then_other_fields_and_never_the_client_core() -> None:
    catalog = parse_tools([
        {"type": "function", "function": {"name": "weather_now", "description": "kept"}},
        tool("forecast", "Weather for the coming days"),
        tool("get_weather", "Current conditions"),
        tool("alerts", "Storm alerts", region="Where the weather is watched"),
        tool("translate", "Translate text", weather_words="Glossary"),
        tool("unrelated", "Nothing here"),
    ])
    result = regex_search(catalog, "(?i)weather")
    assert result.found == ("get_weather", "forecast", "alerts", "translate")
    assert result.error is None
    # Each field on its own: ^ anchors at the start of a name or a description.
    assert regex_search(catalog, "^Storm").found == ("alerts",)
    assert regex_search(catalog, "^get_").found == ("get_weather",)
    # Python re semantics: case-sensitive unless asked.
    assert regex_search(catalog, "WEATHER").found == ()


def test_a_regex_finds_at_most_the_limit_and_says_how_many_more(github: Catalog) -> None:
    result = regex_search(github, "(?i)pull.?request")
    matching = [
        t.name for t in github.tools
        if t.name not in github.kept and "pull" in t.name and "request" in t.name
    ]
    assert len(matching) > SEARCH_RESULTS
    assert list(result.found) == matching[:SEARCH_RESULTS]  # name matches, catalogue order
    content = json.loads(result.content(github))
    assert [item["name"] for item in content["found"]] == list(result.found)


def test_the_answer_depends_on_the_result_and_catalogue_only(github: Catalog) -> None:
    result = regex_search(github, "^issue_read$|^list_issues$")
    assert set(result.found) == {"issue_read", "list_issues"}
    rebuilt = SearchResult("regex", None, result.found)  # as read back from a history
    assert rebuilt.content(github) == result.content(github)
    content = json.loads(result.content(github))
    assert content["found"][0] == {"name": result.found[0], "purpose": content["found"][0]["purpose"]}
    assert content["found"][0]["purpose"]
    empty = json.loads(SearchResult("regex", "x").content(github))
    assert empty["found"] == [] and "No tool matched" in empty["note"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (json.dumps({"query": "a" * (MAX_PATTERN_CHARS + 1)}), "at most 200"),
        (json.dumps({"query": "(unclosed"}), "invalid regular expression"),
        (json.dumps({"query": "x{2,1}"}), "invalid regular expression"),
        (json.dumps({"query": ""}), "arguments must be"),
        (json.dumps({"other": "x"}), "arguments must be"),
        ("not json", "arguments must be"),
    ],
)
def test_bad_patterns_are_invalid_tool_input_and_find_nothing(
    github: Catalog, arguments: str, problem: str
) -> None:
    result = regex_search(github, search_argument(arguments))
    assert result.error == INVALID_TOOL_INPUT and result.found == ()
    assert problem in (result.message or "")
    content = json.loads(result.content(github))
    assert content["error_code"] == INVALID_TOOL_INPUT and problem in content["error"]


def test_a_pattern_of_exactly_200_characters_is_accepted(github: Catalog) -> None:
    pattern = "get_me|" + "x" * (MAX_PATTERN_CHARS - len("get_me|"))
    assert len(pattern) == MAX_PATTERN_CHARS
    assert regex_search(github, pattern).error is None


def test_a_backtracking_pattern_ends_at_its_deadline() -> None:
    text = "the quick brown fox jumps over the lazy dog, again, and, again, today " * 5
    catalog = parse_tools([tool("slow", text)])
    # The engine's own timeout stops the match: the clock given never advances.
    result = regex_search(catalog, "(.*.*.*.*.*.*.*.*)*[0-9]", timeout_s=0.05, clock=lambda: 0.0)
    assert result.error == EXECUTION_TIME_EXCEEDED and result.found == ()
    assert "simplify it" in (result.message or "")


def test_the_clock_deadline_covers_the_whole_pool(github: Catalog) -> None:
    ticks = iter(range(10_000))
    result = regex_search(github, "zzz", timeout_s=3.0, clock=lambda: float(next(ticks)))
    assert result.error == EXECUTION_TIME_EXCEEDED


def test_search_arguments_accept_query_or_pattern() -> None:
    assert search_argument('{"query": "x"}') == "x"
    assert search_argument('{"pattern": "y"}') == "y"
    assert search_argument('{"query": 3}') is None
    assert search_argument("[1]") is None


def test_a_ranked_search_takes_the_best_of_the_pool() -> None:
    catalog = parse_tools([
        {"type": "function", "function": {"name": "kept"}},
        tool("a"), tool("b"), tool("c"),
    ])
    values = np.array([0.99, 0.1, 0.8, 0.5], dtype=np.float32)
    assert ranked_search(catalog, "q", values, limit=2) == SearchResult("query", "q", ("b", "c"))


def test_a_ranked_search_finds_the_tool_its_query_names_first_even_with_no_scores() -> None:
    catalog = parse_tools([tool("alpha_tool"), tool("beta_tool"), tool("gamma_tool")])
    values = np.array([0.9, 0.8, 0.1], dtype=np.float32)
    assert ranked_search(catalog, "gamma_tool", values, limit=2).found == ("gamma_tool", "alpha_tool")
    assert ranked_search(catalog, "gamma_tool", None).found == ("gamma_tool",)


def test_a_search_below_its_threshold_finds_nothing() -> None:
    catalog = parse_tools([tool("a"), tool("b")])
    values = np.zeros(2, dtype=np.float32)  # BM25 alone, no word in common
    assert ranked_search(catalog, "zzz", values, threshold=1e-6).found == ()
    assert json.loads(ranked_search(catalog, "zzz", values, threshold=1e-6).content(catalog))["found"] == []


def test_the_function_standing_for_the_search_tool(github: Catalog) -> None:
    meta = search_meta_tools(ClientSearch("regex", "tool_search_tool_regex"), github)
    assert meta.client_search == "tool_search_tool_regex" and meta.names == {"tool_search_tool_regex"}
    assert meta.load_name is None and meta.search_name is None
    (definition,) = meta.definitions
    function = definition["function"]
    assert function["parameters"]["required"] == ["query"]
    assert f"Search {len(github) - 2} more tools" in function["description"]
    assert "regular expression" in function["description"]
    natural = search_meta_tools(ClientSearch("query", "tool_search"), github).definitions[0]
    assert "regular expression" not in natural["function"]["description"]


def test_the_function_is_renamed_when_a_client_tool_has_its_name() -> None:
    catalog = parse_tools([tool("tool_search_tool_regex"), tool("other")])
    meta = search_meta_tools(ClientSearch("regex", "tool_search_tool_regex"), catalog)
    assert meta.client_search == "toolprune_tool_search_tool_regex"
