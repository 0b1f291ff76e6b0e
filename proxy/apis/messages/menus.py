"""A client's deferred-tool menu moved ahead of the tools, for the upstream's prompt cache.

Claude Code with ``ENABLE_TOOL_SEARCH`` lists the tools it defers in a ``role: "system"``
message inside ``messages``, after the first user turn (Anthropic's API keeps ``system``
and ``tools`` cached that way while the list changes). llama-server renders ``system``,
then the tools, then the messages: every tool the client's search adds to ``tools``
changes the prompt before that message, and llama-server evaluates it again with the rest
of the history (about 3,000 tokens per search with 117 MCP tools). Forwarded at the end
of ``system`` instead, the menu stays in the cached prefix: a search then costs the found
tool and the messages after it. The text is the client's, moved whole; only a system
message whose text lists deferred tools (:func:`selection.clients.client_deferral.deferred_menu`)
moves, and only in a request whose client runs its own search.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from selection.types import content_text, deferred_menu


def _text_blocks(system: Any) -> list[Any]:
    """``system`` (a string or text blocks) as a list of blocks."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system) if isinstance(system, list) else []


def menus_in_system(system: Any, messages: list[Any], known: Iterable[str]) -> tuple[Any, list[Any]]:
    """``(system, messages)`` with each ``role: "system"`` message of ``messages`` whose
    text is a deferred-tool menu (``known``: the request's tool names, which a menu does
    not list) appended to ``system`` as a text block, in order, and left out of the
    messages. Unchanged (the same objects) when there is none."""
    names = list(known)
    moved: list[str] = []
    kept: list[Any] = []
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "system":
            text = content_text(message.get("content"))
            if text and deferred_menu([text], names) is not None:
                moved.append(text)
                continue
        kept.append(message)
    if not moved:
        return system, messages
    return [*_text_blocks(system), *({"type": "text", "text": text} for text in moved)], kept
