"""Multi-request conversations for the three acting APIs: what the client got back read as
calls (id, name, arguments), and the next request a client sends — its history, the
answer, the results of its calls, a new user message — in each API's shape (OpenAI's Chat
Completions and Responses references, Anthropic's Messages reference).
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.turn_apis import Call, events


def client_calls(api: str, raw: bytes, stream: bool) -> list[Call]:
    """The calls of an answer the client got, whole (a stream's fragments joined)."""
    if not stream:
        return _plain_calls(api, json.loads(raw))
    calls: dict[Any, dict[str, Any]] = {}
    for _, data in events(raw):
        for key, part in _stream_parts(api, data):
            call = calls.setdefault(key, {"id": None, "name": None, "arguments": ""})
            for field_name in ("id", "name"):
                call[field_name] = call[field_name] or part.get(field_name)
            call["arguments"] += part.get("arguments") or ""
    return [Call(c["id"], c["name"], c["arguments"] or "{}") for c in calls.values()]


def _plain_calls(api: str, data: dict[str, Any]) -> list[Call]:
    if api == "chat":
        message = data["choices"][0]["message"]
        return [Call(c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in message.get("tool_calls") or []]
    if api == "responses":
        return [Call(i["call_id"], i["name"], i["arguments"])
                for i in data["output"] if i.get("type") == "function_call"]
    return [Call(b["id"], b["name"], json.dumps(b["input"]))
            for b in data["content"] if b.get("type") == "tool_use"]


def streamed_call_places(api: str, raw: bytes) -> set[int]:
    """Where a streamed answer put its calls: Chat Completions ``tool_calls[].index``,
    Responses ``output_index``, Messages content-block ``index``."""
    return {key[0] if isinstance(key, tuple) else key
            for _, data in events(raw) for key, _ in _stream_parts(api, data)}


def _stream_parts(api: str, data: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """``(call key, {id?, name?, arguments?})`` of one streamed event."""
    if api == "chat":
        return [((c.get("index"),), {"id": c.get("id"), "name": (c.get("function") or {}).get("name"),
                                     "arguments": (c.get("function") or {}).get("arguments")})
                for choice in data.get("choices", []) for c in (choice.get("delta") or {}).get("tool_calls") or []]
    kind = data.get("type")
    if api == "responses":
        if kind == "response.output_item.added" and data["item"].get("type") == "function_call":
            item = data["item"]
            return [(data["output_index"], {"id": item["call_id"], "name": item["name"]})]
        if kind == "response.function_call_arguments.delta":
            return [(data["output_index"], {"arguments": data["delta"]})]
        return []
    if kind == "content_block_start" and data["content_block"]["type"] == "tool_use":
        block = data["content_block"]
        return [(data["index"], {"id": block["id"], "name": block["name"]})]
    if kind == "content_block_delta" and data["delta"].get("type") == "input_json_delta":
        return [(data["index"], {"arguments": data["delta"]["partial_json"]})]
    return []


def answered(api: str, body: dict[str, Any], calls: list[Call], result: str,
             text: str = "", ask: str | None = None) -> dict[str, Any]:
    """The client's next request after an answer: ``body``'s history, the assistant turn
    (``text`` and ``calls``), one result per call (``result``), then ``ask`` as a new user
    message when given."""
    if api == "chat":
        answer: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            answer["tool_calls"] = [{"id": c.id, "type": "function",
                                     "function": {"name": c.name, "arguments": c.arguments}}
                                    for c in calls]
        history = [*body["messages"], answer,
                   *({"role": "tool", "tool_call_id": c.id, "content": result} for c in calls)]
        if ask is not None:
            history.append({"role": "user", "content": ask})
        return {**body, "messages": history}
    if api == "responses":
        items = body["input"] if isinstance(body["input"], list) else [
            {"type": "message", "role": "user", "content": body["input"]}]
        items = [*items,
                 *([{"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": text}]}] if text else []),
                 *({"type": "function_call", "call_id": c.id, "name": c.name,
                    "arguments": c.arguments} for c in calls),
                 *({"type": "function_call_output", "call_id": c.id, "output": result}
                   for c in calls)]
        if ask is not None:
            items.append({"role": "user", "content": ask})
        return {**body, "input": items}
    content = [*([{"type": "text", "text": text}] if text else []),
               *({"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
                 for c in calls)]
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": result} for c in calls]
    if ask is not None:
        results.append({"type": "text", "text": ask})
    return {**body, "messages": [*body["messages"], {"role": "assistant", "content": content},
                                 {"role": "user", "content": results}]}


def history_of(api: str, body: dict[str, Any]) -> list[Any]:
    """An upstream request's history: its messages, or its ``input`` items."""
    if api == "responses":
        return body["input"] if isinstance(body["input"], list) else [body["input"]]
    return body["messages"]


def with_history(api: str, body: dict[str, Any], history: list[Any]) -> dict[str, Any]:
    """``body`` with ``history`` as its messages, or its ``input`` items."""
    return {**body, "input" if api == "responses" else "messages": history}
