"""Tools delivered in the conversation on the Responses API (``TOOLPRUNE_LATE_TOOLS=
conversation``), beyond the rules every API shares (tests/integration/
test_conversation_delivery.py): the items a bridge call holds back reach the client in the
model's order, an item a hidden round showed the client stands once where the upstream saw
it, a ``previous_response_id`` chain is forwarded as sent on its block, and the two tool
searches of the Responses API — hosted ``tool_search``, which the proxy emulates, and
Codex's client-executed ``tool_search`` over ``namespace`` groups — deliver what they find
where their output stands: the block never grows, the model calls the found tool through
the bridge, the client gets it under its own (namespaced) name, and each forwarded
``input`` begins with the one before it. The official ``openai`` SDK is the client (its
event and item models validate what it gets); the scripted upstream plays the model.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from benchmarks.support.api_replies import Responses
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_responses_tool_search import client_of, sent
from tests.support.responses_requests import ASK, HOSTED_TOOLS, ISSUES, TOP_LEVEL
from tests.support.turn_apis import CHAT_TOOLS, LOADED, REAL

COOKIE = {"name": "session", "value": "abc123"}
CREATE = {"owner": "acme", "repo": "shop", "title": "Flaky checkout test"}
LISTED = {"owner": "acme", "repo": "shop"}
PLAYWRIGHT = [{"type": "function", **tool["function"]} for tool in CHAT_TOOLS]
#: Codex's client-executed search, and its tools: its own, the MCP tools as a namespace.
CLIENT_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find tools.",
                 "parameters": {"type": "object", "properties": {"goal": {"type": "string"}},
                                "required": ["goal"]}}
CODEX_TOOLS = [*TOP_LEVEL, ISSUES, CLIENT_SEARCH]


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(late_tools="conversation", preload_deferred=False, max_tools=6, top_k=4,
                       threshold=0.0)


def call(call_id: str, name: str, arguments: Any) -> dict[str, str]:
    return {"call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def bridge(call_id: str, name: str, arguments: Any) -> dict[str, str]:
    return call(call_id, "call_tool", {"name": name, "arguments": arguments})


def create(client: openai.OpenAI, stream: bool, **fields: Any) -> tuple[Any, list[Any]]:
    """The response the client got, and its stream's events (none when plain)."""
    if not stream:
        return client.responses.create(**fields), []
    with client.responses.stream(**fields) as events:
        seen = list(events)
        return events.get_final_response(), seen


def history(response: Any) -> list[dict[str, Any]]:
    """A response's output items as the client sends them back."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def assert_extends(before: dict[str, Any], after: dict[str, Any]) -> list[Any]:
    """``after`` (an upstream request) offers ``before``'s tools and its ``input`` begins
    with ``before``'s, item for item; returns the items it adds."""
    assert after["tools"] == before["tools"]
    assert after["input"][: len(before["input"])] == before["input"]
    return after["input"][len(before["input"]):]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_items_after_a_bridge_call_reach_the_client_in_the_models_order(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    load = call("meta_1", "load_tools", {"names": [LOADED]})
    upstream.upstream.script(
        Responses(text=None, calls=[load]),
        Responses(text="Setting it.", calls=[bridge("bridge_1", LOADED, COOKIE),
                                             call("real_1", REAL, {"type": "png"})]),
        path="/responses",
    )
    response, events = create(client_of(proxy), stream, model="m", input=ASK, tools=PLAYWRIGHT)
    kinds = [(item.type, getattr(item, "name", None), getattr(item, "call_id", None))
             for item in response.output]
    assert kinds == [("message", None, None), ("function_call", LOADED, "bridge_1"),
                     ("function_call", REAL, "real_1")]
    assert json.loads(response.output[1].arguments) == COOKIE
    if stream:
        assert [e.sequence_number for e in events] == list(range(len(events)))
        added = [(e.output_index, e.item.type, getattr(e.item, "name", None))
                 for e in events if e.type == "response.output_item.added"]
        assert added == [(0, "message", None), (1, "function_call", LOADED), (2, "function_call", REAL)]
        deltas = [(e.output_index, e.delta) for e in events
                  if e.type == "response.function_call_arguments.delta"]
        assert deltas[0][0] == 1 and json.loads(deltas[0][1]) == COOKIE  # whole, in one delta
        assert {index for index, _ in deltas[1:]} == {2}
        assert "call_tool" not in json.dumps([e.model_dump(warnings=False) for e in events])
    first, second = sent(upstream)
    assert first["tools"] == second["tools"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_bridge_call_that_cannot_be_made_leaves_the_calls_after_it_numbered_from_zero(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[call("meta_1", "load_tools", {"names": [LOADED]})]),
        Responses(text=None, calls=[bridge("bridge_1", "browser_cookie_sett", COOKIE),
                                    call("real_1", REAL, {"type": "png"})]),
        path="/responses",
    )
    response, events = create(client_of(proxy), stream, model="m", input=ASK, tools=PLAYWRIGHT)
    assert [(item.type, item.name, item.call_id) for item in response.output] == [
        ("function_call", REAL, "real_1")]
    if stream:
        assert {e.output_index for e in events if hasattr(e, "output_index")} == {0}
        assert [e.sequence_number for e in events] == list(range(len(events)))
    assert len(sent(upstream)) == 2  # a client call ends the response: no hidden round


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_what_a_hidden_round_showed_stands_once_where_the_upstream_saw_it(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    upstream.upstream.script(
        Responses(text="Loading a cookie tool.", calls=[call("meta_1", "load_tools", {"names": [LOADED]})]),
        Responses(text=None, calls=[bridge("bridge_1", LOADED, COOKIE)]),
        Responses(text="The cookie is set."),
        path="/responses",
    )
    client = client_of(proxy)
    ask = [{"type": "message", "role": "user", "content": ASK}]
    response, _ = create(client, stream, model="m", input=ask, tools=PLAYWRIGHT)
    # A stream shows the hidden round's text as it comes; a plain answer, its last round's.
    shown = ["message", "function_call"] if stream else ["function_call"]
    assert [item.type for item in response.output] == shown
    answer = {"type": "function_call_output", "call_id": "bridge_1", "output": "set"}
    create(client, stream, model="m", input=[*ask, *history(response), answer], tools=PLAYWRIGHT)
    _, second, third = sent(upstream)
    added = assert_extends(second, third)
    assert [(i["type"], i.get("name")) for i in added] == [("function_call", "call_tool"),
                                                           ("function_call_output", None)]
    texts = [i for i in third["input"] if i.get("type") == "message" and i.get("role") == "assistant"]
    assert len(texts) == 1 and third["input"].index(texts[0]) == 1  # before the hidden call


def test_a_previous_response_id_chain_is_forwarded_as_sent_on_its_block(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[call("meta_1", "load_tools", {"names": [LOADED]})]),
        Responses(text=None, calls=[bridge("bridge_1", LOADED, COOKIE)]),
        Responses(text="The cookie is set."),
        path="/responses",
    )
    client = client_of(proxy)
    response = client.responses.create(model="m", input=ASK, tools=PLAYWRIGHT)
    answer = [{"type": "function_call_output", "call_id": "bridge_1", "output": "set"}]
    client.responses.create(model="m", input=answer, tools=PLAYWRIGHT,
                            previous_response_id=response.id)
    first, _, third = sent(upstream)
    assert third["tools"] == first["tools"]  # the block the chain started with
    assert third["input"] == answer  # the upstream holds the rest, as the model saw it
    assert third["previous_response_id"] == response.id


def search_items(request: dict[str, Any], call_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``function_call`` and ``function_call_output`` a search stands as upstream."""
    found = [i for i in request["input"] if i.get("call_id") == call_id]
    assert [i["type"] for i in found] == ["function_call", "function_call_output"]
    return found[0], found[1]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_hosted_search_delivers_what_it_finds_and_the_model_calls_it_through_the_bridge(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    query = {"query": "create a new issue in a GitHub repository"}
    upstream.upstream.script(
        Responses(text=None, calls=[call("ts_1", "tool_search", query)]),
        Responses(text=None, calls=[bridge("c_1", "create_issue", CREATE)]),  # as shown
        Responses(text="Opened #7."),
        path="/responses",
    )
    client = client_of(proxy)
    ask = [{"type": "message", "role": "user", "content": ASK}]
    response, _ = create(client, stream, model="m", input=ask, tools=HOSTED_TOOLS)
    search, result, created = response.output
    assert (search.type, result.type) == ("tool_search_call", "tool_search_output")
    assert (created.type, created.name, created.namespace, created.call_id) == (
        "function_call", "create_issue", "issues", "c_1")
    assert json.loads(created.arguments) == CREATE
    first, second = sent(upstream)
    assert second["tools"] == first["tools"]  # what the search found is not in the block
    assert "issues__create_issue" not in [tool["name"] for tool in first["tools"]]
    _, output = search_items(second, "ts_1")
    delivered = json.loads(output["output"])
    assert "create_issue" in [tool["name"] for tool in delivered["tools"]]  # its own name
    assert "call_tool" in delivered["note"]
    answer = {"type": "function_call_output", "call_id": "c_1", "output": '{"number": 7}'}
    create(client, stream, model="m", input=[*ask, *history(response), answer], tools=HOSTED_TOOLS)
    third = sent(upstream)[2]
    (written, _) = assert_extends(second, third)
    assert (written["name"], written["call_id"]) == ("call_tool", "c_1")
    assert json.loads(written["arguments"]) == {"name": "create_issue", "arguments": CREATE}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_codex_client_search_delivers_its_finds_and_the_client_gets_the_namespaced_call(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    goal = {"goal": "list the issues of acme/shop"}
    upstream.upstream.script(
        Responses(text=None, calls=[call("s_1", "tool_search", goal)]),
        Responses(text=None, calls=[bridge("c_2", "list_issues", LISTED)]),  # as shown
        Responses(text="Two open issues."),
        path="/responses",
    )
    client = client_of(proxy)
    ask = [{"type": "message", "role": "user", "content": ASK}]
    searched, _ = create(client, stream, model="m", input=ask, tools=CODEX_TOOLS)
    (search,) = searched.output
    assert (search.type, search.execution, search.call_id) == ("tool_search_call", "client", "s_1")
    found = {"type": "namespace", "name": "issues", "description": ISSUES["description"],
             "tools": [t for t in ISSUES["tools"] if t["name"] == "list_issues"]}
    output = {"type": "tool_search_output", "call_id": "s_1", "execution": "client",
              "status": "completed", "tools": [found]}
    input_2 = [*ask, *history(searched), output]
    listed, _ = create(client, stream, model="m", input=input_2, tools=CODEX_TOOLS)
    (called,) = listed.output
    assert (called.type, called.name, called.namespace, called.call_id) == (
        "function_call", "list_issues", "issues", "c_2")
    assert json.loads(called.arguments) == LISTED
    first, second = sent(upstream)
    searched_as, found_as = assert_extends(first, second)  # the block stays: the find is delivered
    assert (searched_as["name"], searched_as["call_id"], found_as["call_id"]) == (
        "tool_search", "s_1", "s_1")
    assert "issues__list_issues" not in [tool["name"] for tool in second["tools"]]
    delivered = json.loads(found_as["output"])
    assert [tool["name"] for tool in delivered["tools"]] == ["list_issues"]
    assert delivered["tools"][0]["parameters"]["required"] == ["owner", "repo"]
    answer = {"type": "function_call_output", "call_id": "c_2", "output": "[#3, #5]"}
    create(client, stream, model="m", input=[*input_2, *history(listed), answer], tools=CODEX_TOOLS)
    third = sent(upstream)[2]
    (written, result) = assert_extends(second, third)
    assert (written["name"], written["call_id"], result["call_id"]) == ("call_tool", "c_2", "c_2")
    assert json.loads(written["arguments"]) == {"name": "list_issues", "arguments": LISTED}
