"""Serving an acting request whose response is one JSON object (``stream`` not true).

Meta-calls alone: executed, the exchange appended, the request re-issued (bounded).
Meta-calls mixed with real calls: the real calls go to the client (meta-calls removed),
the loads take effect next turn. ``usage`` is the sum over rounds.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.types import Send

from proxy.chat.context import TurnServices
from proxy.chat.rounds import send_round
from proxy.chat.turn import MetaCall, Turn, add_usage, arguments_text, json_bytes
from proxy.http.asgi import send_complete, send_error
from proxy.http.errors import ProxyError
from proxy.http.forwarding import ClientRequest, response_headers
from proxy.http.headers import Headers
from proxy.http.upstream import read_decoded


def _split_calls(turn: Turn, message: dict[str, Any]) -> tuple[list[MetaCall], bool]:
    """Meta-calls of ``message`` and whether it has real calls; removes the meta-calls
    from ``message`` in place (``tool_calls`` emptied → removed)."""
    meta: list[MetaCall] = []
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        real = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if turn.is_meta(name):
                arguments = arguments_text(function.get("arguments")) or "{}"
                meta.append(MetaCall(call.get("id") or f"call_{uuid.uuid4().hex[:24]}", name, arguments))
            else:
                real.append(call)
        if meta:
            if real:
                message["tool_calls"] = real
            else:
                message.pop("tool_calls")
        return meta, bool(real)
    function_call = message.get("function_call")
    if isinstance(function_call, dict) and turn.is_meta(function_call.get("name")):
        message.pop("function_call")
        arguments = arguments_text(function_call.get("arguments")) or "{}"
        return [MetaCall(f"call_{uuid.uuid4().hex[:24]}", function_call["name"], arguments)], False
    return [], isinstance(function_call, dict)


def _call_names(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    functions = [c.get("function") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    functions.append(message.get("function_call"))
    return [f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)]


async def serve_plain(
    services: TurnServices,
    turn: Turn,
    request: ClientRequest,
    send: Send,
    extra_headers: Headers,
    started: float,
) -> None:
    """Serve ``turn`` and send one response to the client."""
    upstream, metrics = services.forwarder.upstream, services.metrics
    usage: dict[str, Any] | None = None
    while True:
        offered = turn.offer_meta_now(services.max_meta_rounds)
        try:
            response = await send_round(
                upstream, metrics, request, turn, services.max_meta_rounds
            )
        except ProxyError as error:
            await send_error(send, error)
            return
        try:
            if response.status_code != 200:
                await services.forwarder.relay(response, send, extra_headers)
                return
            raw = await read_decoded(response)
        except ProxyError as error:
            await send_error(send, error)
            return
        finally:
            await response.aclose()
        headers = [
            (name, value)
            for name, value in response_headers(response)
            if name not in (b"content-length", b"content-encoding")
        ]
        try:
            data = json.loads(raw)
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            await send_complete(send, 200, [*headers, *extra_headers], raw)
            return
        usage = add_usage(usage, data.get("usage"))
        meta, has_real = _split_calls(turn, message)
        if meta and not has_real and offered:
            results = await services.run_meta_calls(turn, meta)
            turn.append_meta_exchange(message.get("content"), meta, results)
            turn.rounds += 1
            continue
        if meta:  # mixed, or rounds exhausted: loads take effect next turn
            await services.run_meta_calls(turn, meta)
            if not has_real:
                data["choices"][0]["finish_reason"] = "stop"
        turn.response_calls = _call_names(message)
        if usage is not None:
            data["usage"] = usage
        metrics.ttft.labels("pruned").observe(time.perf_counter() - started)
        body = json_bytes(data)
        await send_complete(send, 200, [*headers, *extra_headers], body)
        return
