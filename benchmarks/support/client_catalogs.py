"""A coding agent's request in Claude Code's shape, written for the tests and benchmarks
(no client's text): 24 built-in tools of its kind (names as the CLI's 2.1.197 sends them;
descriptions and schemas our own) before the 117 GitHub MCP tools as ``mcp__github__<name>``,
and a user message whose first content block is a ``<system-reminder>`` element (date and
context, with words that point at the task-list tools) beside the prompt. Also opencode's
shape (its 10 built-ins as 1.18.33 names them, then the GitHub tools) under each namespace
shape a client gives an MCP server's tools (:data:`NAMESPACE_SHAPES`).
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.support.data import REAL_CATALOGS

Schema = dict[str, Any]

PROMPT = "List the open pull requests in octo/widgets"
#: The tool the prompt needs.
EXPECTED = "mcp__github__list_pull_requests"

_TEXT = {"type": "string"}
#: name → (description, required string arguments)
BUILTINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Agent": ("Start a helper agent that works on a sub-task on its own and reports back.",
              ("prompt",)),
    "Bash": ("Run a shell command in the project's folder and return its output.", ("command",)),
    "CronCreate": ("Schedule a prompt to run again at the times a cron expression gives.",
                   ("schedule", "prompt")),
    "CronDelete": ("Cancel a scheduled prompt by its id.", ("id",)),
    "CronList": ("Show the prompts that are scheduled to run later.", ()),
    "Edit": ("Replace one exact piece of text in a file with another.",
             ("file_path", "old_string", "new_string")),
    "EnterWorktree": ("Move the session into a separate git worktree.", ("name",)),
    "ExitWorktree": ("Leave the git worktree and return to the main checkout.", ()),
    "NotebookEdit": ("Change, add or delete one cell of a Jupyter notebook.",
                     ("notebook_path", "new_source")),
    "Read": ("Read a file from the local disk, optionally a range of its lines.", ("file_path",)),
    "ReportFindings": ("Hand in the findings of a review as a structured list.", ("findings",)),
    "ScheduleWakeup": ("Ask to be woken up after a delay to look at something again.",
                       ("seconds",)),
    "SendMessage": ("Send a message to another running agent.", ("to", "message")),
    "Skill": ("Load a named skill: extra instructions for a kind of job.", ("skill",)),
    "TaskCreate": ("Add an item to the session's task list, to keep track of the work.",
                   ("subject",)),
    "TaskGet": ("Show one item of the task list with its details.", ("task_id",)),
    "TaskList": ("Show every item of the task list and its status.", ()),
    "TaskOutput": ("Read what a background task has printed so far.", ("task_id",)),
    "TaskStop": ("Stop a background task that is still running.", ("task_id",)),
    "TaskUpdate": ("Change the status or the text of an item of the task list.", ("task_id",)),
    "WebFetch": ("Download a web page and answer a question about its content.", ("url", "prompt")),
    "WebSearch": ("Search the web and return the results with their links.", ("query",)),
    "Workflow": ("Run one of the project's saved multi-step workflows.", ("name",)),
    "Write": ("Write a whole file to the local disk, replacing what it held.",
              ("file_path", "content")),
}


#: How clients name an MCP server's tool: ``{server}`` and ``{tool}`` filled in.
NAMESPACE_SHAPES = {
    "mcp__server__tool": "mcp__{server}__{tool}",  # Claude Code, Codex, Qwen Code
    "server_tool": "{server}_{tool}",  # opencode
    "server.tool": "{server}.{tool}",
    "server/tool": "{server}/{tool}",
    "server-tool": "{server}-{tool}",
}
#: opencode's built-in tools, name → (description, required string arguments).
OPENCODE_BUILTINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "bash": ("Run a shell command in the project's folder and return its output.", ("command",)),
    "edit": ("Replace one exact piece of text in a file with another.",
             ("filePath", "oldString", "newString")),
    "glob": ("Find the files whose paths match a glob pattern.", ("pattern",)),
    "grep": ("Search the contents of files for a regular expression.", ("pattern",)),
    "read": ("Read a file from the local disk, optionally a range of its lines.", ("filePath",)),
    "skill": ("Load a named skill: extra instructions for a kind of job.", ("name",)),
    "task": ("Start a helper agent that works on a sub-task on its own and reports back.",
             ("prompt",)),
    "todowrite": ("Write the session's to-do list, to keep track of the work.", ("todos",)),
    "webfetch": ("Download a web page and return its content.", ("url",)),
    "write": ("Write a whole file to the local disk, replacing what it held.",
              ("filePath", "content")),
}


def reminder(date: str = "2026-06-14") -> str:
    """A ``<system-reminder>`` block of the kind a client puts before the prompt."""
    return (
        "<system-reminder>\n"
        "Context for the questions of this session, which may or may not matter for the "
        f"task at hand:\n# today\nThe date is {date}.\n# task list\nThe task list is empty; "
        "create tasks and keep their status current when the work has several steps.\n"
        "</system-reminder>\n\n"
    )


def _builtin(name: str) -> Schema:
    description, required = BUILTINS[name]
    parameters = {"type": "object", "properties": dict.fromkeys(required, _TEXT),
                  "required": list(required)}
    return {"name": name, "description": description, "input_schema": parameters}


def github_tools() -> list[Schema]:
    """The GitHub MCP server's 117 tools, OpenAI shape (``tests/data/real_catalogs``)."""
    return json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())


def claude_code_tools() -> list[Schema]:
    """141 tools in the Messages API's shape: the built-ins, then ``mcp__github__*``."""
    tools = [_builtin(name) for name in BUILTINS]
    for tool in github_tools():
        function = tool["function"]
        tools.append({
            "name": f"mcp__github__{function['name']}",
            "description": function.get("description", ""),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        })
    return tools


def opencode_tools(shape: str = "server_tool", server: str = "github") -> list[Schema]:
    """127 Chat Completions tools: opencode's built-ins, then the GitHub tools named
    ``shape`` (a key of :data:`NAMESPACE_SHAPES`; opencode's own is ``server_tool``)."""
    tools = []
    for name, (description, required) in OPENCODE_BUILTINS.items():
        parameters = {"type": "object", "properties": dict.fromkeys(required, _TEXT),
                      "required": list(required)}
        tools.append({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters}})
    for tool in github_tools():
        name = NAMESPACE_SHAPES[shape].format(server=server, tool=tool["function"]["name"])
        tools.append({**tool, "function": {**tool["function"], "name": name}})
    return tools


def as_openai_tools(tools: list[Schema]) -> list[Schema]:
    """Messages API tools as Chat Completions function tools."""
    return [{"type": "function", "function": {
        "name": tool["name"], "description": tool["description"], "parameters": tool["input_schema"],
    }} for tool in tools]


def claude_code_message(prompt: str = PROMPT) -> dict[str, Any]:
    """The first user message: the reminder block, then the prompt, as content blocks."""
    return {"role": "user", "content": [
        {"type": "text", "text": reminder()}, {"type": "text", "text": prompt},
    ]}
