"""The retrieval query: what the conversation needs now, as one text.

The last ``user_messages`` user messages plus the tool results that follow the last
assistant message (after a tool result the signal is often in the result), in
conversation order, trailing ``max_chars`` characters. Assistant prose is left out.
Message shapes follow OpenAI's Chat Completions API (``content`` a string or a list of
parts; text parts are ``{"type": "text", "text": ...}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def build_query(messages: Sequence[Any], user_messages: int = 2, max_chars: int = 4000) -> str:
    """The query text for ``messages`` (empty when there is nothing to search with)."""
    valid = [m for m in messages if isinstance(m, Mapping)]
    trailing_results: list[str] = []
    for message in reversed(valid):
        if message.get("role") in ("tool", "function"):
            trailing_results.append(content_text(message.get("content")))
        else:
            break
    trailing_results.reverse()
    users = [content_text(m.get("content")) for m in valid if m.get("role") == "user"]
    parts = [text for text in [*users[-user_messages:], *trailing_results] if text.strip()]
    return "\n".join(parts)[-max_chars:] if max_chars > 0 else ""
