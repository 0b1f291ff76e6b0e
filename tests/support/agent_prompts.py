"""Realistic system prompts for the text path (issue #6), written for these tests in the
style of real agents that describe their tools as text (no agent's actual prompt text).

- :func:`hermes_prompt`: a Hermes/Qwen-style function-calling prompt, a ``<tools>``
  block of one JSON function schema per line (built from a real MCP catalogue).
- :func:`coding_agent_prompt`: a Cline-like coding agent, one ``## tool_name`` section
  per tool (``Description:``, ``Parameters:``, ``Usage:`` with an XML example), followed
  by other ``#`` sections of rules.
- :func:`lines_prompt`: one ``- name: description`` or ``name(args): description``
  line per tool (built from a real MCP catalogue).

And prompts that must NOT be taken for a tool block: bulleted guidelines, a markdown
document with ``## Installation``-style headings, tool-looking text in fenced code.
Every builder is deterministic and returns the same string for the same arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchmarks.support.data import REAL_CATALOGS

Schema = dict[str, Any]


def load_catalog(name: str) -> list[Schema]:
    """A real catalogue (``github_mcp_server`` or ``playwright_mcp``): OpenAI tool objects."""
    return json.loads((REAL_CATALOGS / f"{name}.json").read_text())


def tool_name(tool: Schema) -> str:
    return tool["function"]["name"]


# --- hermes / Qwen -----------------------------------------------------------------


def hermes_lines(tools: Sequence[Schema]) -> list[str]:
    """One JSON function schema per line, as Hermes/Qwen chat templates render ``tools``."""
    return [json.dumps(tool, ensure_ascii=False) for tool in tools]


def hermes_prompt(tools: Sequence[Schema], *, inline_tag_mention: bool = False) -> str:
    """A Hermes/Qwen-style function-calling system prompt rendered client-side.

    ``inline_tag_mention``: the prose names the tags inline before the block (``... the
    <tools></tools> XML tags``), as those templates' wording commonly does.
    """
    where = (
        "The functions you may call are described as JSON schemas inside the <tools></tools> "
        "XML tags below."
        if inline_tag_mention
        else "The functions you may call are described below, one JSON schema per line, "
        "between the tools tags."
    )
    block = "\n".join(hermes_lines(tools))
    return (
        "You are Wren, a careful web automation assistant. You operate a real Chromium "
        "browser on behalf of the user and you report what you observed, not what you "
        "expected to see.\n"
        "Today's date is 2025-03-14. The user's locale is en-GB.\n"
        "\n"
        "# Tools\n"
        "\n"
        "You can call one or more functions to help with the user's request. "
        f"{where} Never invent a function or an argument that is not in a schema.\n"
        "<tools>\n"
        f"{block}\n"
        "</tools>\n"
        "\n"
        "To call a function, reply with a JSON object holding the function's name and its "
        "arguments, wrapped in tool_call tags, like this:\n"
        "<tool_call>\n"
        '{"name": "<function-name>", "arguments": {"<argument>": "<value>"}}\n'
        "</tool_call>\n"
        "You may emit several tool_call blocks in one reply; they run in order. The "
        "results come back in a tool_response block from the user.\n"
        "\n"
        "# Working style\n"
        "\n"
        "Take a snapshot before you click or type, so that element references are fresh. "
        "When a page asks for credentials, stop and ask the user. Summarise what you did "
        "in two or three sentences when the task is complete."
    )


# --- Cline-like coding agent (markdown) ----------------------------------------------

#: (name, description, [(parameter, required, description, example value)])
CODING_TOOLS: list[tuple[str, str, list[tuple[str, bool, str, str]]]] = [
    ("run_command", ("Run a shell command in the workspace terminal and return its output. "
     "Use it for builds, package managers and one-off scripts. Commands run in the "
     "workspace root unless you cd first; prefer non-interactive flags."),
     [("command", True, "The command line to run.", "npm run build"),
      ("needs_approval", True, ("true for commands that change the system, delete data or "
       "reach the network; false for read-only commands."), "false")]),
    ("read_file", ("Read a text file and return its contents with line numbers. Large files "
     "are cut at 2000 lines; pass a range to read further."),
     [("path", True, "File path, relative to the workspace root.", "src/server/routes.ts"),
      ("start_line", False, "First line to return (1-based).", "1"),
      ("end_line", False, "Last line to return, inclusive.", "120")]),
    ("create_file", ("Create a new file, or overwrite an existing one, with the given "
     "content. Parent directories are created as needed. Always write the complete file."),
     [("path", True, "File path, relative to the workspace root.", "src/utils/slugify.ts"),
      ("content", True, "The full content of the file.",
       "export const slugify = (s: string) => s.toLowerCase().replace(/\\W+/g, '-');")]),
    ("replace_in_file", ("Edit part of an existing file with one or more SEARCH/REPLACE "
     "blocks. Each SEARCH text must match the file exactly, whitespace included, and "
     "only its first occurrence is replaced."),
     [("path", True, "File path, relative to the workspace root.", "src/app.ts"),
      ("diff", True, ("One or more blocks of the form <<<<<<< SEARCH / ======= / "
       ">>>>>>> REPLACE."),
       "<<<<<<< SEARCH\nconst port = 3000;\n=======\nconst port = Number(process.env.PORT ?? 3000);\n>>>>>>> REPLACE")]),
    ("insert_lines", "Insert text before a given line of a file without rewriting the rest.",
     [("path", True, "File path.", "README.md"),
      ("line", True, "1-based line number to insert before; one past the end appends.", "42"),
      ("text", True, "The lines to insert.", "## Troubleshooting")]),
    ("delete_file", ("Delete a file from the workspace. Directories are refused; use "
     "run_command for those after asking the user."),
     [("path", True, "File path.", "tmp/old-report.csv")]),
    ("move_file", ("Move or rename a file inside the workspace, creating the target "
     "directory if needed."),
     [("source", True, "Current path.", "src/helpers.ts"),
      ("destination", True, "New path.", "src/lib/helpers.ts")]),
    ("list_directory", ("List the files and folders in a directory. Hidden entries and "
     "ignored paths are skipped."),
     [("path", True, "Directory path.", "src/components"),
      ("recursive", False, "true to list the whole subtree.", "false")]),
    ("find_files", "Find files whose path matches a glob pattern, newest first.",
     [("pattern", True, "Glob pattern.", "**/*.test.ts"),
      ("path", False, "Directory to search in; default the workspace root.", "src")]),
    ("search_text", ("Search file contents with a regular expression and return matching "
     "lines with two lines of context."),
     [("regex", True, "Rust-flavoured regular expression.", "TODO|FIXME"),
      ("path", False, "Directory to search in.", "src"),
      ("file_pattern", False, "Glob restricting which files are searched.", "*.ts")]),
    ("list_code_definitions", ("List the top-level classes, functions and methods defined "
     "in the source files of a directory, to get an overview of a codebase."),
     [("path", True, "Directory path.", "src/server")]),
    ("go_to_definition", "Find where a symbol is defined, using the language server.",
     [("path", True, "File containing a use of the symbol.", "src/app.ts"),
      ("symbol", True, "Symbol name.", "createServer")]),
    ("find_references", ("List every place a symbol is used across the workspace, using "
     "the language server."),
     [("path", True, "File that defines the symbol.", "src/db/pool.ts"),
      ("symbol", True, "Symbol name.", "getPool")]),
    ("rename_symbol", ("Rename a symbol and update every reference to it, using the "
     "language server's rename refactoring."),
     [("path", True, "File that defines the symbol.", "src/db/pool.ts"),
      ("symbol", True, "Current name.", "getPool"),
      ("new_name", True, "New name.", "connectionPool")]),
    ("run_tests", ("Run the project's test suite, or a subset, and return a summary of "
     "failures with their stack traces."),
     [("selector", False, "Test file, directory or name filter.", "tests/api/users.test.ts"),
      ("watch", False, "Never true in this environment.", "false")]),
    ("run_linter", ("Run the configured linter and type checker and return the problems "
     "found, grouped by file."),
     [("path", False, "Limit the run to a path.", "src")]),
    ("format_code", "Format files with the project's formatter configuration.",
     [("path", True, "File or directory.", "src/app.ts")]),
    ("git_status", "Show the working tree status: staged, modified and untracked files.",
     []),
    ("git_diff", "Show the diff of unstaged changes, or of the staged changes.",
     [("staged", False, "true for the staged diff.", "false"),
      ("path", False, "Limit the diff to a path.", "src")]),
    ("git_commit", "Stage the given paths and create a commit. Never amend or force-push.",
     [("message", True, "Commit message: a short summary line, a blank line, details.",
       "Read the port from the environment"),
      ("paths", True, "Comma-separated paths to stage.", "src/app.ts,README.md")]),
    ("git_log", "Show recent commits with author, date and subject.",
     [("limit", False, "How many commits; default 20.", "10"),
      ("path", False, "Only commits touching this path.", "src/db")]),
    ("git_switch_branch", ("Switch to a branch, creating it from the current HEAD when it "
     "does not exist."),
     [("branch", True, "Branch name.", "fix/port-from-env"),
      ("create", False, "true to create the branch.", "true")]),
    ("open_in_browser", ("Open a URL in the headless browser and return a screenshot and "
     "the console output. Use it to check a running web app."),
     [("url", True, "The URL, including the scheme.", "http://localhost:5173/login")]),
    ("browser_action", ("Act on the page opened with open_in_browser: click at a position, "
     "type text, scroll, or close the browser."),
     [("action", True, "One of click, type, scroll_down, scroll_up, close.", "click"),
      ("coordinate", False, "x,y for click.", "640,360"),
      ("text", False, "Text for type.", "hello@example.com")]),
    ("fetch_url", ("Download a web page or a raw file over HTTP(S) and return it as "
     "markdown (HTML) or text."),
     [("url", True, "The URL.", "https://raw.githubusercontent.com/acme/lib/main/CHANGELOG.md")]),
    ("web_search", ("Search the web and return the top results with titles, URLs and "
     "snippets. Use it for error messages and library documentation."),
     [("query", True, "Search terms.", "vite proxy websocket ECONNRESET"),
      ("max_results", False, "Default 5.", "5")]),
    ("install_package", ("Add a dependency with the project's package manager and update "
     "the lockfile."),
     [("name", True, "Package name, optionally with a version.", "zod@3"),
      ("dev", False, "true for a development dependency.", "false")]),
    ("start_process", ("Start a long-running process (a dev server, a watcher) in the "
     "background and return its id."),
     [("command", True, "The command line.", "npm run dev"),
      ("ready_pattern", False, "Output that means the process is ready.", "Local:")]),
    ("read_process_output", ("Return the latest output of a background process started "
     "with start_process."),
     [("process_id", True, "The id start_process returned.", "p1"),
      ("lines", False, "How many trailing lines.", "50")]),
    ("stop_process", "Stop a background process started with start_process.",
     [("process_id", True, "The id start_process returned.", "p1")]),
    ("query_database", ("Run a read-only SQL query against the development database and "
     "return at most 200 rows."),
     [("sql", True, "A single SELECT statement.", "SELECT id, email FROM users LIMIT 5")]),
    ("update_todo_list", ("Replace the task's checklist shown to the user. Keep it short "
     "and mark items done as you go."),
     [("items", True, "Markdown checklist.", "- [x] Reproduce\n- [ ] Fix\n- [ ] Test")]),
    ("ask_followup_question", ("Ask the user a question when the task is ambiguous or you "
     "need information only they have. Offer two to four suggested answers."),
     [("question", True, "The question.", "Should the port default stay 3000?"),
      ("options", False, "JSON array of suggested answers.", '["Yes", "No, use 8080"]')]),
    ("attempt_completion", ("Present the result of the task to the user once every tool "
     "use has succeeded. Do not end with a question."),
     [("result", True, "What was done.", "The server now reads PORT from the environment."),
      ("command", False, "A command that demonstrates the result.", "npm start")]),
]


def coding_tool_names() -> list[str]:
    return [name for name, _, _ in CODING_TOOLS]


def coding_tool_section(name: str, description: str, params: list[tuple[str, bool, str, str]]) -> str:
    """One ``## name`` section: Description, Parameters, Usage with an XML example."""
    lines = [f"## {name}", f"Description: {description}", "Parameters:"]
    if not params:
        lines.append("(none)")
    for param, required, text, _ in params:
        lines.append(f"- {param}: ({'required' if required else 'optional'}) {text}")
    lines += ["Usage:", f"<{name}>"]
    lines += [f"<{param}>{example}</{param}>" for param, _, _, example in params]
    lines += [f"</{name}>", ""]
    return "\n".join(lines) + "\n"


def coding_agent_prompt(*, intro_subsection: bool = False, fenced_usage: bool = False) -> str:
    """A Cline-like coding-agent system prompt (markdown tool sections).

    ``intro_subsection``: a ``## Style`` subsection under an opening ``# Role`` heading,
    before the tools (many prompts open with such sections).
    ``fenced_usage``: the usage examples are in ```xml fences.
    """
    sections = []
    for name, description, params in CODING_TOOLS:
        section = coding_tool_section(name, description, params)
        if fenced_usage:
            head, usage = section.split("Usage:\n", 1)
            section = head + "Usage:\n```xml\n" + usage.rstrip("\n") + "\n```\n\n"
        sections.append(section)
    role = (
        "# Role\n\n"
        "You are Forge, a senior software engineer working inside the user's editor.\n\n"
        "## Style\n\n"
        "Be direct and technical. No filler, no praise of the question.\n\n"
        if intro_subsection
        else "You are Forge, a senior software engineer working inside the user's editor. "
        "You read code before you change it, you make the smallest change that solves the "
        "problem, and you verify your work.\n\n"
    )
    return (
        role
        + "-----\n\n"
        "USING TOOLS\n\n"
        "You work through tools that the user approves one at a time. Use exactly one tool "
        "per message; the result arrives in the user's next message. Work step by step, "
        "letting each result inform the next call.\n\n"
        "# Tool call format\n\n"
        "Write a tool call as XML: the tool's name is the outer tag and each parameter is "
        "a child tag.\n\n"
        "<tool_name>\n<first_parameter>value</first_parameter>\n"
        "<second_parameter>value</second_parameter>\n</tool_name>\n\n"
        "Always use this format so the call can be parsed and run.\n\n"
        "# Tools\n\n"
        + "".join(sections)
        + "# Examples\n\n"
        "## Example 1: starting the dev server\n\n"
        "<start_process>\n<command>npm run dev</command>\n<ready_pattern>Local:</ready_pattern>\n"
        "</start_process>\n\n"
        "## Example 2: a targeted edit\n\n"
        "<replace_in_file>\n<path>src/app.ts</path>\n<diff>\n<<<<<<< SEARCH\nconst a = 1;\n"
        "=======\nconst a = 2;\n>>>>>>> REPLACE\n</diff>\n</replace_in_file>\n\n"
        "# Tool use guidelines\n\n"
        "1. Think about what you already know and what you still need before each call.\n"
        "2. Prefer search_text and list_code_definitions over reading whole directories.\n"
        "3. Wait for the result of each call before the next one; never assume success.\n"
        "4. If a call fails, read the error and adjust instead of repeating the same call.\n\n"
        "-----\n\n"
        "# Rules\n\n"
        "- The workspace root is /home/dev/shop-api; you cannot cd out of it for good.\n"
        "- Do not use ~ or $HOME in paths.\n"
        "- Match the project's code style and keep imports sorted.\n"
        "- Never print secrets from .env files in your replies.\n"
        "- Do not start a message with filler such as 'Great' or 'Certainly'.\n\n"
        "# System information\n\n"
        "Operating system: Linux 6.8\nDefault shell: /bin/bash\nHome: /home/dev\n"
        "Workspace: /home/dev/shop-api\n\n"
        "# Objective\n\n"
        "Break the task into steps, work through them with the tools, then present the "
        "result with attempt_completion.\n"
    )


# --- lines ---------------------------------------------------------------------------


def _first_sentence(description: str) -> str:
    line = description.strip().splitlines()[0].strip()
    return line if len(line) <= 160 else line[:157].rstrip() + "..."


def lines_entry(tool: Schema, style: str) -> str:
    """One line for ``tool``: ``- name: description`` (``dash``) or
    ``name(arg, optional?): description`` (``call``)."""
    function = tool["function"]
    description = _first_sentence(function.get("description") or function["name"])
    if style == "dash":
        return f"- {function['name']}: {description}"
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required") or [])
    args = ", ".join(
        name if name in required else f"{name}?" for name in (parameters.get("properties") or {})
    )
    return f"{function['name']}({args}): {description}"


def lines_prompt(tools: Sequence[Schema], style: str = "dash", *, guidelines_after: bool = False) -> str:
    """A prompt listing one tool per line, for a model without native tool calling that
    answers with a JSON object ``{"tool": ..., "args": ...}``.

    ``guidelines_after``: the tool list is followed, after a blank line, directly by a
    bulleted list of ``- Label: text`` guidelines (no heading in between).
    """
    entries = "\n".join(lines_entry(tool, style) for tool in tools)
    guidelines = (
        "\n\n- Safety: never submit a form that spends money without asking first.\n"
        "- Privacy: do not copy personal data into your replies.\n"
        "- Honesty: if a step failed, say so.\n"
        if guidelines_after
        else "\n"
    )
    return (
        "You are Quill, an assistant that gets things done with tools. You cannot see "
        "the world directly; everything you know about it comes from tool results.\n\n"
        'To use a tool, answer with one JSON object and nothing else: {"tool": '
        '"<tool name>", "args": {...}}. The result comes back in the next user message. '
        "When no tool is needed, answer in plain text.\n\n"
        "Tools:\n"
        + entries
        + guidelines
        + "\nAnswer in the user's language. Keep answers under 150 words unless asked "
        "for more.\n"
    )


# --- prompts that are not tool blocks ------------------------------------------------


def guidelines_prompt() -> str:
    """A support-assistant prompt made of bulleted ``- Label: text`` guidelines."""
    return (
        "You are the support assistant of Northwind Bikes, an online bicycle shop.\n\n"
        "Guidelines:\n"
        "- Tone: friendly, calm and concise.\n"
        "- Language: answer in the customer's language.\n"
        "- Greeting: greet returning customers by their first name.\n"
        "- Orders: you can look up order status when the customer gives an order number.\n"
        "- Returns: returns are free within 30 days; ask for the order number first.\n"
        "- Warranty: frames carry a 5-year warranty, components 2 years.\n"
        "- Follow-up: offer a follow-up email when an issue is not solved in the chat.\n"
        "- Escalation: hand over to a human when the customer asks, or after two failed "
        "attempts.\n"
        "- Privacy: never read out full addresses or card numbers.\n"
        "- Pricing: never promise discounts; point to the current offers page.\n"
        "- Opening-hours: the workshop is open Monday to Saturday, 9:00 to 18:00.\n"
        "- Sign-off: end with 'Happy riding!'.\n"
        "* Emojis: at most one per message.\n"
        "* Links: only link to northwindbikes.example pages.\n\n"
        "If you are unsure, say so and offer to connect the customer with the team.\n"
    )


def markdown_document_prompt() -> str:
    """A system prompt that embeds a project's README: ``## Installation``-style headings,
    one of them with a ``Usage:`` line."""
    return (
        "You answer questions about the `tidewater` library. Its README follows.\n\n"
        "# tidewater\n\n"
        "Tidewater computes tide tables from harmonic constituents.\n\n"
        "## Installation\n\n"
        "Install it from PyPI:\n\n```sh\npip install tidewater\n```\n\n"
        "## Quickstart\n\n"
        "Usage: tidewater predict --station BREST --days 7\n\n"
        "## Configuration\n\n"
        "Settings are read from `~/.config/tidewater.toml`.\n\n"
        "## Stations\n\n"
        "About 3,000 stations ship with the package; add your own as CSV.\n\n"
        "## Accuracy\n\n"
        "Predictions are within 10 cm at most reference ports.\n\n"
        "## Performance\n\n"
        "A year of hourly predictions takes about 40 ms.\n\n"
        "## Troubleshooting\n\n"
        "Run with `--verbose` and include the output in bug reports.\n\n"
        "## Contributing\n\n"
        "Pull requests are welcome; run `make check` first.\n\n"
        "## Changelog\n\n"
        "See CHANGELOG.md.\n\n"
        "## License\n\n"
        "MIT.\n\n"
        "## Acknowledgements\n\n"
        "Constituent tables courtesy of the national hydrographic offices.\n\n"
        "Answer precisely and cite the README section you used.\n"
    )


def fenced_examples_prompt(kind: str) -> str:
    """A prompt whose only tool-looking text is inside a fenced code block.

    ``kind``: ``lines`` (a ``- name: description`` list in a YAML-ish fence),
    ``signatures`` (a TypeScript interface: ``name(args): type`` lines), ``markdown``
    (a ``## tool`` section template with Description/Parameters/Usage lines),
    ``hermes`` (a ``<tools>`` block of JSON schema lines).
    """
    names = [
        "read_config", "write_config", "list_users", "create_user", "delete_user",
        "reset_password", "list_groups", "add_to_group", "remove_from_group", "audit_log",
        "rotate_keys", "export_report",
    ]
    if kind == "lines":
        body = "```text\n" + "".join(f"- {n}: handles {n.replace('_', ' ')}\n" for n in names) + "```\n"
    elif kind == "signatures":
        methods = "".join(
            f"  {n.split('_')[0]}{n.split('_')[1].title()}(id: string, opts?: Options): Promise<void>;\n"
            for n in names
        )
        body = "```ts\nexport interface AdminClient {\n" + methods + "}\n```\n"
    elif kind == "markdown":
        body = "```markdown\n" + "".join(
            f"## {n}\nDescription: handles {n.replace('_', ' ')}\nParameters:\n- id: (required)\n"
            f"Usage:\n<{n}>\n<id>42</id>\n</{n}>\n\n"
            for n in names
        ) + "```\n"
    elif kind == "hermes":
        lines = "".join(
            json.dumps({"type": "function", "function": {"name": n, "description": n.replace("_", " "),
                        "parameters": {"type": "object", "properties": {}}}}) + "\n"
            for n in names
        )
        body = "```\n<tools>\n" + lines + "</tools>\n```\n"
    else:
        raise ValueError(kind)
    return (
        "You are a code reviewer for the admin-console repository. Review the snippet the "
        "user pastes and point out bugs, risky changes and missing tests. For reference, "
        "this is how the team documents the admin API:\n\n"
        + body
        + "\nDo not call anything yourself; you only review text.\n"
    )
