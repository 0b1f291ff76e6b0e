"""The session oracle's tool block (benchmarks/support/oracle_block.py): the client's own
tools but its search, plus exactly the MCP tools the session calls, in each client's
shape (Chat functions with a server prefix, Messages tools deferred behind Claude Code's
ToolSearch, Codex's Responses namespaces), the definitions a deferring client loads
taken from its direct session, and the scripted agent then calling every tool by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.long_session_runs import counted_variants
from benchmarks.support.agent_behaviour import SESSION, AgentBehaviour
from benchmarks.support.github_mcp import catalog_tools
from benchmarks.support.oracle_block import (
    OracleError,
    OracleRewrite,
    called_only,
    catalogue_name,
    known_tools,
    oracle_tools,
)
from benchmarks.support.plain_responses import has_namespaces
from benchmarks.support.upstream import Recorded

SCHEMAS = {tool["name"]: tool["inputSchema"] for tool in catalog_tools()}
CALLED = list(dict.fromkeys(step.tool for step in SESSION.steps()))


def _chat(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name,
                                             "parameters": SCHEMAS.get(name.split("_", 1)[-1],
                                                                       {"type": "object"})}}


def _names(tools: list[Any]) -> list[str]:
    return [tool.get("name") or tool["function"]["name"] for tool in tools]


def test_a_client_tool_is_not_taken_for_an_mcp_tool() -> None:
    assert catalogue_name("mcp__github__list_pull_requests") == "list_pull_requests"
    assert catalogue_name("github_create_issue") == "create_issue"
    assert catalogue_name("create_issue") is None  # a client's own tool of that name
    assert catalogue_name("web_search") is None and catalogue_name("list_mcp_resources") is None


def test_a_client_sending_every_tool_keeps_its_own_and_the_sessions() -> None:
    tools = [_chat("bash"), *(_chat(f"github_{name}") for name in SCHEMAS), _chat("write")]
    kept = oracle_tools(tools, CALLED, {})
    assert _names(kept) == ["bash", "github_create_issue", "github_list_pull_requests",
                            "github_pull_request_read", "github_search_issues", "write"]
    assert _names(called_only({"tools": kept})["tools"]) == _names(kept)[1:-1]


def test_a_deferring_client_loses_its_search_and_gets_the_sessions_tools_undeferred() -> None:
    later = {"tools": [{"name": "ToolSearch", "input_schema": {}},
                       *({"name": f"mcp__github__{name}", "input_schema": SCHEMAS[name],
                          "defer_loading": True} for name in CALLED)]}
    known = known_tools([later])
    first = [{"name": "Bash", "input_schema": {}}, {"name": "ToolSearch", "input_schema": {}}]
    kept = oracle_tools(first, CALLED, known)
    assert _names(kept) == ["Bash", *(f"mcp__github__{name}" for name in CALLED)]
    assert all("defer_loading" not in tool for tool in kept)


def test_a_namespace_keeps_the_sessions_members_and_gets_those_a_search_found() -> None:
    member = {"type": "function", "name": "create_issue", "defer_loading": True,
              "parameters": SCHEMAS["create_issue"]}
    found = {"type": "tool_search_output", "tools": [
        {"type": "namespace", "name": "mcp__github", "tools": [member]}]}
    known = known_tools([{"input": [found]}])
    own = {"type": "namespace", "name": "multi_agent_v1",
           "tools": [{"type": "function", "name": "spawn_agent"}]}
    kept = oracle_tools([own, {"type": "tool_search"}, {"type": "web_search"}],
                        ["create_issue"], known)
    assert [tool.get("name", tool["type"]) for tool in kept] == [
        "multi_agent_v1", "web_search", "mcp__github"]
    assert kept[2]["tools"] == [{"type": "function", "name": "create_issue",
                                 "parameters": SCHEMAS["create_issue"]}]
    everything = {"type": "namespace", "name": "mcp__github", "tools": [
        {"type": "function", "name": name, "parameters": SCHEMAS[name]} for name in SCHEMAS]}
    (reduced,) = oracle_tools([everything], CALLED, {})
    assert [m["name"] for m in reduced["tools"]] == sorted(CALLED)
    body = {"tools": [reduced, {"type": "function", "name": "exec_command"}], "input": []}
    (as_run, (_, as_run_body)), (alone, (_, alone_body)) = [
        (label, bodies[0]) for label, bodies in counted_variants("oracle", [("/v1/responses", body)])]
    assert (as_run, alone) == ("oracle", "oracle (called only)")
    assert not has_namespaces(as_run_body)
    assert [t["name"] for t in as_run_body["tools"]] == [f"mcp__github__{n}" for n in sorted(CALLED)] + [
        "exec_command"]
    assert [t["name"] for t in alone_body["tools"]] == [f"mcp__github__{n}" for n in sorted(CALLED)]


def test_a_tool_nowhere_defined_is_a_clear_error() -> None:
    with pytest.raises(OracleError, match="create_issue.*run the direct session first"):
        oracle_tools([{"name": "ToolSearch"}], ["create_issue"], {})


def test_the_scripted_agent_calls_the_oracles_tools_by_name() -> None:
    rewrite = OracleRewrite(CALLED, known_tools([{"tools": [_chat(f"mcp__github__{n}")
                                                            for n in CALLED]}]))
    body = {"model": "m", "messages": [{"role": "user", "content": SESSION.turns[0].prompt}],
            "tools": [_chat("tool_search"), _chat("read_file")]}
    sent = rewrite("/v1/chat/completions", json.dumps(body).encode())
    assert _names(json.loads(sent)["tools"]) == ["read_file", *(f"mcp__github__{n}" for n in CALLED)]
    reply = AgentBehaviour(SESSION)(Recorded("POST", "/v1/chat/completions", "", [], sent))
    assert reply.tool_calls[0]["name"] == "mcp__github__list_pull_requests"  # type: ignore[union-attr]
    assert rewrite("/v1/models", b"{}") == b"{}"
