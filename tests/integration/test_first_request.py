"""The first request of a catalogue the proxy has never seen (issue 32): Claude Code's
default request shape (24 built-ins and the 117 GitHub MCP tools, a ``<system-reminder>``
block beside the prompt, ``benchmarks/support/client_catalogs.py``) through the proxy
under uvicorn, cold (no ``--warm``, an empty vector store), in front of the scripted
upstream on ``/v1/messages``. Nothing here waits for time to pass: each request's own
answer is what is checked."""

from __future__ import annotations

import json
from typing import Any

import httpx

from benchmarks.support.api_replies import Message
from benchmarks.support.client_catalogs import (
    EXPECTED,
    PROMPT,
    claude_code_message,
    claude_code_tools,
)
from benchmarks.support.upstream import Hang
from tests.conftest import ProxyFactory, RunningUpstream

MESSAGES = "/v1/messages"
INDEX_HEADER = "x-tool-pruning-index"


def send(proxy: str, messages: list[dict[str, Any]] | None = None) -> httpx.Response:
    body = {"model": "m", "max_tokens": 64, "tools": claude_code_tools(),
            "messages": messages or [claude_code_message()]}
    response = httpx.post(proxy + MESSAGES, json=body, headers={"x-api-key": "k"}, timeout=300)
    assert response.status_code == 200, response.text[:300]
    return response


def upstream_requests(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith(MESSAGES)]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request["tools"]]


def test_a_cold_proxy_forwards_the_tool_the_prompt_needs_not_the_ones_the_reminder_names(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(index_timeout_s=1.5)  # the shipped wait
    answer = send(proxy)
    assert answer.headers[INDEX_HEADER] == "building"  # cold: 282 texts are not embedded yet
    names = tool_names(upstream_requests(upstream)[-1])
    assert EXPECTED in names, names
    assert not [name for name in names if name.startswith("Task")], names


def test_a_request_that_waits_for_its_shortlist_is_ranked_by_it_while_the_rest_is_indexed(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    # A wait long enough for the prompt's shortlist (64 descriptions), never for the whole
    # catalogue: the shortlist is embedded before the other 218 texts.
    proxy = start_proxy(index_timeout_s=300.0, cold_start_tools=64)
    answer = send(proxy)
    assert answer.headers[INDEX_HEADER] == "building"
    names = tool_names(upstream_requests(upstream)[-1])
    assert names[0] == EXPECTED or EXPECTED in names[:3], names
    assert not [name for name in names if name.startswith("Task")], names


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


def embedded_texts(upstream: RunningUpstream) -> list[str]:
    return [text for r in upstream.upstream.requests if r.path.endswith("/embeddings")
            for text in r.json()["input"]]


def test_a_restarted_proxy_reads_the_catalogues_vectors_back_and_embeds_only_the_query(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    settings = {"embedder": "upstream", "embedder_model": "e", "index_timeout_s": 300.0}
    first = start_proxy(**settings, cold_start_tools=0)  # waits for the whole index
    assert INDEX_HEADER not in send(first).headers
    indexed = len(embedded_texts(upstream))
    assert indexed > len(claude_code_tools())  # every tool text, and the query
    second = start_proxy(**settings)  # another process's worth: the same store, empty memory
    assert INDEX_HEADER not in send(second).headers
    assert embedded_texts(upstream)[indexed:] == [PROMPT]
