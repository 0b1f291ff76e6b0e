"""The first request of a catalogue the proxy has never seen (issue 32): Claude Code's
default request shape (24 built-ins and the 117 GitHub MCP tools, a ``<system-reminder>``
block beside the prompt, ``benchmarks/support/client_catalogs.py``) through the proxy
under uvicorn, cold (no ``--warm``, an empty vector store), in front of the scripted
upstream on ``/v1/messages``. Nothing here waits for time to pass: each request's own
answer is what is checked."""

from __future__ import annotations

from typing import Any

import httpx

from benchmarks.support.client_catalogs import (
    EXPECTED,
    PROMPT,
    claude_code_message,
    claude_code_tools,
)
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


def test_a_wait_the_whole_catalogue_fits_in_is_spent_on_the_whole_index(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(index_timeout_s=300.0)  # 282 texts at the assumed rate: well within
    answer = send(proxy)
    assert INDEX_HEADER not in answer.headers  # ranked by the whole index, not a part
    names = tool_names(upstream_requests(upstream)[-1])
    assert EXPECTED in names and not [name for name in names if name.startswith("Task")], names


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



def test_a_cold_proxys_first_request_forwards_what_a_warm_one_does(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """A session through a proxy started cold (nothing in memory, no ``--warm``: the
    sessions of ``benchmarks/agent_sessions.py``) on a catalogue whose vectors a proxy
    stored before starts from the block a warm proxy forwards: its first request waits
    for no embedding but the query's and forwards the same tools in the same order, so
    the requests after it, ranked alike, keep the upstream's cached prefix."""
    warm = start_proxy(index_timeout_s=300.0)  # the whole index, as any later request has it
    send(warm)
    warm_names = tool_names(upstream_requests(upstream)[-1])
    answer = send(start_proxy())  # the shipped wait
    assert INDEX_HEADER not in answer.headers
    assert tool_names(upstream_requests(upstream)[-1]) == warm_names
