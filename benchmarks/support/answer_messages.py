"""What the model wrote in an upstream's answer, as the Chat Completions assistant message
llama-server's chat template renders: the answer's text as ``content`` and its calls as
``tool_calls``, read from the answer of any of the three APIs, whole or streamed.

* Chat Completions: ``choices[0].message``; streamed, its ``content`` and ``tool_calls``
  deltas joined (a call's fragments by ``index``).
* Responses: the ``output`` of the response (streamed: of the ``response.completed`` or
  ``response.incomplete`` event): ``message`` items' ``output_text``, ``function_call``
  items (a ``namespace`` call as the function ``<namespace>__<name>``, the name a plain
  server gives it: :mod:`benchmarks.support.plain_responses`), and a client
  ``tool_search_call`` as a call of ``tool_search`` with its arguments (what a model writes
  to search through a function).
* Messages: ``text`` blocks, ``tool_use`` blocks (their ``input`` as llama-server dumps it
  into the arguments, :func:`benchmarks.support.llama_chat_shape.llama_dump`) and an
  Anthropic server search's ``server_tool_use`` (the model writes the search); the
  server's ``tool_search_tool_result`` is not the model's. Streamed, the blocks are
  rebuilt from ``content_block_start`` and their ``text_delta`` / ``input_json_delta``.

Shapes: OpenAI's Chat Completions and Responses references (objects and streaming
events), Anthropic's Messages reference (message, content blocks, streaming events).
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.support.llama_chat_shape import llama_dump
from benchmarks.support.plain_responses import SEPARATOR


class AnswerError(ValueError):
    """The answer is not one of the three APIs' answers (its message says what is wrong)."""


def sse_data(body: bytes) -> list[Any]:
    """The JSON ``data`` of each event of an SSE body (``[DONE]`` and comments aside)."""
    events = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip(b" ") for line in block.split(b"\n")
                          if line.startswith(b"data:"))
        if data and data != b"[DONE]":
            events.append(json.loads(data))
    return events


def _is_stream(body: bytes) -> bool:
    head = body.lstrip()[:6]
    return head.startswith((b"data:", b"event:", b":"))


def assistant_message(path: str, body: bytes) -> dict[str, Any]:
    """The answer ``body`` (bytes as the upstream sent them) to a request on ``path``, as
    an assistant message ``{"role", "content", "tool_calls"?}``. Raises
    :class:`AnswerError`."""
    try:
        parsed: Any = sse_data(body) if _is_stream(body) else json.loads(body)
    except ValueError as error:
        raise AnswerError(f"not JSON nor an event stream: {error}") from error
    streamed = isinstance(parsed, list)
    try:
        if path.endswith("/chat/completions"):
            text, calls = _chat_stream(parsed) if streamed else _chat(parsed)
        elif path.endswith("/responses"):
            text, calls = _responses(_completed(parsed) if streamed else parsed)
        elif path.endswith("/messages"):
            text, calls = _messages(_message_stream(parsed) if streamed else parsed.get("content"))
        else:
            raise AnswerError(f"not a model route: {path}")
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise AnswerError(f"not an answer of {path}: {error!r}") from error
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{index}", "type": "function",
             "function": {"name": name, "arguments": arguments}}
            for index, (name, arguments) in enumerate(calls)]
    return message


Calls = list[tuple[str, str]]


def _chat(answer: Any) -> tuple[str | None, Calls]:
    message = answer["choices"][0]["message"]
    calls = [(str(call["function"]["name"]), str(call["function"].get("arguments") or ""))
             for call in message.get("tool_calls") or []]
    return message.get("content"), calls


def _chat_stream(chunks: list[Any]) -> tuple[str | None, Calls]:
    text: list[str] = []
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                name, arguments = calls.setdefault(int(call.get("index", 0)), ["", ""])
                calls[int(call.get("index", 0))] = [
                    name or str(function.get("name") or ""),
                    arguments + str(function.get("arguments") or "")]
    return ("".join(text) or None), [(name, arguments) for name, arguments in calls.values()]


def _completed(events: list[Any]) -> Any:
    for event in events:
        if event.get("type") in ("response.completed", "response.incomplete"):
            return event["response"]
    raise AnswerError("a Responses stream without response.completed")


def _responses(response: Any) -> tuple[str | None, Calls]:
    text: list[str] = []
    calls: Calls = []
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            text += [part["text"] for part in item.get("content") or []
                     if part.get("type") == "output_text"]
        elif kind == "function_call":
            name = str(item.get("name"))
            if item.get("namespace"):
                name = f"{item['namespace']}{SEPARATOR}{name}"
            calls.append((name, str(item.get("arguments") or "")))
        elif kind == "tool_search_call":
            calls.append(("tool_search", llama_dump(item.get("arguments") or {})))
    return ("".join(text) or None), calls


def _message_stream(events: list[Any]) -> list[Any]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in events:
        index = event.get("index")
        if event.get("type") == "content_block_start":
            blocks[index] = dict(event["content_block"])
        elif event.get("type") == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                blocks[index]["text"] = blocks[index].get("text", "") + delta["text"]
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + delta["partial_json"]
    for index, text in partial.items():
        try:  # llama-server writes an input it cannot parse as {} (to_json_anthropic)
            blocks[index]["input"] = json.loads(text) if text else {}
        except ValueError:
            blocks[index]["input"] = {}
    return [blocks[index] for index in sorted(blocks)]


def _messages(content: Any) -> tuple[str | None, Calls]:
    text: list[str] = []
    calls: Calls = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text")))
        elif kind in ("tool_use", "server_tool_use"):
            calls.append((str(block.get("name")), llama_dump(block.get("input") or {})))
    return ("".join(text) or None), calls
