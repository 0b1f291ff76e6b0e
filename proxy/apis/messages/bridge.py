"""A call of the bridge made the Messages client's call, for a turn whose tools are
delivered in the conversation (:mod:`selection.clients.bridge`).

The model calls a tool a search or load result delivered through the bridge: a
``tool_use`` block ``{id, name: "call_tool", input: {"name", "arguments"}}``. The client
gets the call it stands for, ``{id, name: <the tool>, input: <its arguments, an object>}``
(:func:`client_call`), or nothing when it cannot be made (an unknown name, arguments off
the tool's schema): the block stays a bridge call, which the proxy answers itself as a
meta-call, in a hidden round (:func:`is_bridge_block`). The client's later history is
written back by :mod:`proxy.apis.messages.history`.

Shapes: Anthropic's Messages API reference (``tool_use`` blocks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from proxy.turn.turn import Turn


def is_bridge_block(turn: Turn, block: Any) -> bool:
    """Whether ``block`` is a ``tool_use`` of the bridge (after :func:`client_call`: one
    that could not be made, a meta-call)."""
    return (isinstance(block, Mapping) and block.get("type") == "tool_use"
            and turn.is_bridge(block.get("name")))


def client_call(turn: Turn, block: Mapping[str, Any], arguments: str) -> dict[str, Any] | None:
    """The client's ``tool_use`` for the bridge call ``block`` whose ``input`` is
    ``arguments`` (JSON text, as the model wrote it): the real name and arguments (an
    object), the block's ``id`` and other fields; None when it cannot be made or stands
    for a meta-tool's call (the proxy answers it)."""
    made = turn.bridged(str(block.get("id")), arguments)
    if not made.client_call:
        return None
    return {**block, "name": made.name, "input": json.loads(made.arguments)}


def with_client_calls(turn: Turn, content: list[Any]) -> list[Any]:
    """A message's ``content`` with each bridge call made the client's call where it can be
    (the others stay bridge calls); the list itself when it holds none."""
    if not any(is_bridge_block(turn, block) for block in content):
        return content
    out = []
    for block in content:
        if is_bridge_block(turn, block):
            given = block.get("input", {})
            text = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
            block = client_call(turn, block, text) or block
        out.append(block)
    return out
