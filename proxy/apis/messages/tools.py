"""Anthropic ``tools`` entries as the upstream gets them, per Anthropic's Messages API
reference: custom tools ``{"name", "description", "input_schema", "cache_control"?}``
(``type`` absent or ``"custom"``; ``bash_…``, ``text_editor_…``, ``web_search_…``,
``computer_…`` types are Anthropic-defined tools, forwarded as they are), and the
prompt-caching breakpoints (``cache_control``) kept where the client asked for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Where Anthropic's prompt-caching breakpoint is marked on a tool definition.
CACHE_CONTROL = "cache_control"


def is_custom(entry: Mapping[str, Any]) -> bool:
    """Whether a ``tools`` entry is a custom (function) tool, the kind pruned."""
    return entry.get("type", "custom") == "custom"


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
