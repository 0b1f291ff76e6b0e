"""What the client gets of an acting request, over all its upstream rounds: one
``chat.completion.chunk`` SSE stream (:class:`StreamClient`) or one ``chat.completion``
(:class:`PlainClient`), per OpenAI's Chat Completions reference.

Both take the same calls: the choice deltas shown as the rounds are read, then the
finish. One ``id`` and ``created`` for the whole response (the first round's; the
upstream's own change at every re-issue); ``role`` once per choice; ``finish_reason`` in
one chunk per choice at the end; one ``[DONE]``. ``usage`` (summed over rounds) goes where
the client or the upstream put it: a client that asked for it
(``stream_options.include_usage``) gets it, as OpenAI's reference says, in a chunk of its
own with empty ``choices`` before ``[DONE]``, and ``"usage": null`` in every other chunk;
otherwise it stays where the last round had it: in a chunk of its own, or in the finish
chunk with the upstream's other fields (llama-server's ``timings``), as llama-server sends
it to a client that did not ask. The plain message is the accumulation of exactly those
deltas, so plain and streaming give the same final message.

A streaming response starts (status 200, a role delta with empty content, as OpenAI's
first chunk) once the first round's answer has begun; an upstream error before that
reaches the client with its own status, one after it as an SSE ``error`` event carrying
the upstream's error object.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.types import Send

from proxy.http.asgi import send_body, send_complete, send_error, start_response
from proxy.http.errors import ProxyError, sse_error_event
from proxy.http.headers import Headers
from proxy.http.sse import data_event
from proxy.turn.turn import json_bytes

_SKIPPED_HEADERS = frozenset({b"content-length", b"content-encoding", b"content-type"})


def client_identity(identity: dict[str, Any] | None) -> dict[str, Any]:
    """The response's ``id``/``created``/``model`` (and ``system_fingerprint``): the
    upstream's first, filled in where it gave none."""
    identity = dict(identity or {})
    if not isinstance(identity.get("id"), str):
        identity["id"] = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    if not isinstance(identity.get("created"), int):
        identity["created"] = int(time.time())
    identity.setdefault("model", "")
    return identity


def asks_usage(body: dict[str, Any]) -> bool:
    """Whether a streamed request asks for usage (``stream_options.include_usage``)."""
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def error_event(error: dict[str, Any]) -> bytes:
    """An SSE ``error`` event carrying ``error`` (an OpenAI error object), which the
    ``openai`` SDKs raise as ``APIError``."""
    return b"event: error\ndata: " + json_bytes({"error": error}) + b"\n\n"


class _Client:
    """``headers``: the first round's answer's; ``report``: the proxy's report headers,
    read when the response starts (a meta round may bring them up to date before)."""

    def __init__(
        self, send: Send, headers: Headers, report: Headers, on_output: Callable[[], None]
    ) -> None:
        self.send = send
        self._upstream_headers = [(n, v) for n, v in headers if n not in _SKIPPED_HEADERS]
        self._report = report
        self.on_output = on_output
        self.identity: dict[str, Any] | None = None
        self.started = False
        #: Whether any content or call was shown.
        self.shown_output = False

    @property
    def headers(self) -> Headers:
        """The response's headers: the upstream's, then the proxy's report."""
        return [*self._upstream_headers, *self._report]

    def adopt(self, identity: dict[str, Any] | None) -> None:
        """The first round's identity becomes the response's."""
        if self.identity is None:
            self.identity = client_identity(identity)

    def _note_output(self, choices: list[dict[str, Any]]) -> None:
        if not self.shown_output and any(
            c["delta"].get("content") or c["delta"].get("tool_calls") or c["delta"].get("function_call")
            for c in choices
        ):
            self.shown_output = True
            self.on_output()


class StreamClient(_Client):
    """The client's SSE response; ``include_usage``: the client asked for usage."""

    def __init__(
        self, send: Send, headers: Headers, report: Headers, on_output: Callable[[], None], *,
        include_usage: bool = False,
    ) -> None:
        super().__init__(send, headers, report, on_output)
        self.include_usage = include_usage
        self._roles_sent: set[int] = set()

    async def _start(self) -> None:
        if not self.started:
            headers = [(b"content-type", b"text/event-stream")]
            if not any(name == b"cache-control" for name, _ in self.headers):
                headers.append((b"cache-control", b"no-cache"))  # the upstream's, else ours
            await start_response(self.send, 200, [*headers, *self.headers])
            self.started = True

    def _chunk(self, choices: list[dict[str, Any]], **fields: Any) -> bytes:
        identity = client_identity(self.identity)
        self.identity = identity
        chunk = {
            "id": identity["id"],
            "object": "chat.completion.chunk",
            "created": identity["created"],
            "model": identity["model"],
            **({"system_fingerprint": identity["system_fingerprint"]} if "system_fingerprint" in identity else {}),
            "choices": choices,
            **({"usage": None} if self.include_usage else {}),
            **fields,
        }
        return data_event(json_bytes(chunk))

    def _with_role(self, choice: dict[str, Any]) -> dict[str, Any]:
        delta = choice["delta"]
        if choice["index"] not in self._roles_sent:
            self._roles_sent.add(choice["index"])
            delta = {"role": "assistant", **delta}
        return {**choice, "delta": delta, "finish_reason": None}

    async def open(self) -> None:
        """Start the response: headers and the first choice's role delta."""
        await self._start()
        if 0 not in self._roles_sent:
            await send_body(self.send, self._chunk([self._with_role({"index": 0, "delta": {"content": ""}})]))

    async def choices(self, choices: list[dict[str, Any]]) -> None:
        if not choices:
            return
        await self._start()
        self._note_output(choices)
        await send_body(self.send, self._chunk([self._with_role(c) for c in choices]))

    async def comment(self, raw: bytes) -> None:
        """Relay a comment event (an upstream's keep-alive), starting the response if it
        has not started: an upstream prefilling a long prompt sends them before its first
        chunk, and a client that gets no byte may give up."""
        await self._start()
        await send_body(self.send, raw)

    async def finish(
        self, finish: dict[int, str], usage: Any, extras: dict[str, Any], *,
        usage_apart: bool = True, done: bool = True,
    ) -> None:
        """The finish chunks, then ``usage`` and the upstream's other top-level fields
        (``extras``): in a chunk of their own when the client asked for usage or
        ``usage_apart`` (the upstream sent it so), else in the last finish chunk; then
        ``[DONE]`` unless ``done`` is False (a stream the upstream ended without one)."""
        await self._start()
        apart = usage is not None and (self.include_usage or usage_apart)
        last = {} if apart else {**({"usage": usage} if usage is not None else {}), **extras}
        chunks = []
        for index in sorted(set(finish) | self._roles_sent or {0}):
            choice = self._with_role({"index": index, "delta": {}})
            choice["finish_reason"] = finish.get(index)
            if choice["finish_reason"] is not None or choice["delta"]:
                chunks.append([choice])
        for n, choices in enumerate(chunks):
            await send_body(self.send, self._chunk(choices, **(last if n == len(chunks) - 1 else {})))
        if apart or (last and not chunks):
            await send_body(self.send, self._chunk([], usage=usage, **extras))
        if done:
            await send_body(self.send, data_event(b"[DONE]"))
        await send_body(self.send, b"", more=False)

    async def fail(self, error: ProxyError) -> None:
        if self.started:
            await send_body(self.send, sse_error_event(error), more=False)
        else:
            await send_error(self.send, error, headers=self.headers)

    async def fail_upstream(self, error: dict[str, Any]) -> None:
        """End the stream with the upstream's error object (:func:`error_event`)."""
        await self._start()
        await send_body(self.send, error_event(error), more=False)


class PlainClient(_Client):
    """The client's JSON response: the deltas accumulated, sent at the finish."""

    def __init__(
        self, send: Send, headers: Headers, report: Headers, on_output: Callable[[], None]
    ) -> None:
        super().__init__(send, headers, report, on_output)
        self._messages: dict[int, dict[str, Any]] = {}
        self._logprobs: dict[int, Any] = {}

    async def open(self) -> None:
        """Nothing is sent before the whole answer is known."""

    async def choices(self, choices: list[dict[str, Any]]) -> None:
        for choice in choices:
            message = self._messages.setdefault(choice["index"], {"role": "assistant"})
            accumulate(message, choice["delta"])
            if choice.get("logprobs") is not None:
                self._logprobs[choice["index"]] = _merge_logprobs(
                    self._logprobs.get(choice["index"]), choice["logprobs"]
                )
        self.shown_output = self.shown_output or any(
            m.get("content") or m.get("tool_calls") for m in self._messages.values()
        )

    async def comment(self, raw: bytes) -> None:
        """Comments have no place in a JSON response."""

    async def finish(
        self, finish: dict[int, str], usage: Any, extras: dict[str, Any], *,
        usage_apart: bool = True, done: bool = True,
    ) -> None:
        """The whole response, ``usage`` and the upstream's other top-level fields
        (``extras``) in it (``usage_apart``, ``done``: for the streamed client only)."""
        self.on_output()
        identity = client_identity(self.identity)
        choices = []
        for index in sorted(set(self._messages) | set(finish) or {0}):
            message = self._messages.get(index, {"role": "assistant"})
            message = {"role": "assistant", "content": message.get("content"), **message}
            choices.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": self._logprobs.get(index),
                    "finish_reason": finish.get(index),
                }
            )
        body = {
            "id": identity["id"],
            "object": "chat.completion",
            "created": identity["created"],
            "model": identity["model"],
            **({"system_fingerprint": identity["system_fingerprint"]} if "system_fingerprint" in identity else {}),
            "choices": choices,
            **({"usage": usage} if usage is not None else {}),
            **extras,
        }
        headers = [(b"content-type", b"application/json"), *self.headers]
        await send_complete(self.send, 200, headers, json_bytes(body))

    async def fail(self, error: ProxyError) -> None:
        await send_error(self.send, error, headers=self.headers)

    async def fail_upstream(self, error: dict[str, Any]) -> None:
        """Answer 502 with the upstream's error object (it failed mid-answer)."""
        body = json_bytes({"error": error})
        headers = [(b"content-type", b"application/json"), *self.headers]
        await send_complete(self.send, 502, headers, body)


def accumulate(message: dict[str, Any], delta: dict[str, Any]) -> None:
    """Add one client delta to ``message`` as an OpenAI client does: strings appended,
    ``tool_calls`` items merged by ``index``, other fields replaced."""
    for key, value in delta.items():
        if key == "tool_calls":
            calls = message.setdefault("tool_calls", [])
            for item in value:
                while len(calls) <= item["index"]:
                    calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                call = calls[item["index"]]
                if "id" in item:
                    call["id"] = item["id"]
                function = item.get("function", {})
                call["function"]["name"] += function.get("name", "")
                call["function"]["arguments"] += function.get("arguments", "")
        elif key == "function_call":
            call = message.setdefault("function_call", {"name": "", "arguments": ""})
            call["name"] += value.get("name", "")
            call["arguments"] += value.get("arguments", "")
        elif key == "role":
            continue
        elif isinstance(value, str) and isinstance(message.get(key), str):
            message[key] += value
        else:
            message[key] = value


def _merge_logprobs(total: Any, logprobs: Any) -> Any:
    if isinstance(total, dict) and isinstance(logprobs, dict):
        merged = dict(total)
        for key, value in logprobs.items():
            if isinstance(value, list) and isinstance(merged.get(key), list):
                merged[key] = [*merged[key], *value]
            else:
                merged[key] = value
        return merged
    return logprobs
