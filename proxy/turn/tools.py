"""Tool arrays of the Responses and Messages APIs: reading them into a catalogue and
writing the pruned array back in the API's own shape.

Shapes: OpenAI's Responses API reference (``tools`` items ``{"type": "function", "name",
"description", "parameters", "strict"}``; other types — ``web_search``, ``file_search``,
``mcp``, ``custom``… — are hosted or free-form tools) and Anthropic's Messages API
reference (``tools`` items ``{"name", "description", "input_schema", "cache_control"?}``,
``type`` absent or ``"custom"``; ``bash_…``, ``text_editor_…``, ``web_search_…``,
``computer_…`` types are Anthropic-defined tools). Only function (custom) tools are
pruned and counted; the others are forwarded always and as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from selection.catalog import Catalog, build_catalog, parse_function
from selection.errors import CatalogError
from selection.meta_tools import MetaTools

#: Where Anthropic's prompt-caching breakpoint is marked on a tool definition.
CACHE_CONTROL = "cache_control"


def parse_flat_tools(
    tools: Any, is_function: Callable[[Mapping[str, Any]], bool], schema_key: str
) -> Catalog:
    """Parse a flat ``tools`` array: entries for which ``is_function`` holds become
    catalogue tools (``schema_key`` names their JSON-schema field), the rest are kept in
    ``others``. Raises CatalogError when ``tools`` is not a list of objects, a function
    entry has no valid name, or names repeat."""
    if not isinstance(tools, list):
        raise CatalogError("tools is not an array")
    parsed, others = [], []
    for entry in tools:
        if not isinstance(entry, Mapping):
            raise CatalogError("a tools entry is not an object")
        if is_function(entry):
            function = {
                "name": entry.get("name"),
                "description": entry.get("description"),
                "parameters": entry.get(schema_key),
            }
            parsed.append(parse_function(function, entry))
        else:
            others.append(entry)
    return build_catalog(parsed, others)


def meta_entries(meta: MetaTools | None, shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The meta-tools (built in Chat Completions shape) in the API's tool shape."""
    if meta is None:
        return []
    return [shape(definition["function"]) for definition in meta.definitions]


def responses_tool(function: Mapping[str, Any]) -> dict[str, Any]:
    """A ``{"name", "description", "parameters"}`` function as a Responses function tool
    (``strict`` false: the meta-tools' schemas are not written for strict mode)."""
    return {
        "type": "function",
        "name": function["name"],
        "description": function["description"],
        "parameters": function["parameters"],
        "strict": False,
    }


def messages_tool(function: Mapping[str, Any]) -> dict[str, Any]:
    """A ``{"name", "description", "parameters"}`` function as an Anthropic custom tool."""
    return {
        "name": function["name"],
        "description": function["description"],
        "input_schema": function["parameters"],
    }


def keep_cache_markers(
    original: Sequence[Any], forwarded: list[Any]
) -> list[Any]:
    """``forwarded`` with Anthropic ``cache_control`` markers where the client put them:
    a marked tool that is forwarded keeps its own; when a marked tool was pruned (or is
    not forwarded as it is, such as the client's search tool), the last forwarded entry
    gets its marker (the prompt prefix up to there is then cached, as the client asked
    for the prefix up to its marked tool). A forwarded copy of an entry (``defer_loading``
    removed) is the entry, by name. Entries are copied, never modified in place."""
    kept = {id(entry) for entry in forwarded}
    names = {
        (entry.get("type"), entry.get("name")) for entry in forwarded if isinstance(entry, Mapping)
    }
    lost = [
        entry[CACHE_CONTROL]
        for entry in original
        if isinstance(entry, Mapping) and CACHE_CONTROL in entry and id(entry) not in kept
        and (entry.get("type"), entry.get("name")) not in names
    ]
    if not lost or not forwarded or not isinstance(forwarded[-1], Mapping):
        return forwarded
    if CACHE_CONTROL in forwarded[-1]:
        return forwarded
    return [*forwarded[:-1], {**forwarded[-1], CACHE_CONTROL: lost[-1]}]
