"""Finding tools by name with no embedder (selection.clients.name_search), on the GitHub MCP
server's real tools under Claude Code's ``mcp__github__`` namespace, beside opencode's
built-ins under every namespace shape clients use (issue 43), and on a few written for
these tests."""

from __future__ import annotations

import pytest

from benchmarks.support.client_catalogs import (
    NAMESPACE_SHAPES,
    as_openai_tools,
    claude_code_tools,
    github_tools,
    opencode_tools,
)
from selection.catalog.catalog import Catalog, parse_tools
from selection.clients.name_search import (
    exactly_named,
    name_form,
    named_tools,
    own_names,
    spelled_out,
)

GITHUB = [tool["function"]["name"] for tool in github_tools()]


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


@pytest.mark.parametrize("shape", NAMESPACE_SHAPES)
def test_every_tools_own_name_finds_it_whatever_the_clients_namespace(shape: str) -> None:
    catalog = parse_tools(opencode_tools(shape))
    full = {name: NAMESPACE_SHAPES[shape].format(server="github", tool=name) for name in GITHUB}
    missed = {name: found for name in GITHUB
              if (found := named_tools(catalog, name, limit=5))[:1] != [full[name]]}
    assert missed == {}  # 117 of 117
    unprefixed = {name: named_tools(catalog, full[name], limit=5)[:1] for name in GITHUB}
    assert unprefixed == {name: [full[name]] for name in GITHUB}


@pytest.mark.parametrize("shape", NAMESPACE_SHAPES)
def test_a_tail_of_a_tools_name_is_no_name(shape: str) -> None:
    catalog = parse_tools(opencode_tools(shape))
    for query in ("code", "list", "search", "get", "issues", "pull requests", "run trigger"):
        assert named_tools(catalog, query, limit=5) == [], query
    assert named_tools(catalog, "read", limit=5) == ["read"]  # opencode's own read tool


def test_the_issue_43_search_finds_opencodes_github_search_code() -> None:
    catalog = parse_tools(opencode_tools())
    assert named_tools(catalog, "search_code", limit=5) == ["github_search_code"]
    assert named_tools(catalog, "search code", limit=5) == ["github_search_code"]
    assert named_tools(catalog, "searchCode", limit=5) == ["github_search_code"]


def test_a_query_that_is_a_name_of_two_words_or_more_names_it_exactly() -> None:
    catalog = parse_tools(opencode_tools())
    assert exactly_named(catalog, "search issues") == ["github_search_issues"]
    assert exactly_named(catalog, "load create_issue and get_me") == [
        "github_create_issue", "github_get_me"]  # catalogue order
    assert exactly_named(catalog, "create issue", exclude={"github_create_issue"}) == []
    for query in ("read", "search", "create an issue", "search_issue", "issues about tooltips"):
        assert exactly_named(catalog, query) == [], query  # one word, not the name, or close only


def test_a_flat_catalogues_shared_first_words_are_no_namespace() -> None:
    catalog = parse_tools(github_tools())  # GitHub's own actions_list, projects_list …
    assert named_tools(catalog, "list", limit=5) == []
    assert named_tools(catalog, "actions_list", limit=5) == ["actions_list"]


def test_own_names_follow_each_namespace() -> None:
    assert own_names("mcp__github__get_me") == ["mcp__github__get_me", "github__get_me", "get_me"]
    assert own_names("github_get_me", "github_") == ["github_get_me", "get_me"]
    assert own_names("brave_search_brave_web_search", "brave_search_") == [
        "brave_search_brave_web_search", "search_brave_web_search", "brave_web_search"]
    assert own_names("mcp-simple-arxiv_search_papers", "mcp-simple-arxiv_") == [
        "mcp-simple-arxiv_search_papers", "search_papers"]
    assert own_names("get_me") == ["get_me"]


def test_a_server_whose_tools_repeat_its_name_is_a_namespace() -> None:
    catalog = tools("bash", "git_git_status", "git_git_diff", "time_get_current_time",
                    "time_convert_time")
    assert named_tools(catalog, "git_status", limit=5) == ["git_git_status"]
    assert named_tools(catalog, "get_current_time", limit=5) == ["time_get_current_time"]


@pytest.mark.parametrize(("query", "words"), [
    ("search_code", "search code"),
    ("where is search_code defined", "where is search code defined"),
    ("mcp__github__get_me", "mcp github get me"),
    ("searchCode", "search Code"),
    ("GitHub issues", "GitHub issues"),  # a capitalised word is a word, not an identifier
    ("list the open pull requests", "list the open pull requests"),
])
def test_a_searchs_identifiers_are_ranked_as_words(query: str, words: str) -> None:
    assert spelled_out(query) == words
