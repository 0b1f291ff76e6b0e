"""A strict validator of what an OpenAI Chat Completions client receives: a
``chat.completion`` body, or a stream of ``chat.completion.chunk`` SSE events.

Follows OpenAI's API reference ("The chat completion object", "The chat completion chunk
object", "Streaming": ``stream_options.include_usage``) and what its SDKs rely on. Each
check raises :class:`SchemaError` naming the rule broken. Fields outside the reference
(``reasoning_content``, ``timings``…) are allowed; the reference's fields must have its
types.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.sse import parse_sse

FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


class SchemaError(AssertionError):
    """The client got something OpenAI's schema does not allow."""


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise SchemaError(rule)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_usage(usage: Any) -> None:
    _require(isinstance(usage, dict), "usage is an object")
    for key in _USAGE_COUNTS:
        _require(_is_int(usage.get(key)) and usage[key] >= 0, f"usage.{key} is a count")


def check_arguments(arguments: Any, where: str) -> None:
    _require(isinstance(arguments, str), f"{where}: arguments is a string")
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{where}: arguments are valid JSON ({arguments!r})") from exc
    _require(isinstance(value, dict), f"{where}: arguments are a JSON object")


def check_message(message: Any, where: str = "message", *, json_arguments: bool = True) -> None:
    """An assistant message as a response carries it (and as a client replays it).
    ``json_arguments=False``: the model's own broken arguments are not checked."""
    _require(isinstance(message, dict), f"{where} is an object")
    _require(message.get("role") == "assistant", f"{where}.role is assistant")
    content = message.get("content")
    _require(content is None or isinstance(content, str), f"{where}.content is a string or null")
    calls = message.get("tool_calls")
    if calls is not None:
        _require(isinstance(calls, list) and calls, f"{where}.tool_calls is a non-empty array")
        ids = set()
        for n, call in enumerate(calls):
            at = f"{where}.tool_calls[{n}]"
            _require(isinstance(call, dict), f"{at} is an object")
            _require(isinstance(call.get("id"), str) and call["id"], f"{at}.id is a non-empty string")
            _require(call["id"] not in ids, f"{at}.id is unique")
            ids.add(call["id"])
            _require(call.get("type") == "function", f"{at}.type is function")
            function = call.get("function")
            _require(isinstance(function, dict), f"{at}.function is an object")
            _require(isinstance(function.get("name"), str) and function["name"], f"{at}.function.name is set")
            if json_arguments:
                check_arguments(function.get("arguments"), at)
            else:
                _require(isinstance(function.get("arguments"), str), f"{at}: arguments is a string")
    function_call = message.get("function_call")
    if function_call is not None:
        _require(isinstance(function_call.get("name"), str) and function_call["name"], f"{where}.function_call.name")
        if json_arguments:
            check_arguments(function_call.get("arguments"), f"{where}.function_call")
    _require(
        content is not None or bool(calls) or function_call is not None or bool(message.get("refusal")),
        f"{where}: content is null only beside tool calls",
    )


def check_completion(body: Any, *, json_arguments: bool = True) -> dict[str, Any]:
    """A ``chat.completion`` body; returns its first choice's message. Arguments must be
    JSON unless ``json_arguments`` is false or the choice ended with ``length``."""
    _require(isinstance(body, dict), "the body is an object")
    _require(body.get("object") == "chat.completion", "object is chat.completion")
    _require(isinstance(body.get("id"), str) and body["id"], "id is a non-empty string")
    _require(_is_int(body.get("created")), "created is an integer")
    _require(isinstance(body.get("model"), str), "model is a string")
    choices = body.get("choices")
    _require(isinstance(choices, list) and choices, "choices is a non-empty array")
    for n, choice in enumerate(choices):
        _require(choice.get("index") == n, f"choices[{n}].index is {n}")
        _require(choice.get("finish_reason") in FINISH_REASONS, f"choices[{n}].finish_reason is valid")
        strict = json_arguments and choice["finish_reason"] != "length"
        check_message(choice.get("message"), f"choices[{n}].message", json_arguments=strict)
        if choice["finish_reason"] == "tool_calls":
            _require(bool(choice["message"].get("tool_calls")), "finish_reason tool_calls has calls")
    if "usage" in body:
        check_usage(body["usage"])
    return choices[0]["message"]


class StreamReport:
    """What a valid stream amounted to: ``message`` (choice 0 accumulated as the SDKs do),
    ``finish_reason``, ``usage``, ``ids`` (the chunk ids seen), ``created``, ``error``."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"role": "assistant", "content": None}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.ids: set[str] = set()
        self.created: set[int] = set()
        self.error: Any = None


def check_stream(
    raw: bytes, *, json_arguments: bool = True, include_usage: bool = True
) -> StreamReport:
    """A ``text/event-stream`` chat response: every event a valid chunk, one id and
    ``created``, ``role`` first and once, each call opened once (``id``, ``type``,
    ``name``) then argument fragments only, one ``finish_reason`` last, usage at most once
    after it with empty ``choices``, ``[DONE]`` once at the end — or an error event ending
    it. ``include_usage=False`` (the client did not ask for usage): usage may also come in
    the finish chunk, as llama-server sends it."""
    report = StreamReport()
    text = raw.decode("utf-8")
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    events = parse_sse(raw)
    error_blocks = [b for b in blocks if b.startswith("event: error")]
    if error_blocks:
        _require(blocks[-1] == error_blocks[0], "an error event ends the stream")
        report.error = json.loads(events[-1])["error"]
        events = events[:-1]
    else:
        _require(events and events[-1] == "[DONE]", "the stream ends with [DONE]")
        _require(events.count("[DONE]") == 1, "[DONE] comes once")
        events = events[:-1]
    calls: dict[int, dict[str, Any]] = {}
    role_seen = False
    for payload in events:
        chunk = json.loads(payload)
        _require(chunk.get("object") == "chat.completion.chunk", "object is chat.completion.chunk")
        _require(isinstance(chunk.get("id"), str) and chunk["id"], "id is a non-empty string")
        _require(_is_int(chunk.get("created")), "created is an integer")
        _require(isinstance(chunk.get("model"), str), "model is a string")
        report.ids.add(chunk["id"])
        report.created.add(chunk["created"])
        choices = chunk.get("choices")
        _require(isinstance(choices, list), "choices is an array")
        _require(report.usage is None, "nothing follows the usage")
        if chunk.get("usage") is not None:
            check_usage(chunk["usage"])
            report.usage = chunk["usage"]
            if choices == []:
                continue
            _require(not include_usage, "usage asked for comes in a chunk with empty choices")
            _require(any(isinstance(c, dict) and c.get("finish_reason") for c in choices),
                     "usage comes in the finish chunk or in a chunk with empty choices")
        for choice in choices:
            _require(choice.get("index") == 0, "one choice, index 0")
            _require(report.finish_reason is None, "nothing follows the finish_reason")
            delta = choice.get("delta")
            _require(isinstance(delta, dict), "delta is an object")
            if "role" in delta:
                _require(not role_seen and delta["role"] == "assistant", "role assistant, once")
            _require(role_seen or "role" in delta, "the first delta has the role")
            role_seen = True
            content = delta.get("content")
            if content is not None:
                _require(isinstance(content, str), "delta.content is a string")
                report.message["content"] = (report.message["content"] or "") + content
            for item in delta.get("tool_calls") or []:
                _check_call_delta(item, calls)
            finish = choice.get("finish_reason")
            if finish is not None:
                _require(finish in FINISH_REASONS, f"finish_reason {finish!r} is valid")
                report.finish_reason = finish
    if not report.error:
        _require(report.finish_reason is not None, "a finish_reason ends the choice")
    _require(len(report.ids) <= 1 and len(report.created) <= 1, "one id and created per response")
    if calls:
        report.message["tool_calls"] = [calls[i] for i in sorted(calls)]
        _require(sorted(calls) == list(range(len(calls))), "tool call indexes are 0..n-1")
    if report.finish_reason is not None:
        strict = json_arguments and report.finish_reason != "length"
        check_message(report.message, "the streamed message", json_arguments=strict)
    return report


def _check_call_delta(item: Any, calls: dict[int, dict[str, Any]]) -> None:
    _require(isinstance(item, dict) and _is_int(item.get("index")), "a tool_calls item has an index")
    function = item.get("function")
    _require(isinstance(function, dict), "a tool_calls item has a function")
    if item["index"] not in calls:
        _require(isinstance(item.get("id"), str) and item["id"], "a call opens with its id")
        _require(item.get("type") == "function", "a call opens with type function")
        _require(isinstance(function.get("name"), str) and function["name"], "a call opens with its name")
        calls[item["index"]] = {
            "id": item["id"], "type": "function", "function": {"name": function["name"], "arguments": ""},
        }
    else:
        _require("id" not in item and "name" not in function, "a call's id and name come once")
    arguments = function.get("arguments", "")
    _require(isinstance(arguments, str), "arguments fragments are strings")
    calls[item["index"]]["function"]["arguments"] += arguments
