"""The meta-tools know the catalogue's servers (issue 35): ``search_tools`` can be asked
for one server's tools, and the ``load_tools`` menu lists its tools under their server.
A two-server catalogue in the ``<server>__<tool>`` shape most MCP clients send (the
repository's real GitHub and Playwright MCP catalogues) over Chat Completions; the proxy
under uvicorn in front of the scripted upstream (``benchmarks/support/upstream.py``), the
default embedder."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import httpx

from benchmarks.support.chat_replies import Chat
from benchmarks.support.data import REAL_CATALOGS
from tests.conftest import ProxyFactory, RunningUpstream

CHAT = "/v1/chat/completions"
SCREENSHOT = "Take a screenshot of the page I have open in the browser."


def servers_catalog(per_server: int | None = None) -> list[dict[str, Any]]:
    """The GitHub (117) and Playwright (69) MCP tools as ``github__*`` and
    ``playwright__*`` function tools (the first ``per_server`` of each when given)."""
    tools = []
    for server, file in (("github", "github_mcp_server.json"), ("playwright", "playwright_mcp.json")):
        for tool in json.loads((REAL_CATALOGS / file).read_text())[:per_server]:
            renamed = copy.deepcopy(tool)
            renamed["function"]["name"] = f"{server}__{tool['function']['name']}"
            tools.append(renamed)
    return tools


def ask(proxy: str, tools: list[dict[str, Any]], prompt: str = SCREENSHOT) -> dict[str, Any]:
    body = {"model": "m", "tools": tools, "messages": [{"role": "user", "content": prompt}]}
    response = httpx.post(proxy + CHAT, json=body, headers={"authorization": "Bearer k"},
                          timeout=300)
    assert response.status_code == 200, response.text[:300]
    return response.json()


def upstream_bodies(upstream: RunningUpstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith(CHAT)]


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body["tools"]]


def search_answer(upstream: RunningUpstream, proxy: str, arguments: dict[str, str]) -> dict[str, Any]:
    """The proxy's answer to a scripted ``search_tools(**arguments)`` round, and the tools
    of the round it re-issued (``"after"``)."""
    call = {"id": "meta_1", "name": "search_tools", "arguments": json.dumps(arguments)}
    upstream.upstream.script(Chat(content=None, tool_calls=[call]), Chat(content="done"))
    ask(proxy, servers_catalog())
    first, second = upstream_bodies(upstream)[-2:]
    assert "search_tools" in names(first)
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "meta_1"
    return {**json.loads(result["content"]), "after": names(second)}


def test_search_tools_asked_for_a_server_finds_that_servers_tools(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    unscoped = search_answer(upstream, proxy, {"query": "take a screenshot"})
    assert unscoped["found"][0]["name"].startswith("playwright__")  # what the query says
    scoped = search_answer(upstream, proxy, {"query": "take a screenshot", "server": "github"})
    found = [tool["name"] for tool in scoped["found"]]
    assert scoped["server"] == "github" and found, scoped
    assert all(name.startswith("github__") for name in found), found
    assert set(scoped["loaded"]) <= set(scoped["after"])  # loaded for the re-issued round


def test_search_tools_names_the_closest_servers_for_an_unknown_one(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    answer = search_answer(upstream, proxy, {"query": "open a page", "server": "jira"})
    assert "loaded" not in answer  # nothing loaded
    assert "no tool group" in answer["error"]
    assert set(answer["did_you_mean"]) <= {"github", "playwright"} and answer["did_you_mean"]


def test_the_load_tools_menu_lists_tools_under_their_server(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    upstream.upstream.script(Chat(content="done"))
    ask(proxy, servers_catalog(per_server=30))  # 60 tools: listed, not searched
    tools = upstream_bodies(upstream)[-1]["tools"]
    (menu,) = [t["function"] for t in tools if t["function"]["name"] == "load_tools"]
    lines = menu["description"].splitlines()
    headings = [line for line in lines if re.fullmatch(r"\[[\w-]+\]", line)]
    assert headings and set(headings) <= {"[github]", "[playwright]"}, lines
    heading = None
    for line in lines:
        if line in headings:
            heading = line[1:-1]
        elif line.startswith("- ") and heading is not None:
            assert line[2:].startswith(f"{heading}__"), (heading, line)
