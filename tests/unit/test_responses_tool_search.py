"""Reading a Responses request's tool search shapes (``tool_search``, namespaces,
``defer_loading``) and translating its items both ways (issue #25)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
)

from proxy.apis.responses.history import found_in_history, upstream_history
from proxy.apis.responses.search import client_item, shown_search
from proxy.apis.responses.tools import ToolLayout, ToolsRejected, read_layout
from selection.catalog.catalog import build_catalog, parse_function
from selection.clients.bridge import delivering
from selection.clients.tool_search import SearchResult

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


def function(name: str, deferred: bool = False, **extra: Any) -> dict[str, Any]:
    entry = {"type": "function", "name": name, "description": f"Does {name}.",
             "parameters": SCHEMA, **extra}
    return {**entry, "defer_loading": True} if deferred else entry


CRM = {"type": "namespace", "name": "crm", "description": "Customer records.",
       "tools": [function("get_customer"), function("list_orders", deferred=True)]}
TOOLS = [function("shell"), CRM, function("send_mail", deferred=True),
         {"type": "web_search", "defer_loading": True}, {"type": "tool_search"}]


def catalog_of(layout: ToolLayout) -> Any:
    return build_catalog(
        [parse_function(entry, entry) for entry in layout.functions], layout.others
    )


def test_namespaces_flatten_reversibly_and_deferral_stays_with_the_function() -> None:
    layout = read_layout(TOOLS)
    assert [entry["name"] for entry in layout.functions] == [
        "shell", "crm__get_customer", "crm__list_orders", "send_mail"
    ]
    assert [entry.get("defer_loading") for entry in layout.functions] == [None, None, True, True]
    assert layout.others == [{"type": "web_search"}]  # deferral is never forwarded
    assert layout.hosted and layout.client_search is None
    assert layout.client_name("crm__list_orders") == ("list_orders", "crm")
    assert layout.client_name("shell") == ("shell", None)
    assert layout.upstream_name("list_orders", "crm") == "crm__list_orders"
    assert layout.upstream_name("list_orders", "gone") == "list_orders"


def test_a_deferred_namespace_defers_its_functions() -> None:
    layout = read_layout([{**CRM, "defer_loading": True}])
    assert all(entry["defer_loading"] is True for entry in layout.functions)


def test_loaded_entries_group_namespace_members_in_the_clients_shape() -> None:
    layout = read_layout(TOOLS)
    entries = layout.loaded_entries(["crm__list_orders", "crm__get_customer", "send_mail"])
    assert entries == [
        {"type": "namespace", "name": "crm", "description": "Customer records.",
         "tools": [CRM["tools"][1], CRM["tools"][0]]},
        TOOLS[2],
    ]
    crm = {"type": "namespace", "name": "crm", "description": "Customer records."}
    assert layout.loaded_entries(["crm__list_orders", "send_mail", "crm__get_customer"]) == [
        {**crm, "tools": [CRM["tools"][1]]}, TOOLS[2], {**crm, "tools": [CRM["tools"][0]]},
    ]  # the order is the search's: the next turn's history gives the same answer


def test_client_executed_search_is_offered_as_a_function() -> None:
    parameters = {"type": "object", "properties": {"goal": {"type": "string"}}}
    layout = read_layout([function("tool_search"), {
        "type": "tool_search", "execution": "client", "description": "Find tools.",
        "parameters": parameters}])
    assert not layout.hosted
    assert layout.client_search == {"type": "function", "name": "toolprune_tool_search",
                                    "description": "Find tools.", "parameters": parameters,
                                    "strict": False}
    default = read_layout([{"type": "tool_search", "execution": "client"}]).client_search
    assert default is not None and default["parameters"]["required"] == ["paths"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"type": "tool_search", "execution": "edge"}], "unknown tool_search execution 'edge'"),
        ([{"type": "tool_search", "defer_loading": True}], "cannot be deferred"),
        ([{"type": "tool_search"}, {"type": "tool_search"}], "given twice"),
        ([{"type": "tool_search_2027"}], "unknown tool type 'tool_search_2027'"),
        ([function("crm__get_customer"), CRM], "tool name clash"),
        ([CRM, CRM], "namespace 'crm' is given twice"),
        ([{"type": "namespace", "name": "x", "tools": [{"type": "mcp"}]}], "of type 'mcp'"),
        ([{"type": "namespace", "name": "x"}], "has no tools array"),
        ([{"type": "namespace", "tools": []}], "a namespace has no name"),
    ],
)
def test_shapes_that_cannot_be_served_are_rejected_with_what_is_wrong(
    tools: list[Any], message: str
) -> None:
    with pytest.raises(ToolsRejected, match=message):
        read_layout(tools)


def test_unknown_tool_types_are_forwarded_as_they_are() -> None:
    future = {"type": "hologram", "mode": "3d"}
    assert read_layout([future, function("a")]).others == [future]


def test_history_search_items_become_a_function_call_and_its_output() -> None:
    layout = read_layout(TOOLS)
    hosted = shown_search(
        layout, "call_7", '{"query": "orders"}', SearchResult("query", "orders", ("crm__list_orders",))
    )
    unnamed = [{**item, "id": None} for item in hosted]  # a client that drops item ids
    items = [{"type": "message", "role": "user", "content": "orders?"}, *hosted, *unnamed,
             {"type": "function_call", "call_id": "c1", "name": "list_orders",
              "namespace": "crm", "arguments": "{}"},
             {"type": "additional_tools", "role": "developer", "tools": [function("extra")]}]
    loaded = found_in_history(items, layout)
    assert loaded.found == ["crm__list_orders", "extra"]
    assert loaded.injected == [{**function("extra"), "defer_loading": True}]
    catalog = catalog_of(layout)
    translated = upstream_history(items, layout, catalog)
    expected_output = SearchResult("query", None, ("crm__list_orders",)).content(catalog)
    assert translated[1:5] == [
        {"type": "function_call", "call_id": "call_7", "name": "tool_search",
         "arguments": '{"query": "orders"}'},
        {"type": "function_call_output", "call_id": "call_7", "output": expected_output},
        {"type": "function_call", "call_id": "tool_search_1", "name": "tool_search",
         "arguments": '{"query": "orders"}'},
        {"type": "function_call_output", "call_id": "tool_search_1", "output": expected_output},
    ]
    assert translated[5] == {"type": "function_call", "call_id": "c1",
                             "name": "crm__list_orders", "arguments": "{}"}
    assert len(translated) == 6  # additional_tools is not an item a plain server takes
    assert upstream_history(items, layout, catalog) == translated  # the same every turn
    as_text = {**hosted[0], "arguments": '{"query":"orders"}'}
    assert upstream_history([as_text], layout, catalog)[0]["arguments"] == '{"query":"orders"}'


def test_client_executed_search_items_round_trip() -> None:
    layout = read_layout([function("a"), {"type": "tool_search", "execution": "client"}])
    upstream_call = {"type": "function_call", "id": "fc_1", "call_id": "c9", "name": "tool_search",
                     "arguments": '{"paths": ["crm"]}', "status": "completed"}
    shown = client_item(layout, upstream_call)
    ResponseToolSearchCall.model_validate(shown)
    assert shown["execution"] == "client" and shown["arguments"] == {"paths": ["crm"]}
    output = {"type": "tool_search_output", "call_id": "c9", "execution": "client",
              "status": "completed", "tools": [CRM]}
    loaded = found_in_history([shown, output], layout)
    assert loaded.found == ["crm__get_customer", "crm__list_orders"]
    assert layout.client_name("crm__list_orders") == ("list_orders", "crm")
    catalog = build_catalog(
        [parse_function(entry, entry) for entry in [*layout.functions, *loaded.injected]]
    )
    translated = upstream_history([shown, output], layout, catalog)
    assert translated[0] == {"type": "function_call", "call_id": "c9", "name": "tool_search",
                             "arguments": '{"paths": ["crm"]}'}
    # What the client's search found is in the upstream's tools: its output repeats none.
    assert translated[1] == {"type": "function_call_output", "call_id": "c9", "output": ""}



def test_delivered_in_the_conversation_a_search_output_carries_its_finds_outside_the_block() -> None:
    """Where tools are delivered in the conversation, the output the upstream reads carries
    the definitions of the finds the block does not hold, the same text on every turn; a
    client-executed search's is that object alone, and stays empty with nothing outside.
    A find the block holds stays under ``found``, to be called directly; a delivered one is
    not listed there again."""
    layout = read_layout([function("a"), CRM, {"type": "tool_search", "execution": "client"}])
    output = {"type": "tool_search_output", "call_id": "c9", "execution": "client",
              "status": "completed", "tools": [CRM]}
    catalog = catalog_of(layout)

    def delivers(outside: set[str]) -> Callable[[str, list[str]], str]:
        return lambda content, found: delivering(
            content, [name for name in found if name in outside], catalog)

    deliver = delivers({"crm__list_orders"})
    (client,) = upstream_history([output], layout, catalog, deliver=deliver)
    delivered = json.loads(client["output"])
    assert [tool["name"] for tool in delivered["tools"]] == ["list_orders"]  # its own name
    assert delivered["tools"][0]["parameters"] == SCHEMA and "call_tool" in delivered["note"]
    assert set(delivered) == {"tools", "note"}
    assert upstream_history([output], layout, catalog, deliver=deliver) == [client]
    assert upstream_history([output], layout, catalog, deliver=delivers(set()))[0]["output"] == ""
    hosted = {**output, "execution": "server", "call_id": None, "id": "tso_tp_call_7"}
    (server,) = upstream_history([hosted], layout, catalog, deliver=deliver)
    searched = json.loads(server["output"])
    assert [found["name"] for found in searched["found"]] == ["crm__get_customer"]
    assert [tool["name"] for tool in searched["tools"]] == ["list_orders"]
    assert 'Those under "found" are: call them directly.' in searched["note"]

def test_output_items_show_the_clients_names_and_validate_against_the_sdk() -> None:
    layout = read_layout(TOOLS)
    call = {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "crm__list_orders",
            "arguments": '{"id": "7"}', "status": "completed"}
    shown = ResponseFunctionToolCall.model_validate(client_item(layout, call))
    assert (shown.name, shown.namespace) == ("list_orders", "crm")
    assert client_item(layout, {**call, "name": "shell"}) == {**call, "name": "shell"}
    search_call, search_output = shown_search(
        layout, "c3", "not json", SearchResult("query", None, error="unavailable", message="x")
    )
    assert ResponseToolSearchCall.model_validate(search_call).arguments == {}
    assert ResponseToolSearchOutputItem.model_validate(search_output).tools == []
    assert search_call["call_id"] is None and search_call["execution"] == "server"
