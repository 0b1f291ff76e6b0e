"""A Responses request with its namespaces flattened, so that llama-server renders every
tool the client sent: the "direct, every tool rendered" baseline of Codex's default mode.

llama-server skips the ``namespace`` tool type (a log warning): sent directly, Codex's MCP
tools never reach the prompt (a model could not call them; the session would cost the
built-in tools alone). :func:`flat_request` writes each namespace member as the function
``<namespace>__<member>`` and each call in the input that names a namespace with that
name, adding and dropping nothing else. Codex's own ``tool_search`` (the tool type and
its ``tool_search_call`` / ``tool_search_output`` items) is left as sent: a plain server
cannot serve a found tool that is not among its ``tools``, so there is no direct session
of that mode on llama-server to compare with (it refuses the items).

Shapes: OpenAI's Responses API reference (``namespace`` tools, ``function_call`` items).
"""

from __future__ import annotations

from typing import Any

SEPARATOR = "__"


def _flat_tools(tools: Any) -> list[Any]:
    flat: list[Any] = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            flat += [{**member, "name": f"{tool.get('name')}{SEPARATOR}{member.get('name')}"}
                     for member in tool.get("tools") or [] if isinstance(member, dict)]
        else:
            flat.append(tool)
    return flat


def _flat_item(item: Any) -> Any:
    if not isinstance(item, dict) or "namespace" not in item:
        return item
    flat = {key: value for key, value in item.items() if key != "namespace"}
    if item.get("type") in ("function_call", "custom_tool_call"):
        flat["name"] = f"{item['namespace']}{SEPARATOR}{item.get('name')}"
    return flat


def flat_request(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a Responses request) with its namespaces flattened (module docstring)."""
    flat = {**body, "tools": _flat_tools(body.get("tools"))}
    if isinstance(body.get("input"), list):
        flat["input"] = [_flat_item(item) for item in body["input"]]
    return flat


def has_namespaces(body: dict[str, Any]) -> bool:
    """Whether ``body`` offers a namespace tool."""
    return any(isinstance(tool, dict) and tool.get("type") == "namespace"
               for tool in body.get("tools") or [])
