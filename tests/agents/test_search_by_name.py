"""A model that searches for a tool by its own name, whatever the client calls it (issue
43): opencode names the GitHub MCP server's tools ``github_<tool>``, and a model that
knows the tool it needs asks ``search_tools`` for ``search_code``, once (the issue's
model gave up when that search missed). The real CLI headless, directly (the control)
and through a cold ``toolprune serve`` whose catalogue is still being indexed when the
model searches (``index_timeout_s`` 0.01 s: what a loaded machine gave the issue's
default 1.5 s), against the scripted agent upstream
(:class:`benchmarks.support.agent_behaviour.AgentBehaviour` with the task below). The
session passes when the CLI exits 0, the MCP server got the ``search_code`` call and the
final answer quotes its result; through the proxy, the model's first request lacked the
tool and its one search, by the bare name, loaded it.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.support.agent_behaviour import AgentBehaviour, Step, Task, UserTurn
from benchmarks.support.agent_requests import read_request
from benchmarks.support.agent_sessions import Session
from benchmarks.support.github_mcp import CODE_MATCHES_MARKER
from tests.agents.conftest import SessionFactory

PROMPT = "Find where the function render_thumbnail is defined in the octo/widgets repository"
#: What the scripted model does: search once, by the tool's bare name, then call it.
TASK = Task(turns=(UserTurn(
    PROMPT, (Step("search_code", {"query": "render_thumbnail repo:octo/widgets"},
                  "search code", query="search_code"),),
    "render_thumbnail is defined here:"),), max_searches=1)
#: The proxy's wait for a cold catalogue's index (seconds): it is still being built.
INDEX_WAIT_S = "0.01"


def searches(session: Session) -> list[tuple[list[str], str]]:
    """Per request that reached the upstream: the tools it offered, and the query of the
    ``search_tools`` call it answers (empty when none)."""
    found = []
    for exchange in session.model_exchanges():
        body = exchange.request.json()
        view = read_request(exchange.request.path, body)
        if view is None:
            continue
        calls = [call["function"] for message in body.get("messages", [])
                 for call in message.get("tool_calls") or []
                 if call.get("function", {}).get("name") == "search_tools"]
        query = json.loads(calls[-1]["arguments"])["query"] if calls else ""
        found.append(([tool.name for tool in view.tools], query))
    return found


@pytest.mark.parametrize("via_proxy", [False, True], ids=["direct", "toolprune"])
def test_opencode_finds_a_tool_by_its_bare_name(
    agent_sessions: SessionFactory, via_proxy: bool
) -> None:
    session = agent_sessions(
        "opencode-default", via_proxy=via_proxy, label="search-by-name", prompts=[PROMPT],
        upstream_behaviour=lambda _: AgentBehaviour(TASK),
        proxy_settings={"index_timeout_s": INDEX_WAIT_S})
    run = session.run
    assert run.returncode == 0 and not run.timed_out, session.describe()
    calls = run.called("search_code")
    assert calls, f"the MCP server got no search_code call\n{session.describe()}"
    assert calls[0]["arguments"]["query"] == "render_thumbnail repo:octo/widgets"
    assert run.answer is not None and CODE_MATCHES_MARKER in run.answer, session.describe()
    if via_proxy:
        rounds = searches(session)
        assert "github_search_code" not in rounds[0][0], "the first selection had it: no search"
        searched = [tools for tools, query in rounds if query == "search_code"]
        assert searched and "github_search_code" in searched[0], session.describe()
        first = session.decisions[0] if session.decisions else {}
        assert first.get("lexical_only") or first.get("partial_index"), "the catalogue was indexed"
