"""``defer_loading`` on Chat Completions functions (issue #25): the proxy under uvicorn in
front of the scripted upstream, the official ``openai`` SDK as the client, the 117 GitHub
MCP tools, all but two deferred. The two kept tools are forwarded every round; the
deferred ones load only by the model's search (``preload_deferred`` off) or also by
toolprune's ranking (on); ``defer_loading`` never reaches the upstream."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from benchmarks.support.upstream import Chat
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.tool_search_requests import chat_tools

ASK = "Open a pull request from branch feature/search into main"
SEARCH = {"id": "call_s", "name": "search_tools", "arguments": json.dumps({"query": "open a pull request"})}
CALL = {"id": "call_c", "name": "create_pull_request",
        "arguments": json.dumps({"owner": "o", "repo": "r", "title": "t", "head": "h", "base": "main"})}
KEPT = ["get_me", "search_repositories"]


def client(proxy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)


def sent(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request["tools"]]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_deferred_functions_load_by_search_only(
    upstream: RunningUpstream, start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = start_proxy(preload_deferred=False)
    upstream.upstream.script(Chat(content=None, tool_calls=[SEARCH]),
                             Chat(content=None, tool_calls=[CALL]))
    request = {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": chat_tools()}
    if stream:
        chunks = list(client(proxy).chat.completions.create(**request, stream=True))
        calls = [c.function.name for ch in chunks for c in ch.choices[0].delta.tool_calls or []
                 if c.function and c.function.name]
        assert calls == ["create_pull_request"]
    else:
        raw = client(proxy).chat.completions.with_raw_response.create(**request)
        answer = raw.parse()
        assert [c.function.name for c in answer.choices[0].message.tool_calls] == ["create_pull_request"]
        # The answer's round: the 2 tools not deferred and the 5 the search found.
        assert raw.headers["x-tool-pruning-tools"] == "7/117; client=2; toolprune=0; search=5"
    first, second = sent(upstream)
    assert names(first) == [*KEPT, "search_tools"]
    assert names(second)[:3] == names(first) and "create_pull_request" in names(second)[3:]
    for body in (first, second):
        assert "defer_loading" not in json.dumps(body["tools"])


def test_preloading_adds_ranked_deferred_tools_after_the_kept_ones(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    upstream.upstream.script(Chat(content="ok"))
    raw = client(proxy).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "list the open pull requests of octo/proxy"}],
        tools=chat_tools(),
    )
    header = raw.headers["x-tool-pruning-tools"]
    (request,) = sent(upstream)
    forwarded = names(request)
    assert forwarded[:2] == KEPT and "list_pull_requests" in forwarded
    assert forwarded[-1] == "search_tools"  # after the first request's tools
    preloaded = len(forwarded) - 3  # less the kept tools and search_tools
    assert header == f"{len(forwarded) - 1}/117; client=2; toolprune={preloaded}; search=0"
    assert "defer_loading" not in json.dumps(request["tools"])


def test_a_deferred_function_named_like_a_meta_tool_keeps_its_name(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """The client's tool keeps ``load_tools``; toolprune's own meta-tool takes another name."""
    proxy = start_proxy(preload_deferred=False, search_tools_min_catalog=1000)
    tools = [*chat_tools()[:20],
             {"type": "function", "defer_loading": True,
              "function": {"name": "load_tools", "description": "Load a saved toolset.",
                           "parameters": {"type": "object", "properties": {}}}}]
    upstream.upstream.script(
        Chat(content=None, tool_calls=[{"id": "m1", "name": "toolprune_load_tools",
                                        "arguments": json.dumps({"names": ["load_tools"]})}]),
        Chat(content=None, tool_calls=[{"id": "c1", "name": "load_tools", "arguments": "{}"}]),
    )
    answer = client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": ASK}], tools=tools
    )
    assert [c.function.name for c in answer.choices[0].message.tool_calls] == ["load_tools"]
    first, second = sent(upstream)
    assert names(first)[-1] == "toolprune_load_tools" and "load_tools" not in names(first)
    assert names(second)[-1] == "load_tools"
