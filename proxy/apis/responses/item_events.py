"""The events that stream one whole Responses output item, as OpenAI's Responses streaming
reference shapes them: ``response.output_item.added``, a message's content parts with
their text in one ``response.output_text.delta`` each, or a ``function_call``'s arguments in
one ``response.function_call_arguments.delta``, then ``response.output_item.done``. For a
JSON answer relayed to a streaming client, and a call the relay held back whole (a bridge
call: :mod:`proxy.apis.responses.bridge`). ``sequence_number`` is the relay's to set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def item_events(index: int, item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events that stream one whole output item at ``index``: a message's text parts
    and a call's arguments in one delta each."""
    at, kind = {"output_index": index}, item.get("type")
    ref = {**at, "item_id": item.get("id")}
    events: list[dict[str, Any]] = []
    if kind == "message" and isinstance(item.get("content"), list):
        events.append({"type": "response.output_item.added", **at, "item": {**item, "content": []}})
        for part_index, part in enumerate(item["content"]):
            text = part.get("text", "") if isinstance(part, Mapping) else ""
            part_at = {**ref, "content_index": part_index}
            events.append({"type": "response.content_part.added", **part_at, "part": {**part, "text": ""}})
            if text:
                events.append({"type": "response.output_text.delta", **part_at, "delta": text})
                events.append({"type": "response.output_text.done", **part_at, "text": text})
            events.append({"type": "response.content_part.done", **part_at, "part": part})
    elif kind == "function_call":
        arguments = item.get("arguments") or ""
        events.append({"type": "response.output_item.added", **at, "item": {**item, "arguments": ""}})
        events.append({"type": "response.function_call_arguments.delta", **ref, "delta": arguments})
        events.append({"type": "response.function_call_arguments.done", **ref, "arguments": arguments})
    else:
        events.append({"type": "response.output_item.added", **at, "item": item})
    return [*events, {"type": "response.output_item.done", **at, "item": item}]
