"""Tests for selection.catalog.groups: the catalogue's servers, namespaces and toolkits, found from
what the request declares, the policy's bundles and the tools' names."""

from __future__ import annotations

import pytest

from selection.catalog.catalog import DeclaredGroup, build_catalog, parse_tools
from selection.catalog.groups import (
    Group,
    find_groups,
    namespace_prefix,
    server_prefixes,
    shared_prefixes,
    toolkit_suffix,
)


def catalog_of(*names: str, declared: tuple[DeclaredGroup, ...] = ()):
    parsed = parse_tools([{"type": "function", "function": {"name": n, "description": n}}
                          for n in names])
    return build_catalog(parsed.tools, declared=declared) if declared else parsed


def grouping(catalog) -> dict[str, tuple[str, tuple[str, ...]]]:
    found = find_groups(catalog)
    return {g.name: (g.source, g.members) for g in found.groups}


@pytest.mark.parametrize(("name", "server"), [
    ("mcp__github__get_me", "github"),
    ("github__get_me", "github"),
    ("github/get_me", "github"),
    ("filesystem.read_file", "filesystem"),
    ("get_me", None),
])
def test_namespace_prefix_reads_the_clients_separators(name: str, server: str | None) -> None:
    assert namespace_prefix(name) == server


def test_server_prefixes_read_one_server_and_the_clients_separator() -> None:
    opencode = ["bash", "read", "github_get_me", "github_search_code", "github_list_issues"]
    assert server_prefixes(opencode) == dict.fromkeys(opencode[2:], "github_")
    hyphen = ["bash", "github-get_me", "github-search_code", "github-actions_list",
              "github-actions_get"]
    assert server_prefixes(hyphen) == dict.fromkeys(hyphen[1:], "github-")
    servers = ["mcp-simple-arxiv_search_papers", "mcp-simple-arxiv_get_paper",
               "mcp-server-time_get_time", "mcp-server-time_convert_time"]
    assert server_prefixes(servers) == {
        servers[0]: "mcp-simple-arxiv_", servers[1]: "mcp-simple-arxiv_",
        servers[2]: "mcp-server-time_", servers[3]: "mcp-server-time_"}
    assert server_prefixes(["mcp__github__get_me", "mcp__github__create_issue"]) == {}


def test_a_few_shared_first_words_of_a_flat_catalogue_are_no_server_prefixes() -> None:
    flat = ["actions_get", "actions_list", "get_me", "list_issues", "search_code"]
    assert server_prefixes(flat) == {}


def test_a_server_repeating_its_name_is_a_prefix_only_where_asked() -> None:
    names = ["time_get_current_time", "time_convert_time", "Bash"]
    assert shared_prefixes(names) == {}  # the ranking's groups (measured as they are)
    assert shared_prefixes(names, own_repeats=True) == {"time": names[:2]}


def test_toolkit_suffix_reads_rapidapis_for_suffix() -> None:
    assert toolkit_suffix("count_for_suivi_colis") == "suivi_colis"
    assert toolkit_suffix("get_forecast") is None


def test_mcp_servers_are_found_from_their_prefixes_and_shape_the_ranking() -> None:
    catalog = catalog_of("mcp__github__get_me", "mcp__github__create_issue",
                         "mcp__jira__get_issue", "mcp__jira__search", "Bash")
    assert grouping(catalog) == {
        "github": ("server", ("mcp__github__get_me", "mcp__github__create_issue")),
        "jira": ("server", ("mcp__jira__get_issue", "mcp__jira__search")),
    }
    groups = find_groups(catalog)
    assert groups.of.tolist() == [0, 0, 1, 1, -1]
    assert groups.shapes_ranking  # 4 of 5 tools are grouped


def test_rapidapi_toolkits_are_found_from_the_for_suffix() -> None:
    catalog = catalog_of("count_for_suivi_colis", "latest_for_suivi_colis",
                         "search_for_deezer", "track_for_deezer")
    assert grouping(catalog) == {
        "suivi_colis": ("toolkit", ("count_for_suivi_colis", "latest_for_suivi_colis")),
        "deezer": ("toolkit", ("search_for_deezer", "track_for_deezer")),
    }


def test_a_shared_action_word_is_no_server() -> None:
    catalog = catalog_of("get_weather", "get_time", "list_files", "list_users",
                         "Ant_Design_list_components", "Ant_Design_get_docs")
    assert grouping(catalog) == {}  # one name group alone says nothing


def test_a_flat_catalogue_with_a_few_shared_prefixes_is_not_ranked_by_them() -> None:
    """MetaTool's shape: 199 plugin names, a handful sharing a first word."""
    names = [f"plugin{i}" for i in range(40)] + ["PDF_Exporter", "PDF_URLTool",
                                                  "MixerBox_Translate", "MixerBox_Search"]
    groups = find_groups(catalog_of(*names))
    assert len(groups) == 2
    assert not groups.shapes_ranking  # 4 of 44 tools grouped
    assert groups.listed == ()  # nor shown as servers by the meta-tools


def test_declared_namespaces_come_first_then_bundles_then_names() -> None:
    declared = (DeclaredGroup("crm", ("crm__find", "crm__update"), "Customer records"),)
    catalog = catalog_of("crm__find", "crm__update", "mail__send", "mail__read", "mail__draft",
                         declared=declared)
    bundle = Group("drafting", ("mail__draft", "mail__send"), "Write mail", "bundle")
    groups = find_groups(catalog, [bundle])
    assert [(g.name, g.source, g.members) for g in groups.groups] == [
        ("crm", "namespace", ("crm__find", "crm__update")),
        ("drafting", "bundle", ("mail__draft", "mail__send")),  # as configured
    ]  # mail__read is left alone: a group of one is none
    assert groups.groups[0].description == "Customer records"
    assert groups.listed == groups.groups  # declared and configured: always shown


def test_a_responses_requests_namespaces_are_its_groups_with_their_descriptions() -> None:
    from proxy.apis.responses.tools import declared_groups, read_layout

    def function(name: str) -> dict:
        return {"type": "function", "name": name, "description": name,
                "parameters": {"type": "object", "properties": {}}}

    layout = read_layout([
        {"type": "namespace", "name": "crm", "description": "Customer records",
         "tools": [function("find"), function("update")]},
        function("notes"),
    ])
    (group,) = declared_groups(layout)
    assert (group.name, group.description) == ("crm", "Customer records")
    assert group.members == ("crm__find", "crm__update")
