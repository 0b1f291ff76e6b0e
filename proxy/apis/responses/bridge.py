"""A Responses ``function_call`` output item of the bridge (``call_tool``, standing for a
tool delivered in the conversation: :mod:`selection.clients.bridge`) read into the call the
client expects.

The model calls a delivered tool as ``{"type": "function_call", "call_id", "name":
"call_tool", "arguments": "{\\"name\\": …, \\"arguments\\": {…}}"}``. The client gets the
``function_call`` of the tool itself: the same item (``id``, ``call_id``, ``status``) with
the tool's upstream ``name`` and its ``arguments`` as JSON object text; the API's edge then
names it as the client declared it (a namespace member under its namespace:
:func:`proxy.apis.responses.search.client_item`). A bridge call that cannot be made (an
unknown name, arguments that do not fit the tool's schema) is none of the client's: it is
a meta-call, answered with why in a hidden round. Shapes follow OpenAI's Responses API
reference (output items).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.turn.turn import Turn, arguments_text


def is_bridge_item(turn: Turn, item: Any) -> bool:
    """Whether ``item`` is a ``function_call`` of the bridge."""
    return (
        isinstance(item, Mapping) and item.get("type") == "function_call"
        and turn.is_bridge(item.get("name"))
    )


def bridged_item(turn: Turn, item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The client's ``function_call`` a bridge item stands for (upstream name, arguments
    as JSON object text; every other field as the item has it), or None when the call
    cannot be made or stands for a meta-tool's call (:meth:`proxy.turn.turn.Turn.bridged`)."""
    call = turn.bridged(str(item.get("call_id")), arguments_text(item.get("arguments")))
    if not call.client_call:
        return None
    return {**item, "name": call.name, "arguments": call.arguments}
