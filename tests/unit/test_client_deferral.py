"""A client's own deferral behind a plain search function, recognised by structure
(selection.clients.client_deferral). The texts are written for these tests in the shapes coding
agents send (a bare name per line; a quoted name and its purpose per line)."""

from __future__ import annotations

import json

from selection.catalog.catalog import parse_tools
from selection.clients.client_deferral import (
    client_deferral,
    compact_definitions,
    deferred_menu,
    found_by_search,
    is_search_function,
    name_like,
    name_words,
)


def function(name: str, properties: dict | None = None, **extra: object) -> dict:
    parameters = {"type": "object", "properties": properties or {}}
    return {"type": "function", "function": {"name": name, "description": f"{name} tool",
                                             "parameters": parameters, **extra}}


QUERY = {"query": {"type": "string"}}
CORE = [function("read_file", {"path": {"type": "string"}}),
        function("run_shell_command", {"command": {"type": "string"}})]

BARE_MENU = """You can fetch these tools before calling them:
CronCreate
CronDelete
mcp__forge__open_ticket
mcp__forge__close_ticket
Fetch a tool's definition with the finder first."""

PURPOSE_MENU = """# Deferred tools
- "mcp__forge__open_ticket": "Open a ticket in a tracker."
- "mcp__forge__close_ticket": "Close a ticket."
- "mcp__forge__list_tickets": "List tickets, newest first."
"""


def test_name_words_split_at_separators_and_case_changes() -> None:
    assert name_words("ToolSearch") == ["tool", "search"]
    assert name_words("search_tools") == ["search", "tools"]
    assert name_words("mcp__forge__openTicket") == ["mcp", "forge", "open", "ticket"]
    assert name_like("CronCreate") and name_like("list_issues") and not name_like("Bash")


def test_search_function_pairs_tool_with_a_finding_verb_and_takes_a_string() -> None:
    catalog = parse_tools([
        function("ToolSearch", QUERY), function("tool_search", QUERY),
        function("find_tools", {"names": {"type": "string"}}),
        function("search_files", QUERY),  # no "tool"
        function("tool_status", QUERY),  # no finding verb
        function("load_tools", {"names": {"type": "array"}}),  # no string argument
    ])
    assert [t.name for t in catalog.tools if is_search_function(t)] == [
        "ToolSearch", "tool_search", "find_tools"]


def test_menu_runs_of_bare_and_described_names() -> None:
    bare = deferred_menu([BARE_MENU], known=["read_file"])
    assert bare is not None and bare.names == (
        "CronCreate", "CronDelete", "mcp__forge__open_ticket", "mcp__forge__close_ticket")
    described = deferred_menu([PURPOSE_MENU], known=[])
    assert described is not None and described.names == (
        "mcp__forge__open_ticket", "mcp__forge__close_ticket", "mcp__forge__list_tickets")


def test_menu_leaves_out_known_tools_and_needs_enough_tool_shaped_names() -> None:
    # Two unknown names are too few for a menu.
    assert deferred_menu([PURPOSE_MENU], known=["mcp__forge__open_ticket"]) is None
    # A list of plain words is prose, not tools.
    assert deferred_menu(["Steps:\n- Plan\n- Build\n- Test\n- Ship\n"], known=[]) is None
    # A line of prose breaks a run.
    broken = "CronCreate\nPlease read the notes below.\nCronDelete\nCronList\n"
    assert deferred_menu([broken], known=[]) is None


def test_deferral_needs_the_function_and_a_menu_or_deferred_tools() -> None:
    with_search = parse_tools([*CORE, function("tool_search", QUERY)])
    found = client_deferral(with_search, [PURPOSE_MENU])
    assert found is not None and found.search == "tool_search"
    assert found.menu is not None and len(found.menu.names) == 3
    assert client_deferral(with_search, ["You are a helpful agent."]) is None
    assert client_deferral(parse_tools(CORE), [PURPOSE_MENU]) is None
    deferred = parse_tools([
        *CORE, function("ToolSearch", QUERY),
        function("mcp__forge__open_ticket", {"id": {"type": "string"}}, defer_loading=True),
    ])
    marked = client_deferral(deferred, [])
    assert marked is not None and marked.search == "ToolSearch" and marked.menu is None


def test_found_by_search_reads_only_the_search_results() -> None:
    catalog = parse_tools([*CORE, function("tool_search", QUERY),
                           function("mcp__forge__open_ticket", {"id": {"type": "string"}})])
    messages = [
        {"role": "user", "content": "open a ticket about read_file"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "tool_search", "arguments": '{"query": "ticket"}'}},
            {"id": "b", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "x"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text":
            '<functions><function>{"name":"mcp__forge__open_ticket"}</function></functions>'}]},
        {"role": "tool", "tool_call_id": "b", "content": "run_shell_command is mentioned"},
    ]
    assert found_by_search(messages, "tool_search", catalog) == ("mcp__forge__open_ticket",)
    # Results that are blocks other than text (Anthropic tool_reference) are read too.
    references = [*messages[:2], {"role": "tool", "tool_call_id": "a", "content": [
        {"type": "tool_reference", "tool_name": "mcp__forge__open_ticket"}]}]
    assert found_by_search(references, "tool_search", catalog) == ("mcp__forge__open_ticket",)
    assert found_by_search(messages, "find_tools", catalog) == ()


def test_compact_definitions_replaces_only_definitions_of_forwarded_tools() -> None:
    from selection.clients.client_deferral import compact_definitions
    catalog = parse_tools([function("mcp__forge__open_ticket", {"id": {"type": "string"}}),
                           function("read_file", {"path": {"type": "string"}})])
    forwarded = {"mcp__forge__open_ticket": catalog.tools[0]}
    ticket = {"name": "mcp__forge__open_ticket", "description": "long",
              "parametersJsonSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}
    other = {"name": "read_file", "parameters": {"type": "object"}}  # not forwarded
    mention = {"name": "mcp__forge__open_ticket"}  # no schema: not a definition
    text = (f"Found:\n<function>{json.dumps(ticket)}</function>\n<function>{json.dumps(other)}"
            f"</function>\n{json.dumps(mention)} {{broken")
    compacted = compact_definitions(text, forwarded)
    short = json.dumps({"name": "mcp__forge__open_ticket", "description": "mcp__forge__open_ticket tool"})
    assert compacted == text.replace(json.dumps(ticket), short)
    assert compact_definitions("no definitions here", forwarded) == "no definitions here"



def test_a_deferred_search_function_is_not_the_finder() -> None:
    catalog = parse_tools([
        *CORE,
        function("mcp__forge__open_ticket", {"id": {"type": "string"}}, defer_loading=True),
        function("tool_search", QUERY, defer_loading=True),
    ])
    assert client_deferral(catalog, [PURPOSE_MENU]) is None


def test_an_object_whose_name_is_not_a_string_is_not_a_definition() -> None:
    """A schema property called ``name`` (``{"name": {"type": "string"}}``) inside a result
    is no tool definition: it is left as it is, never a TypeError."""
    text = json.dumps({"name": "create_issue", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}, "title": {"type": "string"}}}})
    assert compact_definitions(text, {}) == text
