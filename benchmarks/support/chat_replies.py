"""Scripted answers of the scripted upstream for ``/v1/chat/completions``, rendered as one
``chat.completion`` or as ``chat.completion.chunk`` SSE events (the request's ``stream``
decides), per OpenAI's Chat Completions reference: the role first, content in pieces,
each tool call opened with its id and name and its arguments in fragments, the finish
chunk, a ``usage`` chunk with empty ``choices`` when ``stream_options.include_usage``
asks for one, ``[DONE]``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MODEL = "test-model"


def _split(text: str, parts: int) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces."""
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


@dataclass
class Chat:
    """A chat completion, rendered plain or as SSE chunks depending on the request's ``stream``.

    ``tool_calls`` items are ``{"id", "name", "arguments"}`` with ``arguments`` a JSON string.
    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``;
    ``usage`` defaults to prompt_tokens = request bytes // 4, completion_tokens = 5.
    ``timings``: llama-server's object of the answer's speeds (``prompt_n``,
    ``prompt_ms``, ``predicted_n``, ``predicted_ms``…), on the body and on the stream's
    last event as llama-server puts it; None: none, as other servers.
    """

    content: str | None = "ok"
    tool_calls: list[dict[str, str]] | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    model: str = DEFAULT_MODEL
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:16]}")

    def render(self, request: dict[str, Any], size: int) -> dict[str, Any] | list[bytes]:
        """The JSON body, or the SSE events when the request streams; ``size``: the
        request's bytes (the default usage counts them)."""
        if request.get("stream") is True:
            return self.events(request, size)
        message: dict[str, Any] = {"role": "assistant", "content": self.content, "refusal": None}
        if self.tool_calls:
            message["tool_calls"] = [_tool_call(i, call) for i, call in enumerate(self.tool_calls)]
        choice = {"index": 0, "message": message, "logprobs": None,
                  "finish_reason": self._finish_reason()}
        body = {"id": self.id, "object": "chat.completion", "created": int(time.time()),
                "model": self.model, "choices": [choice], "usage": self._usage(size)}
        return body if self.timings is None else {**body, "timings": self.timings}

    def events(self, request: dict[str, Any], size: int) -> list[bytes]:
        """The SSE events of this answer to ``request`` (its ``stream_options`` read)."""
        options = request.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": self.id, "object": "chat.completion.chunk", "created": created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish_reason}],
            }
            if include_usage:
                data["usage"] = None
            return data

        first_content = None if self.content is None else ""
        chunks = [chunk({"role": "assistant", "content": first_content})]
        chunks += [chunk({"content": piece}) for piece in _split(self.content or "", 4)]
        for index, call in enumerate(self.tool_calls or []):
            full = _tool_call(index, call)
            opening = {**full, "index": index, "function": {"name": call["name"], "arguments": ""}}
            chunks.append(chunk({"tool_calls": [opening]}))
            chunks += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _split(call["arguments"], 3)
            ]
        chunks.append(chunk({}, self._finish_reason()))
        if include_usage:
            chunks.append({**chunk({}), "choices": [], "usage": self._usage(size)})
        if self.timings is not None:
            chunks[-1]["timings"] = self.timings
        return [b"data: " + _json_bytes(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]

    def _finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def _usage(self, size: int) -> dict[str, Any]:
        if self.usage is not None:
            return self.usage
        prompt_tokens, completion_tokens = size // 4, 5
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}


def _tool_call(index: int, call: dict[str, str]) -> dict[str, Any]:
    return {
        "id": call.get("id", f"call_{index}"),
        "type": "function",
        "function": {"name": call["name"], "arguments": call["arguments"]},
    }
