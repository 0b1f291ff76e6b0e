"""One labelled case sent to a model server by ``toolprune eval --live``, both ways, and
what came back read into an :class:`selection.evaluation.live.Answer`.

The request is the case's as a client would send it (OpenAI's Chat Completions API
reference): its ``messages`` and ``tools`` (and ``tool_choice`` when it has one),
``temperature`` 0, not streamed. ``direct`` goes to the server's base URL; ``toolprune``
to the proxy (:mod:`proxy.cli.live_proxy`), with the case's conversation as
``X-Conversation-Id`` (its state lives as long as the run) and an ``X-Request-Id`` of its
own, by which the relay's rounds and the proxy's log lines of the request are found.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from proxy.cli.live_proxy import LiveProxy, Round, answer_costs
from proxy.servers.overflow import read_overflow
from selection.evaluation import Answer, Case

#: Characters of a server's error message kept in a case's record.
ERROR_CHARS = 200


@dataclass(frozen=True)
class Sender:
    """How requests are sent: the server's ``base_url`` (OpenAI base, ending ``/v1`` or
    the server's equivalent), the ``model``, ``max_tokens`` per answer (None: the server's
    default) and the ``api_key`` (a bearer token; None: none)."""

    base_url: str
    model: str
    max_tokens: int | None
    api_key: str | None

    def body(self, case: Case) -> dict[str, Any]:
        """The chat-completion request of ``case``."""
        body: dict[str, Any] = {
            "model": self.model, "messages": case.messages, "tools": case.tools,
            "temperature": 0, "stream": False,
        }
        if case.tool_choice is not None:
            body["tool_choice"] = case.tool_choice
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"content-type": "application/json", **(extra or {})}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers


def _error(status: int, content: bytes) -> str:
    """What a failed answer says: ``overflow: …`` for a context overflow (any server's
    words, or the proxy's ``context_length_exceeded``), else ``http STATUS: …``."""
    try:
        parsed = json.loads(content)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    text = message if isinstance(message, str) else content.decode("utf-8", "replace")
    code = error.get("code") if isinstance(error, dict) else None
    if read_overflow(status, content) is not None or code == "context_length_exceeded":
        return f"overflow: {text[:ERROR_CHARS]}"
    return f"http {status}: {text[:ERROR_CHARS]}"


def first_call(content: bytes) -> tuple[str | None, str | None]:
    """The first tool call's name in a chat completion (None: the answer calls none), and
    None; or (None, why) when ``content`` is not a chat completion."""
    try:
        parsed = json.loads(content)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
        return None, "unreadable: the answer is not JSON"
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, "unreadable: the answer has no choices"
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not calls:
        return None, None
    function = calls[0].get("function") if isinstance(calls[0], dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        return None, "unreadable: a tool call without a name"
    return name, None


def _costs(rounds: Sequence[Round], answer_usage: Any, wall_s: float) -> dict[str, Any]:
    """Prompt tokens and seconds over ``rounds`` (see :class:`Answer`)."""
    timed = bool(rounds) and all(r.timings is not None for r in rounds)
    if timed:
        tokens = sum(int(r.timings.get("prompt_n") or 0) for r in rounds if r.timings)
        seconds = sum(float(r.timings.get("prompt_ms") or 0) + float(r.timings.get("predicted_ms") or 0)
                      for r in rounds if r.timings) / 1000
        return {"prompt_tokens": tokens, "seconds": seconds, "timed_by": "timings"}
    usage = answer_usage if isinstance(answer_usage, dict) else {}
    tokens = usage.get("prompt_tokens")
    return {"prompt_tokens": tokens if isinstance(tokens, int) else None, "seconds": wall_s,
            "timed_by": "wall"}


def _send(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str],
          ) -> tuple[httpx.Response | None, str | None, float]:
    started = time.perf_counter()
    try:
        response = client.post(url, json=body, headers=headers)
    except httpx.TimeoutException:
        return None, "timeout: no answer in time", time.perf_counter() - started
    except httpx.HTTPError as error:
        return None, f"connection: {type(error).__name__}", time.perf_counter() - started
    return response, None, time.perf_counter() - started


def _usage(response: httpx.Response) -> Any:
    try:
        parsed = response.json()
    except ValueError:
        return None
    return parsed.get("usage") if isinstance(parsed, dict) else None


def send_direct(client: httpx.Client, sender: Sender, case: Case) -> Answer:
    """``case`` sent straight to the server with every tool."""
    response, error, wall_s = _send(client, sender.base_url.rstrip("/") + "/chat/completions",
                                    sender.body(case), sender.headers())
    everything = frozenset(case.tool_names)
    if response is None:
        return Answer(error=error, first=everything, wall_s=wall_s, seconds=wall_s)
    if response.status_code != 200:
        return Answer(error=_error(response.status_code, response.content), first=everything,
                      wall_s=wall_s, seconds=wall_s)
    called, problem = first_call(response.content)
    _, timings = answer_costs(response.content, response.headers.get("content-type", ""))
    rounds = [Round(list(case.tool_names), 200, _usage(response), timings)]
    return Answer(called=called, error=problem, first=everything, wall_s=wall_s,
                  **_costs(rounds, _usage(response), wall_s))


def send_through(client: httpx.Client, sender: Sender, proxy: LiveProxy, case: Case,
                 conversation: str) -> Answer:
    """``case`` sent through the proxy as conversation ``conversation``: the first round's
    tools are what the relay saw first, plus what the proxy delivered before it; what its
    meta-calls loaded later is ``reached``."""
    request_id = f"eval-{uuid.uuid4().hex}"
    headers = sender.headers({"x-conversation-id": conversation, "x-request-id": request_id})
    response, error, wall_s = _send(client, proxy.origin + "/v1/chat/completions",
                                    sender.body(case), headers)
    decision = proxy.lines.decision(request_id) if response is not None else None
    rounds = proxy.meter.of(request_id)
    names = set(case.tool_names)
    first = set(rounds[0].tools) & names if rounds else set()
    reached = {name for later in rounds[1:] for name in later.tools} & names
    for event in (decision or {}).get("meta", []):
        loaded = {str(name) for name in event.get("loaded", [])} & names
        (first if event.get("proactive") else reached).update(loaded)
    base = {"first": frozenset(first), "reached": frozenset(reached - first),
            "rounds": len(rounds), "wall_s": wall_s}
    if response is None:
        return Answer(error=error, seconds=wall_s, **base)
    if response.status_code != 200:
        return Answer(error=_error(response.status_code, response.content), seconds=wall_s,
                      **base)
    called, problem = first_call(response.content)
    return Answer(called=called, error=problem, **base,
                  **_costs(rounds, _usage(response), wall_s))
