#!/usr/bin/env python3
"""A stdio MCP server with the 117 tools of GitHub's MCP server, for real agent CLIs.

Serves ``tests/data/real_catalogs/github_mcp_server.json`` (the tools' exact schemas) over
MCP's stdio transport with the ``mcp`` SDK's low-level server, and answers every
``tools/call`` with a canned result instead of calling GitHub: ``list_pull_requests``
gets :data:`PULL_REQUESTS` as text, ``search_code`` :data:`CODE_MATCHES`, the other tools
of the scripted session (:data:`CANNED`) theirs, a call about the long session's repository
the result :mod:`benchmarks.support.github_results` generates for it (a diff, job logs…),
any other tool a one-line acknowledgement.
Each call is appended to the file given by ``--calls`` as one JSON line ``{"tool",
"arguments"}``, flushed before the result is sent, so a test can assert that the CLI really
called the tool (the agent CLIs start this script themselves; run it as
``python benchmarks/support/github_mcp.py --calls FILE``).

Protocol: Model Context Protocol, ``tools/list`` and ``tools/call``
(modelcontextprotocol.io/specification, "Tools").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by the CLIs: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.support.github_results import generated_result, is_long_session

CATALOG = Path(__file__).resolve().parents[2] / "tests" / "data" / "real_catalogs" / "github_mcp_server.json"
SERVER_NAME = "github"
#: The canned answer of ``list_pull_requests``: what a client's final answer must quote.
PULL_REQUESTS = (
    "#4711 Cache widget thumbnails between renders (open, by mona)\n"
    "#4712 Fix the sprocket tooltip overflow on narrow screens (open, by hubot)"
)
#: A phrase of :data:`PULL_REQUESTS` that survives any quoting (JSON strings, markdown).
PULL_REQUESTS_MARKER = "Cache widget thumbnails between renders"
#: The canned answer of ``search_code``.
CODE_MATCHES = (
    "octo/widgets src/widgets/thumbnails.py:42: def render_thumbnail(widget, size):\n"
    "octo/widgets tests/test_thumbnails.py:7: from widgets.thumbnails import render_thumbnail"
)
#: A phrase of :data:`CODE_MATCHES` that survives any quoting.
CODE_MATCHES_MARKER = "src/widgets/thumbnails.py:42"
#: Results of the other tools the scripted multi-turn session calls
#: (``benchmarks.support.agent_behaviour.SESSION``).
CANNED = {
    "pull_request_read": (
        "src/widgets/thumbnail_cache.py (added, +84)\n"
        "src/widgets/render.py (modified, +12 -3)\n"
        "tests/test_thumbnail_cache.py (added, +41)"
    ),
    "search_issues": "0 issues match repo:octo/widgets sprocket tooltip overflow",
    "create_issue": "Created issue #4720 in octo/widgets: Sprocket tooltip overflows on narrow screens",
}


def catalog_tools() -> list[dict[str, Any]]:
    """The catalogue's tools as ``{"name", "description", "inputSchema"}`` (MCP's shape)."""
    tools = json.loads(CATALOG.read_text())
    return [
        {"name": tool["function"]["name"], "description": tool["function"].get("description", ""),
         "inputSchema": tool["function"].get("parameters") or {"type": "object"}}
        for tool in tools
    ]


def canned_result(tool: str, arguments: dict[str, Any]) -> str:
    """The text a call of ``tool`` returns."""
    if is_long_session(arguments):
        return generated_result(tool, arguments)
    if tool == "list_pull_requests":
        return PULL_REQUESTS
    if tool == "search_code":
        return CODE_MATCHES
    if tool in CANNED:
        return CANNED[tool]
    return f"{tool}: done ({len(arguments)} arguments)"


def read_calls(path: Path) -> list[dict[str, Any]]:
    """The calls recorded in ``path`` (none when the file does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def build_server(calls: Path) -> Any:
    """The low-level MCP server answering ``tools/list`` and ``tools/call``."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
             for t in catalog_tools()]
    names = {tool.name for tool in tools}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        with calls.open("a") as out:
            out.write(json.dumps({"tool": params.name, "arguments": arguments}) + "\n")
        if params.name not in names:
            text = f"unknown tool {params.name}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                        is_error=True)
        text = canned_result(params.name, arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(calls: Path) -> None:
    """Serve on stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    server = build_server(calls)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=Path, required=True,
                        help="file each tool call is appended to (JSON lines)")
    args = parser.parse_args(argv)
    import anyio

    anyio.run(serve, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
