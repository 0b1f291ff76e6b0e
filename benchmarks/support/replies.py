"""The scripted upstream's replies: the kinds a test scripts (:class:`Raw`, :class:`SSE`,
:class:`Hang`, :class:`Slow`, :class:`Delayed`, and the API answers of
:mod:`benchmarks.support.chat_replies` and :mod:`benchmarks.support.api_replies`), and its
built-in answers to requests its script has no reply for: like llama-server, chat completions, Responses and Messages (``ok``), ``/models``,
``/health``, ``/tokenize`` (one token per word) and ``/embeddings`` (a deterministic unit
vector per text, :func:`unit_vector`); else 404 in OpenAI's error shape."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.support.api_replies import Message as AnthropicMessage
from benchmarks.support.api_replies import Responses
from benchmarks.support.chat_replies import DEFAULT_MODEL, Chat

if TYPE_CHECKING:
    from benchmarks.support.upstream import Recorded

CHAT_PATH = "/chat/completions"
EMBEDDING_DIM = 8


@dataclass
class Raw:
    """Any status, body and headers (errors, 429 with Retry-After, ...); dict bodies become JSON."""

    status: int
    body: bytes | str | dict[str, Any]
    headers: dict[str, str] | None = None
    media_type: str = "application/json"


@dataclass
class SSE:
    """Raw SSE bytes, each item flushed as its own body chunk.

    With ``gate``, waits for it after sending ``gate_after`` items (``gate_after ==
    len(events)``: before ending the body). With ``break_after``, drops the connection after
    the items instead of ending the chunked body. ``end_pause_s``: seconds between the last
    item and the body's end, which then reach the client apart (llama-server writes
    ``[DONE]`` and the chunked body's terminating chunk in two writes).
    ``comment_pause_s``: seconds waited before each SSE comment item (``:`` …), to play a
    slow prefill with its keep-alives.
    """

    events: list[bytes]
    break_after: bool = False
    gate: threading.Event | None = None
    gate_after: int = 0
    end_pause_s: float = 0.0
    comment_pause_s: float = 0.0


@dataclass
class Hang:
    """Never answers; the record is marked ``cancelled`` once the client disconnects."""


@dataclass
class Slow:
    """Waits for ``delay_gate`` (or a client disconnect, which cancels), then plays ``then``
    (None: the built-in answer to the request, such as ``/embeddings``' vectors)."""

    delay_gate: threading.Event
    then: Reply | None = None


@dataclass
class Delayed:
    """Waits ``seconds`` (a model's time to answer; a client disconnect cancels), then
    plays ``then``."""

    seconds: float
    then: Reply


Reply = Chat | Raw | SSE | Hang | Slow | Delayed | Responses | AnthropicMessage



def builtin_reply(record: Recorded) -> Reply:
    """What the upstream answers a request its script has no reply for."""
    method, path = record.method, record.path
    if method == "POST" and path.endswith(CHAT_PATH):
        return Chat()
    if method == "POST" and path.endswith("/responses"):
        return Responses()
    if method == "POST" and path.endswith("/messages"):
        return AnthropicMessage()
    if method == "GET" and path.endswith("/models"):
        model = {"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "tests"}
        return Raw(200, {"object": "list", "data": [model]})
    if method == "POST" and path.endswith("/embeddings"):
        return Raw(200, _embeddings(json_object(record.body)))
    if method == "GET" and path.endswith("/health"):
        return Raw(200, {"status": "ok"})
    if method == "POST" and path.endswith("/tokenize"):
        words = str(json_object(record.body).get("content", "")).split()
        return Raw(200, {"tokens": [zlib.crc32(word.encode()) % 32000 for word in words]})
    error = {"message": f"no route for {method} {path}", "type": "not_found_error"}
    return Raw(404, {"error": {**error, "param": None, "code": None}})


def _embeddings(request: dict[str, Any]) -> dict[str, Any]:
    inputs = request.get("input", [])
    if not isinstance(inputs, list):
        inputs = [inputs]
    texts = [item if isinstance(item, str) else json.dumps(item) for item in inputs]
    data = [
        {"object": "embedding", "index": i, "embedding": unit_vector(text)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": request.get("model", DEFAULT_MODEL),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def unit_vector(text: str) -> list[float]:
    """The deterministic unit embedding the upstream returns for ``text``."""
    raw = [byte - 127.5 for byte in hashlib.sha256(text.encode()).digest()[:EMBEDDING_DIM]]
    norm = math.sqrt(sum(value * value for value in raw))
    return [value / norm for value in raw]


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or {} when it is not one (non-JSON passthrough tests)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
