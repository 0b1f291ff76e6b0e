"""Search by a tool's name with no embedder (issue 32): toolprune's ``search_tools`` on
the first requests of a Claude-Code-shaped catalogue (``benchmarks/support/client_catalogs.py``)
while nothing of it is embedded, and the client's own search on a request the proxy could
not rank (the embedder down). The proxy under uvicorn in front of the scripted upstream,
whose ``/embeddings`` is the proxy's embedder: stalled (calls that never answer) or
failing (500)."""

from __future__ import annotations

import json
from typing import Any

import openai

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import Hang, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_first_request import MESSAGES, send, tool_names, upstream_requests
from tests.support.responses_requests import ASK, HOSTED_TOOLS


def stalled_embedder(upstream: RunningUpstream, start_proxy: ProxyFactory, **settings: Any) -> str:
    """A proxy whose embedder is the upstream's ``/embeddings``, whose first calls never
    answer: nothing of the catalogue is embedded (the index is being built)."""
    upstream.upstream.script(Hang(), Hang(), Hang(), path="/embeddings")
    return start_proxy(embedder="upstream", embedder_model="e", index_timeout_s=0.05, **settings)


def search_round(upstream: RunningUpstream, proxy: str, query: str) -> tuple[list[str], list[str], dict]:
    """The tools of the round before and after a scripted ``search_tools(query)``, and the
    search's answer."""
    call = {"id": "toolu_s1", "name": "search_tools", "input": {"query": query}}
    upstream.upstream.script(Message(text=None, calls=[call]), Message(text="done"), path=MESSAGES)
    send(proxy)
    before, after = upstream_requests(upstream)[-2:]
    result = after["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_s1"
    return tool_names(before), tool_names(after), json.loads(result["content"])


def test_search_by_a_tool_name_finds_it_while_the_catalogue_is_indexed(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = stalled_embedder(upstream, start_proxy)
    before, after, answer = search_round(upstream, proxy, "mcp__github__get_me")
    assert "search_tools" in before and "mcp__github__get_me" not in before
    assert answer["found"][0]["name"] == "mcp__github__get_me"
    assert "mcp__github__get_me" in after


def test_search_by_a_name_close_to_a_tools_finds_it(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = stalled_embedder(upstream, start_proxy)
    _, after, answer = search_round(upstream, proxy, "github get_commits")  # a plural too many
    assert answer["found"][0]["name"] == "mcp__github__get_commit"
    assert "mcp__github__get_commit" in after


def test_a_search_that_finds_nothing_loads_nothing(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = stalled_embedder(upstream, start_proxy)
    before, after, answer = search_round(upstream, proxy, "zqxv wobbleflux")
    assert answer["found"] == [] and answer["loaded"] == []
    assert after == before


def test_the_clients_search_by_a_name_finds_it_with_the_embedder_down(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(embedder="upstream", embedder_model="e")
    upstream.upstream.script(*[Raw(500, {"error": {"message": "no model"}})] * 20, path="/embeddings")
    call = {"call_id": "ts_1", "name": "tool_search", "arguments": json.dumps({"query": "create_issue"})}
    upstream.upstream.script(Responses(text=None, calls=[call]), Responses(text="done"), path="/responses")
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)
    client.responses.create(model="m", input=ASK, tools=HOSTED_TOOLS)
    second = [r.json() for r in upstream.upstream.requests if r.path.endswith("/responses")][-1]
    answer = second["input"][-1]
    assert answer["call_id"] == "ts_1"
    assert json.loads(answer["output"])["found"][0]["name"] == "issues__create_issue"
