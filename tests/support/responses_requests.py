"""Responses requests with deferred tools behind OpenAI's tool search, written from the
Responses API reference and the tool search guide (not copied from any client): the GitHub
MCP server's 117 tools (tests/data), ``get_me`` and ``search_repositories`` kept (the
client's CORE), the rest deferred, ten issue tools grouped in the ``issues`` namespace,
and hosted ``tool_search``. Codex-shaped requests with histories are JSON files in
``tests/fixtures/codex_responses``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.support.data import REAL_CATALOGS

GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex_responses"
#: The client's CORE: the tools it does not defer.
KEPT = ("get_me", "search_repositories")
#: Tools the client groups in the ``issues`` namespace (deferred with the rest).
NAMESPACED = ("create_issue", "list_issues", "update_issue_body", "update_issue_labels",
              "update_issue_state", "update_issue_title", "update_issue_assignees",
              "update_issue_milestone", "update_issue_type", "add_issue_comment")
ISSUES = {"type": "namespace", "name": "issues", "description": "Issues of a repository.",
          "tools": [{"type": "function", **tool["function"], "defer_loading": True}
                    for tool in GITHUB if tool["function"]["name"] in NAMESPACED]}
TOP_LEVEL = [
    {"type": "function", **tool["function"],
     **({} if tool["function"]["name"] in KEPT else {"defer_loading": True})}
    for tool in GITHUB if tool["function"]["name"] not in NAMESPACED
]
HOSTED_TOOLS = [*TOP_LEVEL, ISSUES, {"type": "tool_search"}]
ASK = "Open an issue in acme/shop saying that the checkout test is flaky"
