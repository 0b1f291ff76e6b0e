"""OpenAI Responses tool search through the proxy (issue #25): a deferred catalogue of
the 117 GitHub MCP tools (ten of them in a namespace), hosted ``tool_search`` emulated by
the proxy, client-executed search expanded on the next request, and Codex-shaped
requests with multi-turn histories. The official ``openai`` SDK is the client, the
scripted upstream plays the model; what reaches the upstream is what a plain
OpenAI-compatible server takes (no ``defer_loading``, ``namespace``, ``tool_search`` or
``tool_search_*`` items).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from benchmarks.support.api_replies import Responses
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.responses_requests import (
    ASK,
    FIXTURES,
    GITHUB,
    HOSTED_TOOLS,
    ISSUES,
    KEPT,
    TOP_LEVEL,
)

QUERY = json.dumps({"query": "create a new issue in a GitHub repository"})
CREATE = json.dumps({"owner": "acme", "repo": "shop", "title": "Flaky checkout test"})


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(preload_deferred=False)


def client_of(proxy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)


def sent(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith("/responses")]


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool.get("name", tool.get("type")) for tool in tools]


def assert_plain_server_shapes(body: dict[str, Any]) -> None:
    """Nothing a plain OpenAI-compatible server cannot take reached it."""
    text = json.dumps(body)
    assert "defer_loading" not in text and '"namespace"' not in text
    assert {tool["type"] for tool in body["tools"]} <= {"function", "custom", "web_search"}
    kinds = {item.get("type") for item in body["input"] if isinstance(item, dict)}
    assert not kinds & {"tool_search_call", "tool_search_output", "additional_tools"}


def search_then_create() -> tuple[Responses, Responses]:
    return (
        Responses(text=None, calls=[{"call_id": "ts_1", "name": "tool_search", "arguments": QUERY}]),
        Responses(text=None, calls=[{"call_id": "c_1", "name": "issues__create_issue",
                                     "arguments": CREATE}]),
    )


def assert_hosted_rounds(upstream: RunningUpstream) -> list[str]:
    """The first round offers the client's CORE and the function standing for its search;
    the second appends what the search found (as the client defined it, flattened) and
    carries the search's call and answer. Returns the found names."""
    first, second = sent(upstream)[:2]
    for body in (first, second):
        assert_plain_server_shapes(body)
    assert names(first["tools"]) == [*KEPT, "tool_search"]
    found = names(second["tools"])[3:]
    assert "issues__create_issue" in found
    assert second["tools"][:3] == first["tools"]
    definitions = {tool["function"]["name"]: tool["function"] for tool in GITHUB}
    for entry in second["tools"][3:]:
        plain = entry["name"].removeprefix("issues__")
        assert entry == {"type": "function", **definitions[plain], "name": entry["name"]}
    call, output = second["input"][-2:]
    assert (call["type"], call["name"], call["call_id"]) == ("function_call", "tool_search", "ts_1")
    assert output["type"] == "function_call_output" and output["call_id"] == "ts_1"
    assert [tool["name"] for tool in json.loads(output["output"])["found"]] == found
    return found


def assert_client_view(output: list[Any], found: list[str]) -> None:
    """The client sees the hosted search's two items, then the found tool's call under
    its own name and namespace."""
    call, result, created = output
    assert (call.type, call.execution, call.call_id) == ("tool_search_call", "server", None)
    assert json.dumps(call.arguments) == QUERY
    assert (result.type, result.execution, result.call_id) == ("tool_search_output", "server", None)
    shown = []
    for tool in result.tools:
        members = tool.tools if tool.type == "namespace" else [tool]
        shown += [f"{tool.name}__{m.name}" if tool.type == "namespace" else m.name for m in members]
    assert sorted(shown) == sorted(found)
    assert (created.type, created.name, created.namespace) == ("function_call", "create_issue", "issues")
    assert created.arguments == CREATE


def test_hosted_search_plain_two_turns(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(*search_then_create(), Responses(text="Labelled."), path="/responses")
    client = client_of(proxy)
    headers = {"X-Conversation-Id": "hosted-plain"}
    raw = client.responses.with_raw_response.create(
        model="m", input=ASK, tools=HOSTED_TOOLS, extra_headers=headers
    )
    result = raw.parse()
    found = assert_hosted_rounds(upstream)
    assert_client_view(result.output, found)
    assert [tool.type for tool in result.tools] == [t["type"] for t in HOSTED_TOOLS]  # as sent
    # The answer's round: the 2 tools not deferred and those the search found.
    assert raw.headers["x-tool-pruning-tools"] == f"{2 + len(found)}/117; client=2; toolprune=0; search={len(found)}"
    # The next turn returns the whole history: the search is the same call and answer
    # to the upstream, the found tool stays loaded, the namespaced call is flattened.
    history = [{"role": "user", "content": ASK},
               *(item.model_dump(exclude_none=True) for item in result.output),
               {"type": "function_call_output", "call_id": "c_1", "output": '{"number": 7}'}]
    client.responses.create(model="m", input=history, tools=HOSTED_TOOLS, extra_headers=headers)
    second, third = sent(upstream)[1:3]
    assert_plain_server_shapes(third)
    assert third["tools"] == second["tools"]
    live_call, live_output = second["input"][-2:]
    call, output = third["input"][1:3]
    assert call == {key: live_call[key] for key in ("type", "call_id", "name", "arguments")}
    assert output == live_output
    assert third["input"][3]["name"] == "issues__create_issue"


def test_hosted_search_streamed(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(*search_then_create(), path="/responses")
    client = client_of(proxy)
    events = list(client.responses.create(model="m", input=ASK, tools=HOSTED_TOOLS, stream=True))
    for event in events:
        type(event).model_validate(event.model_dump(exclude_unset=True))
    kinds = [event.type for event in events]
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1
    assert [event.sequence_number for event in events] == list(range(len(events)))
    added = [(e.output_index, e.item.type) for e in events if e.type == "response.output_item.added"]
    assert added == [(0, "tool_search_call"), (1, "tool_search_output"), (2, "function_call")]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    shown = json.dumps([event.model_dump() for event in events])
    assert "issues__" not in shown  # upstream names stay upstream, in every event
    found = assert_hosted_rounds(upstream)
    assert_client_view(done, found)
    assert_client_view(events[-1].response.output, found)
    upstream.upstream.script(*search_then_create(), path="/responses")
    with client.responses.stream(model="m", input=ASK, tools=HOSTED_TOOLS) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == [
        "tool_search_call", "tool_search_output", "function_call"
    ]


CLIENT_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find tools.",
                 "parameters": {"type": "object", "properties": {"goal": {"type": "string"}},
                                "required": ["goal"]}}
CLIENT_TOOLS = [*TOP_LEVEL, ISSUES, CLIENT_SEARCH]
GOAL = json.dumps({"goal": "list the issues of acme/shop"})


@pytest.mark.parametrize("stream", [False, True])
def test_client_executed_search_goes_back_and_its_output_is_expanded(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[{"call_id": "s_1", "name": "tool_search", "arguments": GOAL}]),
        Responses(text=None, calls=[{"call_id": "c_2", "name": "issues__list_issues",
                                     "arguments": '{"owner": "acme", "repo": "shop"}'}]),
        path="/responses",
    )
    client = client_of(proxy)
    headers = {"X-Conversation-Id": f"client-{stream}"}

    def create(**fields: Any) -> tuple[Any, list[str]]:
        if not stream:
            return client.responses.create(**fields, extra_headers=headers), []
        with client.responses.stream(**fields, extra_headers=headers) as events:
            kinds = [event.type for event in events]
            return events.get_final_response(), kinds

    first, kinds = create(model="m", input=ASK, tools=CLIENT_TOOLS)
    (call,) = first.output
    # a tool_search_call has no argument events: its item events carry it whole
    assert not [kind for kind in kinds if kind.startswith("response.function_call_arguments")]
    assert (call.type, call.execution, call.call_id) == ("tool_search_call", "client", "s_1")
    assert call.arguments == json.loads(GOAL)
    (request,) = sent(upstream)  # a client call: no hidden round
    assert_plain_server_shapes(request)
    assert names(request["tools"]) == ["tool_search", *KEPT]  # the client's tools first
    assert request["tools"][0]["parameters"] == CLIENT_SEARCH["parameters"]
    loaded = {"type": "namespace", "name": "issues", "description": ISSUES["description"],
              "tools": [t for t in ISSUES["tools"] if t["name"] == "list_issues"]}
    output = {"type": "tool_search_output", "call_id": "s_1", "execution": "client",
              "status": "completed", "tools": [loaded]}
    second, _ = create(model="m", input=[{"role": "user", "content": ASK},
                                         call.model_dump(exclude_none=True), output],
                       tools=CLIENT_TOOLS)
    (listed,) = second.output
    assert (listed.name, listed.namespace) == ("list_issues", "issues")
    request = sent(upstream)[1]
    assert_plain_server_shapes(request)
    assert names(request["tools"]) == ["tool_search", *KEPT, "issues__list_issues"]
    search, answer = request["input"][1:]
    assert (search["name"], search["call_id"], json.loads(search["arguments"])) == (
        "tool_search", "s_1", json.loads(GOAL))
    # What the client's search found is in tools: its output repeats none of it.
    assert (answer["call_id"], answer["output"]) == ("s_1", "")


def post(proxy: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(proxy + "/v1/responses", json=body, headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([*TOP_LEVEL, {"type": "tool_search", "execution": "on_device"}], "execution 'on_device'"),
        ([*TOP_LEVEL, {"type": "tool_search", "defer_loading": True}], "cannot be deferred"),
        ([*TOP_LEVEL, {"type": "tool_search_2027_01_01"}], "unknown tool type"),
        ([*TOP_LEVEL, {**ISSUES, "name": "issues"},
          {"type": "function", "name": "issues__create_issue", "parameters": {}}], "name clash"),
    ],
)
def test_tools_that_cannot_be_served_get_a_400_in_openais_shape(
    upstream: RunningUpstream, proxy: str, tools: list[Any], message: str
) -> None:
    response = post(proxy, {"model": "m", "input": ASK, "tools": tools})
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error["message"] and error["type"] == "invalid_request_error"
    assert sent(upstream) == []
    with pytest.raises(openai.BadRequestError):
        client_of(proxy).responses.create(model="m", input=ASK, tools=tools)


def test_a_deferred_tool_named_like_the_search_keeps_both(
    upstream: RunningUpstream, proxy: str
) -> None:
    own = {"type": "function", "name": "tool_search", "description": "Search the wiki.",
           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
           "defer_loading": True}
    upstream.upstream.script(Responses(text="ok"), path="/responses")
    response = post(proxy, {"model": "m", "input": ASK, "tools": [*HOSTED_TOOLS, own]})
    assert response.status_code == 200
    (request,) = sent(upstream)
    assert names(request["tools"]) == [*KEPT, "toolprune_tool_search"]
    assert response.json()["tools"][-1] == own


def test_pruning_off_forwards_unchanged(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(Responses(text="ok"), path="/responses")
    body = json.dumps({"model": "m", "input": ASK, "tools": HOSTED_TOOLS}).encode()
    response = httpx.post(proxy + "/v1/responses", content=body, timeout=30,
                          headers={"X-Tool-Pruning": "off", "Content-Type": "application/json"})
    assert response.status_code == 200
    (record,) = [r for r in upstream.upstream.requests if r.path.endswith("/responses")]
    assert record.body == body


def test_codex_hosted_history_is_translated_for_a_plain_server(
    upstream: RunningUpstream, proxy: str
) -> None:
    body = json.loads((FIXTURES / "hosted_search_second_turn.json").read_text())
    labels = json.dumps({"owner": "acme", "repo": "shop", "issue_number": 42,
                         "labels": ["bug", "flaky"]})
    upstream.upstream.script(
        Responses(text=None, calls=[{"call_id": "call_L1", "name": "mcp__github__update_issue_labels",
                                     "arguments": labels}]),
        path="/responses",
    )
    response = post(proxy, body)
    assert response.status_code == 200
    (request,) = sent(upstream)
    assert_plain_server_shapes(request)
    forwarded = names(request["tools"])
    assert forwarded[:2] == ["apply_patch", "exec_command"]  # other types, then the CORE
    assert "mcp__github__create_issue" in forwarded  # found on the first turn: kept loaded
    search, result, created = request["input"][2:5]
    assert (search["type"], search["name"]) == ("function_call", "tool_search")
    assert result["call_id"] == search["call_id"]
    assert [t["name"] for t in json.loads(result["output"])["found"]] == ["mcp__github__create_issue"]
    assert created["name"] == "mcp__github__create_issue" and created["call_id"] == "call_Qm2x"
    (call,) = response.json()["output"]
    assert (call["name"], call["namespace"]) == ("update_issue_labels", "mcp__github")
    assert response.json()["tools"] == body["tools"]


def test_codex_client_search_history_loads_what_it_returned(
    upstream: RunningUpstream, proxy: str
) -> None:
    body = json.loads((FIXTURES / "client_search_second_turn.json").read_text())
    upstream.upstream.script(Responses(text="Two open issues mention checkout."), path="/responses")
    with client_of(proxy).responses.stream(**{k: v for k, v in body.items() if k != "stream"}) as events:
        final = events.get_final_response()
    assert final.output_text == "Two open issues mention checkout."
    (request,) = sent(upstream)
    assert_plain_server_shapes(request)
    forwarded = names(request["tools"])
    assert "tool_search" in forwarded and "load_tools" not in forwarded
    assert {"mcp__github__list_issues", "lint_workspace"} <= set(forwarded)
    search, result = request["input"][2:4]
    assert (search["name"], search["call_id"], result["call_id"]) == (
        "tool_search", "call_Ts9k", "call_Ts9k")


@pytest.mark.parametrize("stream", [False, True])
def test_a_search_made_beside_a_client_call_is_shown_and_loads_next_turn(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    both = [{"call_id": "ts_9", "name": "tool_search", "arguments": QUERY},
            {"call_id": "c_9", "name": "get_me", "arguments": "{}"}]
    upstream.upstream.script(Responses(text=None, calls=both), Responses(text="ok"),
                             path="/responses")
    client = client_of(proxy)
    headers = {"X-Conversation-Id": f"mixed-{stream}"}
    if stream:
        with client.responses.stream(model="m", input=ASK, tools=HOSTED_TOOLS,
                                     extra_headers=headers) as events:
            result = events.get_final_response()
    else:
        result = client.responses.create(model="m", input=ASK, tools=HOSTED_TOOLS,
                                         extra_headers=headers)
    assert sorted(item.type for item in result.output) == [
        "function_call", "tool_search_call", "tool_search_output"]
    assert len(sent(upstream)) == 1  # a client call ends the response: no hidden round
    client.responses.create(model="m", input=ASK, tools=HOSTED_TOOLS, extra_headers=headers)
    assert "issues__create_issue" in names(sent(upstream)[1]["tools"])


def test_with_preloading_toolprune_adds_its_best_deferred_tools_beside_the_search(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    upstream.upstream.script(Responses(text="ok"), path="/responses")
    raw = client_of(start_proxy()).responses.with_raw_response.create(
        model="m", input=ASK, tools=HOSTED_TOOLS
    )
    raw.parse()
    (request,) = sent(upstream)
    assert_plain_server_shapes(request)
    forwarded = names(request["tools"])
    assert forwarded[:2] == list(KEPT) and "tool_search" in forwarded
    assert "load_tools" not in forwarded and "search_tools" not in forwarded  # one discovery
    preloaded = len(forwarded) - 3
    assert preloaded > 0
    header = raw.headers["x-tool-pruning-tools"]
    assert header.startswith(f"{2 + preloaded}/117") and f"toolprune={preloaded}" in header


def test_deferred_functions_without_a_search_tool_get_toolprunes_own(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(Responses(text="ok"), path="/responses")
    client_of(proxy).responses.create(model="m", input=ASK, tools=[*TOP_LEVEL, ISSUES])
    (request,) = sent(upstream)
    assert_plain_server_shapes(request)
    assert names(request["tools"]) == [*KEPT, "search_tools"]  # 117 tools: the search variant
