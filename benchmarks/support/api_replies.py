"""Scripted answers of the scripted upstream for ``/v1/responses`` and ``/v1/messages``,
rendered as a whole response or as an event stream (the request's ``stream`` decides),
with every field the official SDKs' models require.

Shapes follow OpenAI's Responses API reference (response object, output items and the
streaming events with ``sequence_number`` / ``output_index`` / ``content_index``) and
Anthropic's Messages API reference (message object, content blocks and the
``message_start`` … ``message_stop`` events).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MODEL = "test-model"


def _split(text: str, parts: int) -> list[str]:
    """``text`` in at most ``parts`` non-empty pieces."""
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _input_text(value: Any) -> str:
    """A ``tool_use`` input as the ``partial_json`` text a stream carries."""
    return value if isinstance(value, str) else json.dumps(value)


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


@dataclass
class Responses:
    """A Responses API answer: an output message with ``text`` (None: no message), then
    ``items`` (whole output items, e.g. a ``tool_search_call``), then one
    ``function_call`` item per ``calls`` entry ``{"call_id", "name", "arguments"}`` (further
    keys, e.g. ``namespace``, are copied into the item). ``usage`` defaults to
    input_tokens = request bytes // 4, output_tokens = 5. ``status``: ``completed``, or
    ``incomplete`` (cut by ``max_output_tokens``: the stream ends with
    ``response.incomplete``)."""

    text: str | None = "ok"
    calls: list[dict[str, str]] | None = None
    items: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    status: str = "completed"
    model: str = DEFAULT_MODEL
    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex[:16]}")

    def render(self, request: dict[str, Any], size: int) -> dict[str, Any] | list[bytes]:
        """The JSON body, or the SSE events when the request streams."""
        output = self._output()
        usage = self.usage or {
            "input_tokens": size // 4, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": size // 4 + 5,
        }
        done = self._response(request, self.status, output, usage)
        if self.status == "incomplete":
            done["incomplete_details"] = {"reason": "max_output_tokens"}
        if request.get("stream") is not True:
            return done
        return self._events(request, output, done)

    def _output(self) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        if self.text is not None:
            part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
            output.append({"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message",
                           "status": "completed", "role": "assistant", "content": [part]})
        output += self.items or []
        for call in self.calls or []:
            output.append({"id": f"fc_{uuid.uuid4().hex[:12]}", "type": "function_call",
                           "status": "completed", **call})
        return output

    def _response(
        self, request: dict[str, Any], status: str, output: list[Any], usage: Any
    ) -> dict[str, Any]:
        return {
            "id": self.id, "object": "response", "created_at": int(time.time()),
            "status": status, "model": self.model, "output": output, "usage": usage,
            "error": None, "incomplete_details": None, "instructions": request.get("instructions"),
            "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0,
            "tool_choice": request.get("tool_choice", "auto"), "tools": request.get("tools", []),
        }

    def _events(
        self, request: dict[str, Any], output: list[dict[str, Any]], done: dict[str, Any]
    ) -> list[bytes]:
        events: list[dict[str, Any]] = []
        started = self._response(request, "in_progress", [], None)
        events.append({"type": "response.created", "response": started})
        events.append({"type": "response.in_progress", "response": started})
        for index, item in enumerate(output):
            at = {"output_index": index}
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append({"type": "response.output_item.added", **at,
                               "item": {**item, "status": "in_progress", "content": []}})
                ref = {"item_id": item["id"], **at, "content_index": 0}
                empty = {**item["content"][0], "text": ""}
                events.append({"type": "response.content_part.added", **ref, "part": empty})
                events += [{"type": "response.output_text.delta", **ref, "delta": piece,
                            "logprobs": []} for piece in _split(text, 3)]
                events.append({"type": "response.output_text.done", **ref, "text": text,
                               "logprobs": []})
                events.append({"type": "response.content_part.done", **ref,
                               "part": item["content"][0]})
            elif item["type"] == "function_call":
                events.append({"type": "response.output_item.added", **at,
                               "item": {**item, "status": "in_progress", "arguments": ""}})
                ref = {"item_id": item["id"], **at}
                events += [{"type": "response.function_call_arguments.delta", **ref,
                            "delta": piece} for piece in _split(item["arguments"], 3)]
                events.append({"type": "response.function_call_arguments.done", **ref,
                               "name": item["name"], "arguments": item["arguments"]})
            else:
                events.append({"type": "response.output_item.added", **at, "item": item})
            events.append({"type": "response.output_item.done", **at, "item": item})
        events.append({"type": f"response.{self.status}", "response": done})
        return [_event({**event, "sequence_number": n}) for n, event in enumerate(events)]


@dataclass
class Message:
    """An Anthropic Messages answer: a text block with ``text`` (None: none), then
    ``blocks`` (whole content blocks, e.g. ``server_tool_use`` and its result), then one
    ``tool_use`` block per ``calls`` entry ``{"id", "name", "input"}`` (an ``input`` given
    as text is streamed as those ``partial_json`` bytes, as a model that wrote broken JSON;
    a plain answer carries it as the text). ``stop_reason`` defaults to ``tool_use`` with
    calls, else ``end_turn``; ``usage`` to input_tokens = request bytes // 4,
    output_tokens = 5."""

    text: str | None = "ok"
    calls: list[dict[str, Any]] | None = None
    blocks: list[dict[str, Any]] | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str = DEFAULT_MODEL
    id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex[:16]}")

    def render(self, request: dict[str, Any], size: int) -> dict[str, Any] | list[bytes]:
        """The JSON body, or the SSE events when the request streams."""
        content: list[dict[str, Any]] = []
        if self.text is not None:
            content.append({"type": "text", "text": self.text})
        content += self.blocks or []
        content += [{"type": "tool_use", **call} for call in self.calls or []]
        stop = self.stop_reason or ("tool_use" if self.calls else "end_turn")
        usage = self.usage or {"input_tokens": size // 4, "output_tokens": 5,
                               "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message = {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                   "content": content, "stop_reason": stop, "stop_sequence": None,
                   "usage": usage}
        if request.get("stream") is not True:
            return message
        start = {**message, "content": [], "stop_reason": None,
                 "usage": {**usage, "output_tokens": 1}}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start},
                                        {"type": "ping"}]
        for index, block in enumerate(content):
            if block["type"] == "text":
                events.append({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}
                           for piece in _split(block["text"], 3)]
            elif block["type"] in ("tool_use", "server_tool_use"):
                events.append({"type": "content_block_start", "index": index,
                               "content_block": {**block, "input": {}}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}
                           for piece in _split(_input_text(block["input"]), 3)]
            else:
                events.append({"type": "content_block_start", "index": index,
                               "content_block": block})
            events.append({"type": "content_block_stop", "index": index})
        events.append({"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": usage["output_tokens"]}})
        events.append({"type": "message_stop"})
        return [_event(event) for event in events]
