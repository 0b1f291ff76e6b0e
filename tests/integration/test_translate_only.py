"""Requests the proxy does not prune still reach a local server in a shape it can take
(the translate-only path, proxy/turn/translation.py): a ``fallback`` (the embedder
fails), a ``dry-run`` and a small Responses catalogue with a namespace. The proxy under
uvicorn in front of the scripted upstream, the official ``openai`` and ``anthropic`` SDKs
as clients. The upstream must get no ``defer_loading``, no server tool, no ``namespace``;
every tool the client declared is forwarded; the client's search tool is answered by the
proxy; the client gets its calls under its own names, plain and streamed.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.fault_matrix import proves
from tests.support.logs import Lines
from tests.support.responses_requests import ASK as ISSUE_ASK
from tests.support.responses_requests import HOSTED_TOOLS, KEPT
from tests.support.tool_search_requests import PR_INPUT, PR_TOOL, chat_tools, first_turn

REGEX_CALL = {"id": "toolu_01s", "name": "tool_search_tool_regex",
              "input": {"query": "create_pull_request$"}}
PR_CALL = {"id": "toolu_01c", "name": PR_TOOL, "input": PR_INPUT}
QUERY = json.dumps({"query": "create a new issue in a GitHub repository"})
CREATE = json.dumps({"owner": "acme", "repo": "shop", "title": "Flaky checkout test"})
#: What a plain server cannot take, or would offer the model as a tool nobody runs.
FORBIDDEN = ("defer_loading", '"namespace"', "server_tool_use", "tool_search_tool_result",
             "tool_reference", "tool_search_tool_regex_2", '"type": "tool_search"')


@pytest.fixture
def failing_embedder(upstream: RunningUpstream, start_proxy: ProxyFactory) -> str:
    """A proxy whose embedder (the upstream's ``/embeddings``) answers 500 every time:
    each request with deferred tools to pre-load falls back."""
    proxy = start_proxy(embedder="upstream", embedder_model="e")
    error = Raw(500, {"error": {"message": "no embedding model"}})
    upstream.upstream.script(*[error] * 20, path="/embeddings")
    return proxy


def sent(upstream: RunningUpstream, path: str) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith(path)]


def assert_plain(body: dict[str, Any]) -> None:
    text = json.dumps(body)
    assert not [word for word in FORBIDDEN if word in text], text[:300]


def metrics(proxy: str) -> str:
    return httpx.get(proxy + "/metrics").text


@proves(
    fault="the embedder fails on a request that defers tools behind the client's search tool",
    phase="request",
    client="the answer to the whole catalogue as a plain server takes it (decision `fallback`): "
    "no `defer_loading`, server tool or namespace upstream; the search answered by the proxy "
    "and shown as the API documents; namespaced calls under the client's names",
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_fallback_is_translated_and_its_namespaced_call_mapped_back(
    upstream: RunningUpstream, failing_embedder: str, stream: bool
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[{"call_id": "ts_1", "name": "tool_search", "arguments": QUERY}]),
        Responses(text=None, calls=[{"call_id": "c_1", "name": "issues__create_issue",
                                     "arguments": CREATE}]),
        path="/responses",
    )
    client = openai.OpenAI(base_url=failing_embedder + "/v1", api_key="k", max_retries=0)
    if stream:
        events = list(client.responses.create(model="m", input=ISSUE_ASK, tools=HOSTED_TOOLS,
                                              stream=True))
        assert "issues__" not in json.dumps([event.model_dump() for event in events])
        output = events[-1].response.output
    else:
        raw = client.responses.with_raw_response.create(model="m", input=ISSUE_ASK,
                                                        tools=HOSTED_TOOLS)
        assert "x-tool-pruning-tools" not in raw.headers  # nothing was planned
        output = raw.parse().output
    first, second = sent(upstream, "/responses")
    for body in (first, second):
        assert_plain(body)
    forwarded = [tool["name"] for tool in first["tools"]]
    assert forwarded[:2] == list(KEPT) and forwarded[-1] == "tool_search"
    assert len(forwarded) == 117 + 1 and "issues__create_issue" in forwarded  # every tool
    assert second["tools"] == first["tools"]
    call, answer = second["input"][-2:]
    assert (call["name"], answer["call_id"]) == ("tool_search", "ts_1")
    found = [tool["name"] for tool in json.loads(answer["output"])["found"]]
    assert found  # ranked by BM25 alone: the embedder is down
    search, result, created = output
    assert (search.type, result.type) == ("tool_search_call", "tool_search_output")
    shown = [f"{t.name}__{m.name}" if t.type == "namespace" else t.name
             for t in result.tools for m in (t.tools if t.type == "namespace" else [t])]
    assert shown == found
    assert (created.type, created.name, created.namespace) == ("function_call", "create_issue", "issues")
    assert created.arguments == CREATE
    text = metrics(failing_embedder)
    assert 'toolprune_requests_total{api="responses",decision="fallback",path="none"} 1.0' in text
    assert 'toolprune_fallbacks_total{reason="embedder_error"} 1.0' in text
    assert 'toolprune_meta_calls_total{tool="client_search"} 1.0' in text


def test_a_messages_fallback_runs_the_regex_search_over_every_tool(
    upstream: RunningUpstream, failing_embedder: str
) -> None:
    upstream.upstream.script(
        Message(text=None, calls=[REGEX_CALL]), Message(text="Opening it.", calls=[PR_CALL]),
        path="/messages",
    )
    client = anthropic.Anthropic(base_url=failing_embedder, api_key="k", max_retries=0)
    message = client.messages.create(**first_turn())
    assert [block.type for block in message.content] == [
        "server_tool_use", "tool_search_tool_result", "text", "tool_use"
    ]
    use, result, _, call = message.content
    assert (use.name, result.tool_use_id) == ("tool_search_tool_regex", use.id)
    assert [ref.tool_name for ref in result.content.tool_references] == [PR_TOOL]
    assert call.name == PR_TOOL and message.stop_reason == "tool_use"
    first, second = sent(upstream, "/messages")
    for body in (first, second):
        assert_plain(body)
        assert all(tool.get("type", "custom") == "custom" for tool in body["tools"])
    forwarded = [tool["name"] for tool in first["tools"]]
    assert forwarded[:2] == ["Bash", "Read"] and forwarded[-1] == "tool_search_tool_regex"
    assert len(forwarded) == 2 + 117 + 1 and PR_TOOL in forwarded
    assert second["messages"][-1]["content"][0]["tool_use_id"] == "srvtoolu_01s"
    assert 'decision="fallback"' in metrics(failing_embedder)


def test_a_chat_fallback_forwards_the_deferred_functions_without_defer_loading(
    upstream: RunningUpstream, failing_embedder: str
) -> None:
    client = openai.OpenAI(base_url=failing_embedder + "/v1", api_key="k", max_retries=0)
    tools: Any = chat_tools()
    client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": ISSUE_ASK}], tools=tools
    )
    (body,) = sent(upstream, "/chat/completions")
    assert_plain(body)
    assert [tool["function"]["name"] for tool in body["tools"]][:2] == list(KEPT)
    assert len(body["tools"]) == 117
    assert 'toolprune_fallbacks_total{reason="embedder_error"} 1.0' in metrics(failing_embedder)


CRM = {"type": "namespace", "name": "crm", "description": "The customer records.", "tools": [
    {"type": "function", "name": "get_customer", "description": "Read one customer.",
     "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
    {"type": "function", "name": "list_orders", "description": "A customer's orders.",
     "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
]}
SMALL = [{"type": "function", "name": "get_weather", "description": "The weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}, CRM]


@pytest.mark.parametrize("stream", [False, True])
def test_a_small_catalogue_with_a_namespace_is_flattened_and_mapped_back(
    upstream: RunningUpstream, start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = start_proxy()
    upstream.upstream.script(
        Responses(text=None, calls=[{"call_id": "c_1", "name": "crm__get_customer",
                                     "arguments": '{"id": "42"}'}]),
        path="/responses",
    )
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)
    tools: Any = SMALL
    if stream:
        with client.responses.stream(model="m", input="Who is customer 42?", tools=tools) as events:
            kinds = [event.type for event in events]
            response = events.get_final_response()
        assert "response.function_call_arguments.done" in kinds
    else:
        response = client.responses.create(model="m", input="Who is customer 42?", tools=tools)
    (body,) = sent(upstream, "/responses")
    assert_plain(body)
    assert [tool["name"] for tool in body["tools"]] == [
        "get_weather", "crm__get_customer", "crm__list_orders"
    ]
    (call,) = response.output
    assert (call.type, call.name, call.namespace) == ("function_call", "get_customer", "crm")
    assert [tool.type for tool in response.tools] == ["function", "namespace"]  # as sent
    assert 'decision="small_catalog"' in metrics(proxy)


def test_dry_run_translates_and_logs_the_plan(
    upstream: RunningUpstream, start_proxy: ProxyFactory, log_lines: Lines
) -> None:
    proxy = start_proxy(preload_deferred=False)
    upstream.upstream.script(
        Message(text=None, calls=[REGEX_CALL]), Message(text=None, calls=[PR_CALL]),
        path="/messages",
    )
    client = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)
    raw = client.messages.with_raw_response.create(
        **first_turn(), extra_headers={"X-Tool-Pruning": "dry-run", "X-Request-Id": "dry-1"}
    )
    assert [block.type for block in raw.parse().content] == [
        "server_tool_use", "tool_search_tool_result", "tool_use"
    ]
    # The report is the plan; the upstream got the whole catalogue, translated.
    assert raw.headers["x-tool-pruning-tools"] == "2/119; client=2; toolprune=0; search=0"
    first, second = sent(upstream, "/messages")
    for body in (first, second):
        assert_plain(body)
    assert len(first["tools"]) == 2 + 117 + 1
    line = log_lines.wait_for("pruning_decision", "dry-1")
    assert (line["decision"], line["offered"], line["forwarded"]) == ("dry_run", 119, 2)
    assert line["rounds"] == 1
    assert line["meta"] == [{"tool": "client_search", "loaded": [], "found": [PR_TOOL],
                             "error": None}]
