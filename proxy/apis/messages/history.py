"""A Messages history written as the upstream saw it, for a conversation whose tools are
delivered in the conversation (:mod:`selection.clients.bridge`): the client's ``tool_use``
blocks of tools outside the block written back as the bridge calls they were (same
``id``, ``input`` = ``{"name", "arguments"}``), and the exchanges the proxy kept
(:attr:`selection.types.ConversationState.exchanges`: each meta round's assistant message
and the user message holding its ``tool_result`` blocks, recorded after the client's
first ``at`` messages) put back where they stood: before the client's next assistant
message, whose leading blocks the client was shown of those rounds (their text and
thinking blocks, a search's ``server_tool_use`` and ``tool_search_tool_result``) are
taken from it, being in the exchanges already. Each forwarded prompt then extends the one
before it, and the upstream's KV cache serves the whole history. ``cache_control``
markers stay on the blocks the client put them on.

Shapes: Anthropic's Messages API reference (``tool_use``, ``tool_result`` blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proxy.apis.messages.search import SEARCH_RESULT, SERVER_TOOL_USE, is_search_call
from proxy.turn.turn import Turn, as_upstream_saw, exchanges_by_place

#: Blocks shown to the client as they are, keyed by the field a template renders.
_SHOWN_AS_IS = {"text": "text", "thinking": "thinking", "redacted_thinking": "data"}


def upstream_history(turn: Turn, messages: list[Any]) -> list[Any]:
    """The client's ``messages`` as the upstream saw them (see the module docstring); the
    list itself when the turn does not deliver tools in the conversation."""
    return as_upstream_saw(
        turn, messages, _bridged,
        lambda written, exchanges: _spliced(written, exchanges,
                                            lambda block: is_search_call(turn, block)))


def _bridged(message: Any, bridged: Callable[[str], str | None], bridge: str) -> Any:
    """An assistant message with each ``tool_use`` of a tool outside the block written as
    a call of ``bridge`` (same ``id``, other fields kept) naming the tool as ``bridged``
    says (the name its delivery showed); any other message as it is."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return message
    content = message.get("content")
    if not isinstance(content, list) or not any(_bridged_as(b, bridged) for b in content):
        return message
    written = []
    for block in content:
        name = _bridged_as(block, bridged)
        if name is not None:
            block = {**block, "name": bridge,
                     "input": {"name": name, "arguments": block.get("input", {})}}
        written.append(block)
    return {**message, "content": written}


def _bridged_as(block: Any, bridged: Callable[[str], str | None]) -> str | None:
    if not (isinstance(block, Mapping) and block.get("type") == "tool_use"
            and isinstance(block.get("name"), str)):
        return None
    return bridged(block["name"])


def _spliced(
    messages: list[Any], exchanges: Sequence[Mapping[str, Any]],
    is_search: Callable[[Any], bool],
) -> list[Any]:
    """``messages`` with each exchange's messages put back before the client's message
    ``at`` (in recording order at one place), the blocks they showed the client taken from
    the lead of that message; an exchange at or past the end is this request's own, or an
    abandoned one's, and is left out."""
    by_place = exchanges_by_place(exchanges, len(messages))
    if not by_place:
        return messages
    result: list[Any] = []
    for index, message in enumerate(messages):
        items = by_place.get(index)
        if items:
            result.extend(items)
            message = _without_shown(message, _shown_keys(items, is_search))
        if message is not None:
            result.append(message)
    return result


def _shown_keys(items: Sequence[Any], is_search: Callable[[Any], bool]) -> list[tuple[Any, Any]]:
    """What the client was shown of the exchanges' assistant messages, in order: each text
    or thinking block, and for a call of the function standing for the search tool its
    ``server_tool_use`` and ``tool_search_tool_result`` blocks (:func:`_key` of each)."""
    keys: list[tuple[Any, Any]] = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("role") != "assistant":
            continue
        for block in item.get("content") or []:
            if is_search(block):
                keys += [(SERVER_TOOL_USE, block.get("id")), (SEARCH_RESULT, block.get("id"))]
            elif isinstance(block, Mapping) and block.get("type") in _SHOWN_AS_IS:
                keys.append(_key(block))
    return keys


def _key(block: Any) -> tuple[Any, Any]:
    """What identifies a block the client was shown: its type, and its text (thinking,
    data) or the search call's id; never its ``cache_control``."""
    if not isinstance(block, Mapping):
        return (None, None)
    kind = block.get("type")
    if kind == SERVER_TOOL_USE:
        return (kind, block.get("id"))
    if kind == SEARCH_RESULT:
        return (kind, block.get("tool_use_id"))
    return (kind, block.get(_SHOWN_AS_IS.get(str(kind), "text")))


def _without_shown(message: Any, keys: list[tuple[Any, Any]]) -> Any:
    """An assistant ``message`` without the shown blocks at the start of its content (each
    in turn, where the content starts with it); None when nothing is left (the exchanges
    hold all it said)."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return message
    content = message.get("content")
    if not isinstance(content, list) or not keys:
        return message
    rest = list(content)
    for key in keys:
        if rest and _key(rest[0]) == key:
            rest.pop(0)
    if len(rest) == len(content):
        return message
    return {**message, "content": rest} if rest else None
