"""Request shapes of agents that defer their tools, written from the public API references
(Anthropic's Messages API and tool search tool page; OpenAI's Chat Completions), not
copied from any client: what Claude Code-like agents send to ``/v1/messages`` with the
GitHub MCP server's 117 tools (tests/data) deferred behind a search.

* The agent's own tools (``Bash``, ``Read``) are not deferred: the client's CORE.
* MCP tools are named ``mcp__<server>__<tool>`` and carry ``"defer_loading": true``.
* The discovery mechanism is either Anthropic's tool search server tool
  (``tool_search_tool_regex_20251119`` / ``tool_search_tool_bm25_20251119``) or a custom
  ``ToolSearch`` tool the client runs itself, answering with ``tool_reference`` blocks.
* A later turn carries the earlier search in its history: the assistant turn's
  ``server_tool_use`` and ``tool_search_tool_result`` blocks, then the found tool's
  ``tool_use`` and the user's ``tool_result``.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.support.data import REAL_CATALOGS

GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
PREFIX = "mcp__github__"

BASH = {
    "name": "Bash",
    "description": "Run a shell command in the project's working directory and return its output.",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout": {"type": "integer", "description": "Milliseconds before it is stopped."},
        },
        "required": ["command"],
    },
}
READ = {
    "name": "Read",
    "description": "Read a file of the project, optionally a range of its lines.",
    "input_schema": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path of the file."},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
        },
        "required": ["file_path"],
    },
}
#: A search the client runs itself (its result holds ``tool_reference`` blocks).
TOOL_SEARCH = {
    "name": "ToolSearch",
    "description": "Find deferred tools by keywords and load their definitions.",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
REGEX_SEARCH = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
BM25_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}

SYSTEM = [{"type": "text", "text": "You are a coding agent working in a git repository."}]
ASK = "Open a pull request from branch feature/search into main titled 'Tool search'."
PR_TOOL = PREFIX + "create_pull_request"
PR_INPUT = {"owner": "octo", "repo": "proxy", "title": "Tool search", "head": "feature/search",
            "base": "main"}


def deferred_github() -> list[dict[str, Any]]:
    """The 117 GitHub MCP tools as Anthropic custom tools, deferred."""
    return [
        {"name": PREFIX + t["function"]["name"], "description": t["function"].get("description", ""),
         "input_schema": t["function"]["parameters"], "defer_loading": True}
        for t in GITHUB
    ]


def messages_tools(search: dict[str, Any] | None = REGEX_SEARCH) -> list[dict[str, Any]]:
    """``tools`` as such an agent sends them: its own tools, the search tool (a server
    tool, or None for the client's own ``ToolSearch``), then the deferred MCP tools."""
    own = [BASH, READ, search if search is not None else TOOL_SEARCH]
    return [*own, *deferred_github()]


def first_turn(search: dict[str, Any] | None = REGEX_SEARCH) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 256, "system": SYSTEM, "tools": messages_tools(search),
            "messages": [{"role": "user", "content": ASK}]}


def server_search_history(search_id: str = "srvtoolu_01a", found: str = PR_TOOL) -> list[Any]:
    """A conversation whose assistant turn searched with the server tool, called what it
    found, and got its result."""
    return [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I'll look for a pull request tool."},
            {"type": "server_tool_use", "id": search_id, "name": "tool_search_tool_regex",
             "input": {"query": "create_pull_request$"}},
            {"type": "tool_search_tool_result", "tool_use_id": search_id,
             "content": {"type": "tool_search_tool_search_result",
                         "tool_references": [{"type": "tool_reference", "tool_name": found}]}},
            {"type": "tool_use", "id": "toolu_01b", "name": found, "input": PR_INPUT},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01b", "content": "Pull request #7 opened."},
        ]},
    ]


def client_search_history(found: str = PR_TOOL) -> list[Any]:
    """A conversation whose assistant turn called the client's own ``ToolSearch``, which
    answered with a ``tool_reference``."""
    return [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_02a", "name": "ToolSearch",
             "input": {"query": "create pull request"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_02a",
             "content": [{"type": "tool_reference", "tool_name": found}]},
        ]},
    ]


def chat_tools(kept: tuple[str, ...] = ("get_me", "search_repositories")) -> list[dict[str, Any]]:
    """The 117 GitHub tools as Chat Completions functions, all but ``kept`` deferred
    (``defer_loading`` beside ``function``)."""
    return [
        tool if tool["function"]["name"] in kept else {**tool, "defer_loading": True}
        for tool in GITHUB
    ]
