"""The real coding-agent CLIs (Claude Code, Codex, Qwen Code, opencode, at the versions
``deploy/agent_clis.py`` pins) run headless against the scripted agent upstream, directly
(the control: it proves the harness) and through a cold ``toolprune serve``.

Each CLI gets the 117-tool GitHub MCP server over stdio and the prompt "List the open pull
requests in octo/widgets"; the upstream calls the tool the prompt needs, or the search it
is offered, then answers quoting the tool's result. A session passes when the CLI exits 0,
the MCP server got the ``list_pull_requests`` call, and the CLI's final answer carries the
tool's result. Through the proxy, the requests that a client's own tool search grows keep
their conversation, and no request offers two discovery tools. A client that defers its
own tools plays the longer session of ``benchmarks/agent_sessions.py`` (two user turns,
four tools) directly and through the proxy: through it, the requests send no more prompt
tokens than the client's own (counted from their bodies). Every client plays that session
through a cold proxy that delivers later tools in the conversation, its block kept.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.support.agent_behaviour import SESSION, SlowPrefill
from benchmarks.support.agent_clients import MODES
from benchmarks.support.agent_requests import is_search, read_request
from benchmarks.support.agent_sessions import MODEL_PATHS, Session
from benchmarks.support.body_tokens import body_tokens
from benchmarks.support.github_mcp import PULL_REQUESTS_MARKER
from benchmarks.support.recording_relay import Exchange
from benchmarks.support.session_blocks import block_changes
from tests.agents.conftest import SessionFactory

ALL_MODES = list(MODES)
#: Modes whose client defers its MCP tools behind its own search function.
CLIENT_SEARCH_MODES = ["claude-toolsearch", "codex-toolsearch", "qwen-default"]
#: Qwen Code's request timeout in the slow-prefill test, and the upstream's prefill there.
QWEN_TIMEOUT_MS = 3000
SLOW_PREFILL_S = 6.0


def assert_task_done(session: Session) -> None:
    run = session.run
    assert run.returncode == 0 and not run.timed_out, session.describe()
    calls = run.called("list_pull_requests")
    assert calls, f"the MCP server got no list_pull_requests call\n{session.describe()}"
    assert {"owner": "octo", "repo": "widgets"}.items() <= calls[0]["arguments"].items()
    assert run.answer is not None and PULL_REQUESTS_MARKER in run.answer, session.describe()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_cli_does_the_task_directly_against_the_scripted_upstream(
    agent_sessions: SessionFactory, mode: str
) -> None:
    assert_task_done(agent_sessions(mode, via_proxy=False))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_cli_does_the_task_through_a_cold_proxy(
    agent_sessions: SessionFactory, mode: str
) -> None:
    session = agent_sessions(mode, via_proxy=True)
    assert session.decisions, f"the proxy made no decision\n{session.describe()}"
    assert_task_done(session)


def discovery_tools(path: str, body: Any) -> list[str]:
    view = read_request(path, body)
    return [] if view is None else [tool.name for tool in view.tools if is_search(tool)]


@pytest.mark.parametrize("mode", CLIENT_SEARCH_MODES)
def test_a_client_with_its_own_search_gets_no_second_discovery_tool(
    agent_sessions: SessionFactory, mode: str
) -> None:
    session = agent_sessions(mode, via_proxy=True)
    for record in session.upstream_requests:
        if record.method == "POST" and record.body:
            offered = discovery_tools(record.path, record.json())
            assert len(offered) <= 1, f"{offered} in one request\n{session.describe()}"


@pytest.mark.parametrize("mode", CLIENT_SEARCH_MODES)
def test_the_conversation_survives_the_client_search_adding_tools(
    agent_sessions: SessionFactory, mode: str
) -> None:
    session = agent_sessions(mode, via_proxy=True)
    main = [exchange for exchange in session.client_exchanges
            if exchange.request.method == "POST" and exchange.request.body
            and discovery_tools(exchange.request.path, exchange.request.json())]
    assert len(main) >= 2, f"the client's search never ran\n{session.describe()}"
    decisions = [session.decision_of(exchange) for exchange in main]
    keys = [(d or {}).get("conversation") for d in decisions]
    turns = [(d or {}).get("turn") for d in decisions]
    assert None not in keys and len(set(keys)) == 1, (
        f"conversation keys {keys}, turns {turns}\n{session.describe()}")
    assert turns == sorted(turns) and turns[0] < turns[-1], f"turns {turns}"


@pytest.mark.parametrize("via_proxy", [False, True], ids=["direct", "toolprune"])
def test_qwen_code_waits_through_a_slow_prefill_with_keep_alives(
    agent_sessions: SessionFactory, via_proxy: bool
) -> None:
    """The upstream takes longer than Qwen Code's request timeout to start its answer but
    sends SSE keep-alive comments meanwhile (as llama-server does during a long prefill):
    the client must see them and not give up and resend."""
    session = agent_sessions(
        "qwen-default", via_proxy=via_proxy, label="slow-prefill",
        upstream_behaviour=lambda behaviour: SlowPrefill(behaviour, SLOW_PREFILL_S),
        client_env={"QWEN_CODE_API_TIMEOUT_MS": str(QWEN_TIMEOUT_MS)})
    bodies = [record.body for record in session.client_requests if record.method == "POST"]
    assert len(bodies) == len(set(bodies)), (
        f"the client resent a request ({len(bodies) - len(set(bodies))} times)\n{session.describe()}")
    assert_task_done(session)


def model_tokens(exchanges: list[Exchange]) -> list[int]:
    """The prompt tokens of each model request of ``exchanges``, from its body."""
    return [body_tokens(e.request.path, e.request.json()) for e in exchanges
            if e.request.method == "POST" and e.request.path.endswith(MODEL_PATHS)]


@pytest.mark.parametrize("mode", CLIENT_SEARCH_MODES)
def test_a_deferring_clients_session_through_the_proxy_sends_no_more_prompt_tokens(
    agent_sessions: SessionFactory, mode: str
) -> None:
    """Two user turns (the second continues the session with the CLI's own switch), four
    MCP calls and the searches the client makes for them, directly (the control: the
    task is done) and through the proxy. What the client sent the proxy is what it sends
    directly, request for request (the same scripted answers came back; a separate direct
    session is no exact match: Codex's own search breaks ties at random): what reached
    the upstream holds no more prompt tokens over the session."""
    sessions = [agent_sessions(mode, via_proxy=via, label="session", task=SESSION)
                for via in (False, True)]
    for session in sessions:
        assert [run.returncode for run in session.runs] == [0] * len(SESSION.turns), (
            session.describe())
        assert [call["tool"] for call in session.run.calls] == [
            step.tool for step in SESSION.steps()], session.describe()
    proxied = sessions[1]
    sent, direct = model_tokens(proxied.upstream_exchanges), model_tokens(proxied.client_exchanges)
    assert sum(sent) <= sum(direct), (
        f"through the proxy {sum(sent):,} tokens, the client's own requests {sum(direct):,}\n"
        f"per request: {sent}\n         vs {direct}\n{proxied.describe()}")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_multi_turn_session_through_a_cold_proxy_keeps_its_block(
    agent_sessions: SessionFactory, mode: str
) -> None:
    """The two user turns of ``benchmarks/agent_sessions.py`` (the second typed with the
    CLI's own continue switch, needing tools the first did not), through a cold proxy that
    delivers tools found later in the conversation (``TOOLPRUNE_LATE_TOOLS=conversation``):
    every turn's calls reach the MCP server with their names and arguments, and no
    forwarded tool block changes unless the client changed its own request there."""
    session = agent_sessions(mode, via_proxy=True, label="delivered", task=SESSION,
                             proxy_settings={"late_tools": "conversation"})
    assert [run.returncode for run in session.runs] == [0] * len(SESSION.turns), session.describe()
    called = session.run.calls
    assert [call["tool"] for call in called] == [step.tool for step in SESSION.steps()], (
        session.describe())
    for call, step in zip(called, SESSION.steps(), strict=True):
        assert step.arguments.items() <= call["arguments"].items(), session.describe()
    models = [e for e in session.upstream_exchanges if e.request.path.endswith(MODEL_PATHS)]
    clients = [e for e in session.client_exchanges if e.request.path.endswith(MODEL_PATHS)]
    proxys_own = [change.index for change in block_changes(models, clients) if not change.by_client]
    assert proxys_own == [], f"the proxy changed the block at {proxys_own}\n{session.describe()}"
