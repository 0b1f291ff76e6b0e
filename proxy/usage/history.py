"""Real tool calls found in a request's history (assistant ``tool_calls``, legacy
``function_call``, tools named in assistant text on the text path), and the user message
that preceded each: what the usage log records as ``history`` calls and example texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.types import content_text, text_called_tools

#: Longest user text kept per example (characters).
EXAMPLE_MAX_CHARS = 4000


@dataclass(frozen=True)
class HistoryCall:
    key: str
    tool: str
    turn: int
    message: int
    user_text: str | None


def last_user_text(messages: Sequence[Any], before: int | None = None) -> str | None:
    """The text of the last ``user`` message before index ``before`` (all: None)."""
    end = len(messages) if before is None else before
    for message in reversed(messages[:end]):
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = content_text(message.get("content")).strip()
            return text[:EXAMPLE_MAX_CHARS] if text else None
    return None


def history_calls(messages: Sequence[Any], text_names: set[str] | None) -> list[HistoryCall]:
    """Real tool calls in a request's history, in order. ``turn``: the request that made
    the call, counted as the assistant message's ordinal (one assistant message per
    request in an agent loop). Keys: the call id; else the message and call position (a
    history only grows). ``text_names``: also tools named in assistant text (text path)."""
    found: list[HistoryCall] = []
    assistants = 0
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        assistants += 1
        named: list[tuple[str, str]] = []
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str) and name:
                call_id = call.get("id")
                key = f"id:{call_id}" if isinstance(call_id, str) and call_id else f"m{index}:{position}"
                named.append((key, name))
        function_call = message.get("function_call")
        if isinstance(function_call, Mapping) and isinstance(function_call.get("name"), str):
            named.append((f"m{index}:f", function_call["name"]))
        if text_names:
            named += [(f"m{index}:t:{name}", name) for name in text_called_tools([message], text_names)]
        if named:
            user = last_user_text(messages, index)
            found += [HistoryCall(key, name, assistants, index, user) for key, name in named]
    return found
