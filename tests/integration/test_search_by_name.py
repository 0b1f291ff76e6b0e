"""A tool's own name finds it through ``search_tools``, whatever the client's namespace
separator (issue 43): for the GitHub MCP server's 117 tools beside opencode's built-ins
under each shape clients give them (``mcp__github__search_code``, ``github_search_code``,
``github.search_code``, ``github/search_code``, ``github-search_code``), every tool's
bare name as the query loads that tool, found first, and it alone (a query that is a
name loads what it names), on a catalogue being indexed (cold) and on one indexed (warm). The front door's own search (:meth:`selection.clients.searches.Searches.search_tools`)
on an engine built as the proxy builds it, without HTTP (1,170 searches); the issue's
own request goes through the proxy under uvicorn, in front of the scripted upstream.

Cold: the embedder never answers (nothing of the catalogue, nor the query, is embedded;
BM25 ranks). Warm: the packaged embedder, the whole index built first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import httpx
import numpy as np
import pytest

from benchmarks.support.chat_replies import Chat
from benchmarks.support.client_catalogs import NAMESPACE_SHAPES, github_tools, opencode_tools
from benchmarks.support.replies import Hang, Reply
from benchmarks.support.upstream import Recorded
from config.policy import load_policy
from config.selector import build_embedder, build_selector
from config.settings import Settings
from selection.catalog.catalog import Catalog, parse_tools
from selection.catalog.policy import Policy
from selection.clients.searches import Searches
from selection.ranking.engine import SelectionEngine
from selection.ranking.signals.registry import Signals
from tests.conftest import ProxyFactory, RunningUpstream

GITHUB = [tool["function"]["name"] for tool in github_tools()]


class Unanswered:
    """An embedder whose calls never answer: a catalogue stays in its first build."""

    id = "unanswered"
    ready = True

    async def load(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        return None


def cold_engine(settings: Settings) -> SelectionEngine:
    """The proxy's engine on an embedder that never answers, not waiting for it."""
    return SelectionEngine(
        Unanswered(), vector_cache_size=100_000, index_cache_size=8,  # type: ignore[arg-type]
        timeout_s=settings.embedder_timeout_s, index_timeout_s=0.0,
        signals=Signals.from_values(settings.signal_values()),
        cold_start_tools=settings.cold_start_tools,
    )


async def misses(engine: SelectionEngine, policy: Policy, catalog: Catalog, shape: str) -> dict:
    """Each GitHub tool whose bare name as a ``search_tools`` query does not load it
    first, and it alone (the other finds are listed, not loaded) → what the search
    found."""
    missed = {}
    searches = Searches(engine, policy, catalog)
    for name in GITHUB:
        full = NAMESPACE_SHAPES[shape].format(server="github", tool=name)
        outcome = await searches.search_tools(json.dumps({"query": name}), set())
        assert searches.late == [], "the search's ranking failed"
        found = [entry["name"] for entry in json.loads(outcome.content)["found"]]
        if found[:1] != [full] or outcome.admit != (full,):
            missed[name] = found
    return missed


@pytest.mark.parametrize("shape", NAMESPACE_SHAPES)
async def test_every_bare_name_loads_its_tool_while_the_catalogue_is_cold(shape: str) -> None:
    settings = Settings()
    engine, policy = cold_engine(settings), load_policy(settings)
    catalog = parse_tools(opencode_tools(shape))
    try:
        assert await misses(engine, policy, catalog, shape) == {}  # 117 of 117
        assert not engine.index_ready(catalog, policy.examples)
    finally:
        await engine.aclose()


@pytest.mark.parametrize("shape", NAMESPACE_SHAPES)
async def test_every_bare_name_loads_its_tool_once_the_catalogue_is_indexed(shape: str) -> None:
    settings = Settings(index_timeout_s=600.0)
    selector = build_selector(settings, build_embedder(settings))
    engine, policy = selector.engine, selector.policy
    catalog = parse_tools(opencode_tools(shape))
    try:
        await engine.embedder.load()
        await engine.index_for(catalog, policy.examples)
        assert await misses(engine, policy, catalog, shape) == {}  # 117 of 117
    finally:
        await engine.aclose()


ISSUE_PROMPT = "Find where the function render_thumbnail is defined in the octo/widgets repository"


def holding(text_start: str) -> Callable[[Recorded], Reply | None]:
    """An upstream behaviour: ``/embeddings`` calls with a text starting ``text_start``
    never answer (the rest get the built-in vectors)."""

    def behave(record: Recorded) -> Reply | None:
        if record.path.endswith("/embeddings") and any(
                text.startswith(text_start) for text in record.json().get("input", [])):
            return Hang()
        return None

    return behave


def test_the_issues_search_loads_github_search_code_before_it_is_embedded(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """Issue 43 as reported: opencode's request (``github_<tool>``), its first selection
    without ``github_search_code``, whose texts are not embedded (the index being built),
    then the model's ``search_tools("search_code")``."""
    upstream.upstream.behaviour = holding("github search code")
    proxy = start_proxy(embedder="upstream", embedder_model="e", index_timeout_s=0.2)
    call = {"id": "call_s1", "name": "search_tools",
            "arguments": json.dumps({"query": "search_code"})}
    upstream.upstream.script(Chat(content=None, tool_calls=[call]), Chat(content="done"))
    body = {"model": "m", "tools": opencode_tools(),
            "messages": [{"role": "user", "content": ISSUE_PROMPT}]}
    response = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=300,
                          headers={"authorization": "Bearer k"})
    assert response.status_code == 200, response.text[:300]
    before, after = [r.json() for r in upstream.upstream.requests
                     if r.path.endswith("/chat/completions")][-2:]
    offered = [[tool["function"]["name"] for tool in request["tools"]] for request in (before, after)]
    assert "github_search_code" not in offered[0]
    answer = json.loads(after["messages"][-1]["content"])
    assert answer["found"][0]["name"] == "github_search_code", answer
    assert "github_search_code" in answer["loaded"] and "github_search_code" in offered[1]
