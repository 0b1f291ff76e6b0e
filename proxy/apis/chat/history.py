"""A Chat Completions history written as the upstream saw it, for a conversation whose tools
are delivered in the conversation (:mod:`selection.clients.bridge`): the proxy's hidden
exchanges (its meta-calls and their results, which the client never got) spliced back
where they stood, and each call of a tool outside the block written back as the bridge
call the model made. Each forwarded prompt then extends the one before it, token for
token, and the upstream's KV cache serves the whole history.

Shapes: OpenAI's Chat Completions reference (assistant ``tool_calls``, ``tool`` messages).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proxy.turn.turn import Turn, arguments_text, as_upstream_saw, exchanges_by_place
from selection.types import bridge_arguments


def upstream_history(turn: Turn, messages: list[Any]) -> list[Any]:
    """``messages`` (the client's, as the plan rewrote them) as the upstream saw them
    (:func:`proxy.turn.turn.as_upstream_saw`)."""
    return as_upstream_saw(turn, messages, bridged_message, spliced)


def bridged_message(message: Any, bridged: Callable[[str], str | None], bridge: str) -> Any:
    """An assistant message with each call of a tool outside the block written as a call
    of ``bridge`` (same id) naming the tool as ``bridged`` says (the name its delivery
    showed); any other message as it is."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return message
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not any(_bridged_as(call, bridged) for call in calls):
        return message
    written = []
    for call in calls:
        name = _bridged_as(call, bridged)
        if name is not None:
            function = call["function"]
            arguments = bridge_arguments(name, arguments_text(function.get("arguments")))
            call = {**call, "function": {**function, "name": bridge, "arguments": arguments}}
        written.append(call)
    return {**message, "tool_calls": written}


def _bridged_as(call: Any, bridged: Callable[[str], str | None]) -> str | None:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return bridged(name) if isinstance(name, str) else None


def spliced(messages: list[Any], exchanges: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``messages`` with each exchange's messages put back after the first ``at`` of
    them (in recording order at one place); an exchange at or past the end is this
    request's own, or an abandoned one's, and is left out. The text a hidden round showed
    the client leads the client's next assistant message, and is taken from it there."""
    by_place = exchanges_by_place(exchanges, len(messages))
    if not by_place:
        return messages
    result: list[Any] = []
    shown: list[str] = []
    for index, message in enumerate(messages):
        if index in by_place:
            result.extend(by_place[index])
            shown = [text for item in by_place[index] if (text := _assistant_text(item))]
        if shown and isinstance(message, dict) and message.get("role") == "assistant":
            message, shown = _without_shown(message, shown), []
        result.append(message)
    return result


def _assistant_text(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("role") == "assistant":
        content = item.get("content")
        return content if isinstance(content, str) and content else None
    return None


def _without_shown(message: dict[str, Any], shown: list[str]) -> dict[str, Any]:
    """``message`` without the hidden rounds' text at the start of its content (each
    text in turn, where the content starts with it)."""
    content = message.get("content")
    if not isinstance(content, str):
        return message
    for text in shown:
        if content.startswith(text):
            content = content[len(text):]
    return {**message, "content": content or None}
