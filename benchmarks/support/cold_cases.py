"""Labelled requests for the GitHub MCP catalogue, written for ``benchmarks/cold_start.py``
(no client's or benchmark's text): what a user asks a coding agent, and the tool it needs.
As plain chat requests on the 117 tools, and in Claude Code's shape (141 tools, a
``<system-reminder>`` block beside the prompt: ``client_catalogs.py``)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.support.client_catalogs import (
    as_openai_tools,
    claude_code_message,
    claude_code_tools,
    github_tools,
)
from selection.catalog.catalog import parse_tools
from selection.evaluation.cases import Case, CaseSet

#: (request, the tool it needs) on the GitHub MCP server.
GITHUB_TASKS = (
    ("List the open pull requests in octo/widgets", "list_pull_requests"),
    ("Open an issue in octo/widgets: the export button does nothing on Safari", "create_issue"),
    ("Who am I logged in as on GitHub?", "get_me"),
    ("Show me the README of octo/widgets", "get_file_contents"),
    ("Merge pull request 42 in octo/widgets once checks pass", "merge_pull_request"),
    ("Make a new branch called fix-tooltips from main in octo/widgets", "create_branch"),
    ("What changed in commit 9f3c2a1 of octo/widgets?", "get_commit"),
    ("Find code that calls parse_config across the octo organisation", "search_code"),
    ("Add a comment to issue 17 saying the fix is released", "add_issue_comment"),
    ("Which releases of octo/widgets exist?", "list_releases"),
    ("Fork octo/widgets into my account", "fork_repository"),
    ("Show the failing job logs of the last workflow run", "get_job_logs"),
    ("Star the repository octo/gadgets", "star_repository"),
    ("Ask hubot and mona to review pull request 7", "request_pull_request_reviewers"),
    ("Close issue 23 as not planned", "update_issue_state"),
    ("List the Dependabot alerts of octo/widgets", "list_dependabot_alerts"),
)


def _case_set(name: str, tools: list, messages_of, prefix: str) -> CaseSet:  # type: ignore[no-untyped-def]
    catalog = parse_tools(tools)
    cases = [
        Case(f"{name}_{i}", f"{name}_{i}", messages_of(prompt), catalog, tuple(catalog.names),
             ((f"{prefix}{tool}",),))
        for i, (prompt, tool) in enumerate(GITHUB_TASKS)
    ]
    return CaseSet(name, Path(name), cases, len(cases))


def github_cases() -> CaseSet:
    """The tasks as plain requests on the 117 GitHub tools."""
    return _case_set("github_117", github_tools(),
                     lambda prompt: [{"role": "user", "content": prompt}], "")


def claude_code_cases() -> CaseSet:
    """The tasks in Claude Code's shape: 141 tools, the reminder block beside the prompt."""
    return _case_set("claude_code_141", as_openai_tools(claude_code_tools()),
                     lambda prompt: [claude_code_message(prompt)], "mcp__github__")
