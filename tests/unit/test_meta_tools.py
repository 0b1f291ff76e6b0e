"""Tests for selection.clients.meta_tools: the injected ``load_tools`` / ``search_tools`` and how
their calls are answered; plus the size of the menu on a real catalogue."""

from __future__ import annotations

import json

import pytest

from benchmarks.support.data import REAL_CATALOGS
from selection.catalog.catalog import Catalog, parse_functions, parse_tools
from selection.catalog.groups import find_groups
from selection.catalog.policy import Bundle, Policy, catalog_bundles
from selection.clients.meta_tools import (
    LOAD_TOOLS,
    MAX_UNKNOWN,
    PURPOSE_CHARS,
    SEARCH_TOOLS,
    SUGGESTIONS,
    build_meta_tools,
    execute_load,
    find_group,
    requested_names,
    search_outcome,
    search_query,
    search_server,
    short_purpose,
    unknown_group,
)

GITHUB = REAL_CATALOGS / "github_mcp_server.json"


def catalog_of(**descriptions: str) -> Catalog:
    return parse_tools(
        [
            {"type": "function", "function": {"name": name, "description": description}}
            for name, description in descriptions.items()
        ]
    )


CATALOG = catalog_of(
    get_me="Who is logged in. Returns the user.",
    create_pull_request="Open a new pull request in a repository.",
    merge_pull_request="Merge a pull request.",
    list_issues="List issues of a repository.\nSupports filters.",
    search_code="Search code across repositories.",
    delete_file="Delete a file from a repository.",
)


def menu_lines(definition: dict) -> list[str]:
    description = definition["function"]["description"]
    return description.split("\n")[1:]


def load_definition(
    catalog: Catalog = CATALOG, core: set[str] | None = None, bundles: list[Bundle] | None = None
) -> dict:
    meta = build_meta_tools(catalog, core or set(), bundles or [], search=False)
    assert len(meta.definitions) == 1
    return meta.definitions[0]


# --------------------------------------------------------------------------- load_tools


def test_load_tools_is_a_function_tool_with_an_enum_of_every_catalogue_name() -> None:
    meta = build_meta_tools(CATALOG, {"get_me"}, [], search=False)
    assert meta.load_name == LOAD_TOOLS and meta.search_name is None
    assert meta.names == {LOAD_TOOLS}
    (definition,) = meta.definitions
    assert definition["type"] == "function"
    assert definition["function"]["name"] == "load_tools"
    parameters = definition["function"]["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["names"]
    names = parameters["properties"]["names"]
    assert names["type"] == "array"
    assert names["items"] == {"type": "string", "enum": CATALOG.names}  # CORE included


def test_load_tools_menu_excludes_core_tools() -> None:
    lines = menu_lines(load_definition(core={"get_me", "search_code"}))
    listed = [line.split(" — ")[0].removeprefix("- ") for line in lines]
    assert listed == ["create_pull_request", "merge_pull_request", "list_issues", "delete_file"]


def test_load_tools_menu_has_one_line_per_tool_with_its_short_purpose() -> None:
    lines = menu_lines(load_definition())
    assert lines == [
        "- get_me — Who is logged in",
        "- create_pull_request — Open a new pull request in a repository",
        "- merge_pull_request — Merge a pull request",
        "- list_issues — List issues of a repository",
        "- search_code — Search code across repositories",
        "- delete_file — Delete a file from a repository",
    ]


def test_load_tools_menu_is_grouped_by_bundle_headings_then_other() -> None:
    bundles = [
        Bundle("pull requests", ("merge_pull_request", "create_pull_request"), "review and merge"),
        Bundle("files", ("delete_file", "search_code")),
    ]
    lines = menu_lines(load_definition(core={"get_me"}, bundles=bundles))
    assert lines == [
        "[pull requests: review and merge]",
        "- merge_pull_request — Merge a pull request",
        "- create_pull_request — Open a new pull request in a repository",
        "[files]",
        "- delete_file — Delete a file from a repository",
        "- search_code — Search code across repositories",
        "[other]",
        "- list_issues — List issues of a repository",
    ]


def test_a_tool_in_two_bundles_is_listed_once_and_core_only_bundles_have_no_heading() -> None:
    bundles = [
        Bundle("first", ("merge_pull_request", "create_pull_request")),
        Bundle("second", ("create_pull_request", "list_issues")),
        Bundle("core only", ("get_me",)),
    ]
    lines = menu_lines(load_definition(core={"get_me"}, bundles=bundles))
    assert sum("create_pull_request" in line for line in lines) == 1
    assert "[core only]" not in lines
    assert lines[:5] == [
        "[first]",
        "- merge_pull_request — Merge a pull request",
        "- create_pull_request — Open a new pull request in a repository",
        "[second]",
        "- list_issues — List issues of a repository",
    ]


def test_derived_namespace_bundles_group_the_menu() -> None:
    catalog = catalog_of(
        github__get_pr="Get a PR.",
        github__merge_pr="Merge a PR.",
        fs__read="Read a file.",
        fs__write="Write a file.",
    )
    bundles = catalog_bundles(catalog, Policy())
    lines = menu_lines(load_definition(catalog, bundles=bundles))
    assert lines == [
        "[github]",
        "- github__get_pr — Get a PR",
        "- github__merge_pr — Merge a PR",
        "[fs]",
        "- fs__read — Read a file",
        "- fs__write — Write a file",
    ]


def test_load_tools_description_does_not_depend_on_what_is_loaded() -> None:
    # The definition is a function of the catalogue, CORE and bundles only: building it
    # again (any turn, any loaded set) gives byte-identical JSON, and loaded tools stay listed.
    first = json.dumps(load_definition(core={"get_me"}))
    for _ in range(3):
        assert json.dumps(load_definition(core={"get_me"})) == first
    assert "merge_pull_request" in json.loads(first)["function"]["description"]


def test_load_tools_is_renamed_when_the_catalogue_has_a_tool_of_that_name() -> None:
    catalog = catalog_of(load_tools="The client's own loader.", other="Other.")
    meta = build_meta_tools(catalog, set(), [], search=False)
    assert meta.load_name == "toolprune_load_tools"
    assert meta.definitions[0]["function"]["name"] == "toolprune_load_tools"
    # The client's load_tools is an ordinary catalogue tool: listed and loadable.
    assert (
        "load_tools"
        in meta.definitions[0]["function"]["parameters"]["properties"]["names"]["items"]["enum"]
    )


def test_the_renamed_meta_tool_avoids_every_client_name() -> None:
    catalog = catalog_of(
        load_tools="a", toolprune_load_tools="b", search_tools="c", toolprune_search_tools="d"
    )
    assert build_meta_tools(catalog, set(), [], search=False).load_name == "toolprune_load_tools_2"
    assert (
        build_meta_tools(catalog, set(), [], search=True).search_name == "toolprune_search_tools_2"
    )


def test_legacy_catalogues_get_legacy_shaped_meta_tools() -> None:
    catalog = parse_functions(
        [{"name": "a", "description": "A."}, {"name": "b", "description": "B."}]
    )
    (load,) = build_meta_tools(catalog, set(), [], search=False).definitions
    assert "type" not in load and "function" not in load
    assert load["name"] == "load_tools"
    assert load["parameters"]["properties"]["names"]["items"]["enum"] == ["a", "b"]
    (search,) = build_meta_tools(catalog, set(), [], search=True).definitions
    assert set(search) == {"name", "description", "parameters"}


# --------------------------------------------------------------------------- search_tools


def test_search_tools_replaces_the_menu_for_large_catalogues() -> None:
    bundles = [Bundle("pull requests", ("merge_pull_request", "create_pull_request"))]
    meta = build_meta_tools(CATALOG, {"get_me"}, bundles, search=True)
    assert meta.load_name is None and meta.search_name == SEARCH_TOOLS
    (definition,) = meta.definitions
    function = definition["function"]
    assert function["name"] == "search_tools"
    assert function["parameters"]["required"] == ["query"]
    assert set(function["parameters"]["properties"]) == {"query", "server"}  # a group exists
    assert "among 5 (yours included)" in function["description"]
    assert "pull requests" in function["description"]
    assert "merge_pull_request" not in function["description"]  # no per-tool lines


def test_search_tools_is_renamed_on_a_clash() -> None:
    catalog = catalog_of(search_tools="Client search.", x="X.")
    assert build_meta_tools(catalog, set(), [], search=True).search_name == "toolprune_search_tools"


def test_search_query_reads_the_query_argument() -> None:
    assert search_query('{"query": "open a PR"}') == "open a PR"
    for bad in ["", "{}", '{"query": ""}', '{"query": "   "}', '{"query": 3}', "nope", "[]"]:
        assert search_query(bad) is None


def test_search_outcome_loads_new_matches_and_describes_all() -> None:
    outcome = search_outcome(["merge_pull_request", "get_me"], CATALOG, forwarded={"get_me"})
    assert outcome.admit == ("merge_pull_request",)
    body = json.loads(outcome.content)
    assert body["loaded"] == ["merge_pull_request"]
    assert body["found"] == [
        {"name": "merge_pull_request", "purpose": "Merge a pull request"},
        {"name": "get_me", "purpose": "Who is logged in"},
    ]


def test_search_outcome_lists_what_it_does_not_load() -> None:
    outcome = search_outcome(["get_me"], CATALOG, set(), listed=["merge_pull_request"])
    assert outcome.admit == ("get_me",)
    body = json.loads(outcome.content)
    assert body["found"] == [{"name": "get_me", "purpose": "Who is logged in"}]
    assert body["not_loaded"] == [{"name": "merge_pull_request", "purpose": "Merge a pull request"}]
    assert "search for its name" in body["note"]
    assert "not_loaded" not in json.loads(search_outcome(["get_me"], CATALOG, set()).content)


# --------------------------------------------------------------------------- short purpose


@pytest.mark.parametrize(
    ("description", "purpose"),
    [
        ("Create a branch. Then push.", "Create a branch"),
        ("Is it there? Check.", "Is it there?"),
        ("Line one\nLine two", "Line one"),
        ("  padded.  ", "padded"),
        ("version 1.2 of the API", "version 1.2 of the API"),
        ("", ""),
    ],
)
def test_short_purpose_is_the_first_sentence(description: str, purpose: str) -> None:
    tool = catalog_of(t=description).tools[0]
    assert short_purpose(tool) == purpose


def test_short_purpose_is_cut_at_a_word_boundary_with_an_ellipsis() -> None:
    description = "word " * 40
    purpose = short_purpose(catalog_of(t=description).tools[0])
    assert purpose.endswith("…")
    assert len(purpose) <= PURPOSE_CHARS + 1
    assert purpose[:-1].split(" ") == ["word"] * len(purpose[:-1].split(" "))


# --------------------------------------------------------------------------- load calls


def test_requested_names_reads_the_names_argument() -> None:
    assert requested_names('{"names": ["a", "b"]}') == ["a", "b"]
    assert requested_names('{"names": "a"}') == ["a"]
    assert requested_names('{"names": []}') == []


@pytest.mark.parametrize(
    "arguments",
    [
        "",
        "{}",
        "not json",
        "[]",
        "null",
        '{"names": [1]}',
        '{"names": {"a": 1}}',
        '{"name": ["a"]}',
    ],
)
def test_requested_names_of_malformed_arguments_is_none(arguments: str) -> None:
    assert requested_names(arguments) is None


def test_execute_load_loads_known_names() -> None:
    outcome = execute_load(["merge_pull_request", "list_issues"], CATALOG, forwarded={"get_me"})
    assert outcome.admit == ("merge_pull_request", "list_issues")
    body = json.loads(outcome.content)
    assert body["loaded"] == ["merge_pull_request", "list_issues"]
    assert "unknown" not in body and "already_available" not in body
    assert "call them directly" in body["note"]


def test_execute_load_of_an_already_forwarded_tool_is_an_idempotent_no_op() -> None:
    outcome = execute_load(["get_me", "get_me"], CATALOG, forwarded={"get_me"})
    assert outcome.admit == ()
    body = json.loads(outcome.content)
    assert body == {
        "loaded": [],
        "already_available": ["get_me"],
        "note": "Loaded tools are available now: call them directly.",
    }


def test_execute_load_of_an_unknown_name_suggests_the_nearest_names() -> None:
    outcome = execute_load(["merge_pullrequest", "delete_file"], CATALOG, forwarded=set())
    assert outcome.admit == ("delete_file",)
    body = json.loads(outcome.content)
    suggestions = body["unknown"]["merge_pullrequest"]["did_you_mean"]
    assert suggestions[0] == "merge_pull_request"
    assert len(suggestions) == SUGGESTIONS
    assert set(suggestions) <= set(CATALOG.names)


def test_execute_load_with_only_unknown_names_loads_nothing_and_has_no_note() -> None:
    body = json.loads(execute_load(["nothing_like_it"], CATALOG, forwarded=set()).content)
    assert body["loaded"] == [] and "note" not in body and "nothing_like_it" in body["unknown"]


def test_execute_load_of_thousands_of_unknown_names_answers_in_a_bounded_size() -> None:
    """A model that names 5,000 tools that do not exist (or one name of a megabyte) gets
    suggestions for the first few and a count of the rest, not a prompt of suggestions."""
    names = ["x" * 1_000_000, *(f"no_such_tool_{i}" for i in range(5_000)), "delete_file"]
    outcome = execute_load(names, CATALOG, forwarded=set())
    assert outcome.admit == ("delete_file",)
    body = json.loads(outcome.content)
    assert len(body["unknown"]) == MAX_UNKNOWN
    assert body["unknown_more"] == 5_001 - MAX_UNKNOWN
    assert len(outcome.content) < 4_000


def test_execute_load_with_malformed_arguments_explains_the_expected_shape() -> None:
    outcome = execute_load(requested_names("garbage"), CATALOG, forwarded=set())
    assert outcome.admit == ()
    assert "names" in json.loads(outcome.content)["error"]


def test_execute_load_of_no_names_loads_nothing() -> None:
    outcome = execute_load([], CATALOG, forwarded=set())
    assert outcome.admit == () and json.loads(outcome.content) == {"loaded": []}


# --------------------------------------------------------------------------- menu size


def test_the_menu_is_a_small_fraction_of_the_real_github_catalogue_it_replaces() -> None:
    raw = json.loads(GITHUB.read_text())
    catalog = parse_tools(raw)
    assert len(catalog) == 117
    bundles = catalog_bundles(catalog, Policy())
    (load,) = build_meta_tools(catalog, set(), bundles, search=False).definitions
    (search,) = build_meta_tools(catalog, set(), bundles, search=True).definitions

    full_chars = len(json.dumps(raw))
    load_chars = len(json.dumps(load))
    search_chars = len(json.dumps(search))
    # Measured: full 123,116 chars; load_tools 13,075 (10.6 %); search_tools 357 (0.3 %).
    assert load_chars <= 0.15 * full_chars
    assert search_chars <= 0.01 * full_chars
    description = load["function"]["description"]
    tool_lines = [line for line in description.split("\n") if line.startswith("- ")]
    assert len(tool_lines) == 117  # one line per tool
    assert max(len(line) for line in tool_lines) <= 2 + 64 + 3 + PURPOSE_CHARS + 1


# --------------------------------------------------------------------------- tier


def test_a_tier_replaces_the_full_menu_and_only_its_line_changes_per_turn() -> None:
    first = build_meta_tools(CATALOG, set(), [], search=False, tier=["merge_pull_request", "list_issues"])
    second = build_meta_tools(CATALOG, set(), [], search=False, tier=["search_code"])
    (one,), (two,) = first.definitions, second.definitions
    assert menu_lines(one) == [
        "- merge_pull_request — Merge a pull request",
        "- list_issues — List issues of a repository",
    ]
    assert menu_lines(two) == ["- search_code — Search code across repositories"]
    head = one["function"]["description"].split("\n")[0]
    assert head == two["function"]["description"].split("\n")[0]  # the stable part
    # Every name stays loadable: the enum is the whole catalogue.
    assert one["function"]["parameters"] == two["function"]["parameters"]
    assert set(one["function"]["parameters"]["properties"]["names"]["items"]["enum"]) == set(CATALOG.names)


def test_search_tools_ends_with_the_tier_line() -> None:
    (plain,) = build_meta_tools(CATALOG, set(), [], search=True).definitions
    (tiered,) = build_meta_tools(CATALOG, set(), [], search=True, tier=["list_issues"]).definitions
    description = tiered["function"]["description"]
    assert description.startswith(plain["function"]["description"])
    assert description.endswith("\n- list_issues — List issues of a repository")


# --------------------------------------------------------------------------- servers


SERVERS = catalog_of(
    github__get_me="Who is logged in.",
    github__create_issue="Open an issue.",
    jira__get_issue="Read a Jira issue.",
    jira__search="Search Jira with JQL.",
    notes="Keep a note.",
)


def test_the_tier_lists_tools_under_their_server_then_the_rest_under_other() -> None:
    groups = find_groups(SERVERS).groups
    tier = ["jira__search", "notes", "github__get_me", "jira__get_issue"]
    for search in (False, True):
        (definition,) = build_meta_tools(SERVERS, set(), groups, search=search, tier=tier).definitions
        description = definition["function"]["description"]
        listed = description[description.index("[jira]"):].splitlines()
        assert listed == [
            "[jira]", "- jira__search — Search Jira with JQL", "- jira__get_issue — Read a Jira issue",
            "[github]", "- github__get_me — Who is logged in",
            "[other]", "- notes — Keep a note",
        ]


def test_search_tools_offers_a_server_argument_only_when_there_are_groups() -> None:
    (grouped,) = build_meta_tools(SERVERS, set(), find_groups(SERVERS).groups, search=True).definitions
    assert "server" in grouped["function"]["parameters"]["properties"]
    assert "Tool groups: github; jira." in grouped["function"]["description"]
    (flat,) = build_meta_tools(SERVERS, set(), [], search=True).definitions
    assert set(flat["function"]["parameters"]["properties"]) == {"query"}


def test_search_server_reads_the_server_argument() -> None:
    assert search_server('{"query": "x", "server": " jira "}') == "jira"
    for absent in ('{"query": "x"}', '{"query": "x", "server": ""}', '{"server": 3}', "nope"):
        assert search_server(absent) is None


def test_find_group_matches_a_server_by_name_or_closely_and_never_loosely() -> None:
    groups = find_groups(SERVERS).groups
    assert find_group("Jira", groups).name == "jira"
    assert find_group("githib", groups).name == "github"  # a typo
    assert find_group("slack", groups) is None
    assert find_group("jira", ()) is None


def test_an_unknown_server_is_answered_with_the_closest_names() -> None:
    answer = json.loads(unknown_group("gitlab", find_groups(SERVERS).groups))
    assert "gitlab" in answer["error"]
    assert answer["did_you_mean"][0] == "github"


def test_a_search_limited_to_a_server_names_it_in_the_answer() -> None:
    answer = json.loads(search_outcome(["jira__search"], SERVERS, set(), "jira").content)
    assert answer["server"] == "jira" and answer["loaded"] == ["jira__search"]
    assert "server" not in json.loads(search_outcome(["notes"], SERVERS, set()).content)
