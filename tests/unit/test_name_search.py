"""Finding tools by name with no embedder (selection.name_search), on the GitHub MCP
server's real tools under Claude Code's ``mcp__github__`` namespace and on a few written
for these tests."""

from __future__ import annotations

import pytest

from benchmarks.support.client_catalogs import as_openai_tools, claude_code_tools
from selection.catalog import Catalog, parse_tools
from selection.name_search import name_form, named_tools


@pytest.fixture(scope="module")
def claude() -> Catalog:
    return parse_tools(as_openai_tools(claude_code_tools()))


def tools(*names: str) -> Catalog:
    return parse_tools([{"type": "function", "function": {"name": name}} for name in names])


def test_names_compare_as_lower_case_words() -> None:
    assert name_form("mcp__github__listPullRequests") == "mcp github list pull requests"


@pytest.mark.parametrize("query", [
    "mcp__github__get_me", "get_me", "Get Me", "github.get_me", "github get_me", "getMe",
])
def test_a_tools_name_finds_it_with_or_without_its_namespace(claude: Catalog, query: str) -> None:
    assert named_tools(claude, query, limit=5)[0] == "mcp__github__get_me"


def test_a_name_close_to_a_tools_finds_it(claude: Catalog) -> None:
    assert named_tools(claude, "list_pull_request", limit=5) == ["mcp__github__list_pull_requests"]
    assert named_tools(claude, "lsit_pull_requests", limit=5) == ["mcp__github__list_pull_requests"]


def test_identifier_words_of_a_sentence_are_names_the_sentence_is_not(claude: Catalog) -> None:
    assert named_tools(claude, "load get_commit and TaskList please", limit=5) == [
        "TaskList", "mcp__github__get_commit",
    ]
    assert named_tools(claude, "List the open pull requests in octo/widgets", limit=5) == []
    assert named_tools(claude, "list issue kinds", limit=5) == []  # list_issue_types is not it


def test_exact_names_go_before_close_ones_and_ties_keep_catalogue_order() -> None:
    catalog = tools("search_code", "search_codes", "b.search_code")
    assert named_tools(catalog, "search_code", limit=5) == ["search_code", "b.search_code", "search_codes"]
    assert named_tools(catalog, "search_code", limit=2, exclude={"search_code"}) == [
        "b.search_code", "search_codes",
    ]
