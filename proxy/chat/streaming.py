"""Serving an acting request as a stream of ``chat.completion.chunk`` SSE events.

Content deltas are relayed as they arrive. Tool-call deltas are keyed by ``index`` (only
``index`` is required; ``id`` and ``function.name`` may come once, arguments in
fragments): real calls are relayed, renumbered after hidden meta-calls; meta-calls are
buffered and never relayed. A round that ends with meta-calls only continues, in the
same client response, with the re-issued upstream stream: one role delta, one usage
chunk (summed, when ``stream_options.include_usage``), one ``[DONE]``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.types import Send

from proxy.chat.context import TurnServices
from proxy.chat.rounds import send_round
from proxy.chat.turn import MetaCall, Turn, add_usage, arguments_text, json_bytes
from proxy.http.asgi import send_body, send_error, start_response
from proxy.http.errors import ProxyError, UpstreamResponseInvalid, sse_error_event
from proxy.http.forwarding import ClientRequest, is_event_stream, response_headers
from proxy.http.headers import Headers
from proxy.http.sse import EventSplitter, data_event
from proxy.http.upstream import raw_chunks, read_decoded

_LEGACY_INDEX = -1  # key of the legacy ``function_call`` delta


@dataclass
class _Call:
    """One tool call being streamed: meta (buffered) or real (relayed)."""

    meta: bool | None = None
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    client_index: int | None = None
    pending: list[dict[str, Any]] = field(default_factory=list)  # deltas before the name


@dataclass
class _Round:
    """What one upstream stream produced, beyond what was relayed."""

    calls: dict[int, _Call] = field(default_factory=dict)
    content: list[str] = field(default_factory=list)
    finish: list[dict[str, Any]] = field(default_factory=list)
    last_chunk: dict[str, Any] | None = None
    done: bool = False
    next_client_index: int = 0

    def meta_calls(self) -> list[MetaCall]:
        return [
            MetaCall(c.id or f"call_{uuid.uuid4().hex[:24]}", c.name or "", "".join(c.arguments))
            for c in self.calls.values()
            if c.meta
        ]

    def has_real_calls(self) -> bool:
        return any(not c.meta for c in self.calls.values())


class _StreamServer:
    def __init__(
        self, services: TurnServices, turn: Turn, request: ClientRequest, send: Send,
        extra_headers: Headers, started: float,
    ) -> None:
        self.services = services
        self.turn = turn
        self.request = request
        self.send = send
        self.extra_headers = extra_headers
        self.started = started
        self.client_started = False
        self.role_sent = False
        self.first_token_seen = False
        self.usage: dict[str, Any] | None = None
        self.usage_chunk: dict[str, Any] | None = None

    async def run(self) -> None:
        max_rounds = self.services.max_meta_rounds
        metrics = self.services.metrics
        while True:
            offered = self.turn.offer_meta_now(max_rounds)
            try:
                response = await send_round(
                    self.services.forwarder.upstream, metrics, self.request, self.turn, max_rounds
                )
            except ProxyError as error:
                await self._fail(error)
                return
            try:
                if not await self._begin(response):
                    return
                outcome = await self._relay_round(response)
            except ProxyError as error:
                await self._fail(error)
                return
            finally:
                await response.aclose()
            meta = outcome.meta_calls()
            if meta and not outcome.has_real_calls() and offered:
                results = await self.services.run_meta_calls(self.turn, meta)
                self.turn.append_meta_exchange("".join(outcome.content) or None, meta, results)
                self.turn.rounds += 1
                continue
            if meta:  # mixed, or rounds exhausted: loads take effect next turn
                await self.services.run_meta_calls(self.turn, meta)
            self.turn.response_calls = [
                call.name for call in outcome.calls.values() if not call.meta and call.name
            ]
            await self._finish(outcome, only_meta=bool(meta) and not outcome.has_real_calls())
            return

    async def _begin(self, response: httpx.Response) -> bool:
        """Start the client response on the first round; on a later round, check the
        upstream answered with a stream. False when the request ended here."""
        if response.status_code == 200 and is_event_stream(response):
            if not self.client_started:
                headers = [
                    (n, v) for n, v in response_headers(response)
                    if n not in (b"content-length", b"content-encoding")
                ]
                await start_response(self.send, 200, [*headers, *self.extra_headers])
                self.client_started = True
            return True
        if not self.client_started:
            await self.services.forwarder.relay(response, self.send, self.extra_headers)
            return False
        await read_decoded(response)
        raise UpstreamResponseInvalid(
            f"upstream answered a re-issued request with status {response.status_code}"
        )

    async def _fail(self, error: ProxyError) -> None:
        if self.client_started:
            await send_body(self.send, sse_error_event(error), more=False)
        else:
            await send_error(self.send, error)

    async def _emit(self, payload: bytes) -> None:
        await send_body(self.send, payload)

    async def _relay_round(self, response: httpx.Response) -> _Round:
        outcome = _Round()
        splitter = EventSplitter()
        async for chunk in raw_chunks(response):
            for event in splitter.feed(chunk):
                await self._relay_event(event.raw, event.data, outcome)
        for event in splitter.flush():
            await self._relay_event(event.raw, event.data, outcome)
        for call in outcome.calls.values():  # deltas whose name never came: real
            if call.meta is None:
                call.meta = False
                await self._relay_pending(call, outcome)
        return outcome

    async def _relay_event(self, raw: bytes, data: str | None, outcome: _Round) -> None:
        if data is None:
            await self._emit(raw)  # comments (keep-alives) and data-less events
            return
        if data.strip() == "[DONE]":
            outcome.done = True
            return
        try:
            chunk = json.loads(data)
        except (json.JSONDecodeError, RecursionError):  # relayed as it came
            await self._emit(raw)
            return
        if not isinstance(chunk, dict) or "error" in chunk:
            await self._emit(raw)
            return
        changed = False
        if chunk.get("usage") is not None:
            self.usage = add_usage(self.usage, chunk.pop("usage"))
            self.usage_chunk = {k: v for k, v in chunk.items() if k != "choices"}
            changed = True
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            if not choices:
                return  # a usage-only chunk: summed, sent once at the end
            await self._emit(raw)
            return
        outcome.last_chunk = chunk
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        changed = self._filter_delta(delta, outcome) or changed
        if isinstance(delta.get("content"), str):
            outcome.content.append(delta["content"])
        if choice.get("finish_reason") is not None:
            outcome.finish.append(chunk)
            return
        if self.role_sent and "role" in delta:
            delta.pop("role")
            changed = True
        if not delta and changed:
            return  # nothing left to relay
        self.role_sent = self.role_sent or "role" in delta
        self._observe_first_token(delta)
        await self._emit(data_event(json_bytes(chunk)) if changed else raw)

    def _filter_delta(self, delta: dict[str, Any], outcome: _Round) -> bool:
        """Buffer meta-call deltas, renumber real ones; True if ``delta`` was modified."""
        changed = False
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            relayed = []
            for position, item in enumerate(calls):
                if not isinstance(item, dict):
                    continue
                index = item.get("index", position)
                if isinstance(index, bool) or not isinstance(index, int | str):
                    relayed.append(item)  # an index that cannot key a call: relayed as it came
                    continue
                call = outcome.calls.setdefault(index, _Call())
                kept = self._route_call_delta(call, item, outcome)
                relayed.extend(kept)
                changed = changed or kept != [item]
            if changed:
                if relayed:
                    delta["tool_calls"] = relayed
                else:
                    delta.pop("tool_calls")
        function_call = delta.get("function_call")
        if isinstance(function_call, dict):
            call = outcome.calls.setdefault(_LEGACY_INDEX, _Call())
            if call.meta is None and function_call.get("name"):
                call.name = function_call["name"]
                call.meta = self.turn.is_meta(call.name)
            if call.meta:
                call.arguments.append(arguments_text(function_call.get("arguments")))
                delta.pop("function_call")
                changed = True
        return changed

    def _route_call_delta(
        self, call: _Call, item: dict[str, Any], outcome: _Round
    ) -> list[dict[str, Any]]:
        function = item.get("function") if isinstance(item.get("function"), dict) else {}
        if call.meta is None and function.get("name"):
            call.name = function["name"]
            call.meta = self.turn.is_meta(call.name)
            if not call.meta:
                call.client_index = outcome.next_client_index
                outcome.next_client_index += 1
        if call.meta is None:
            call.pending.append(item)
            return []
        if call.meta:
            call.id = call.id or item.get("id")
            call.arguments.append(arguments_text(function.get("arguments")))
            call.pending.clear()
            return []
        pending, call.pending = call.pending, []
        return [{**delta, "index": call.client_index} for delta in [*pending, item]]

    async def _relay_pending(self, call: _Call, outcome: _Round) -> None:
        call.client_index = outcome.next_client_index
        outcome.next_client_index += 1
        if not call.pending or outcome.last_chunk is None:
            return
        chunk = {**outcome.last_chunk, "choices": [{"index": 0, "delta": {
            "tool_calls": [{**d, "index": call.client_index} for d in call.pending]}}]}
        call.pending = []
        await self._emit(data_event(json_bytes(chunk)))

    def _observe_first_token(self, delta: dict[str, Any]) -> None:
        if not self.first_token_seen and (delta.get("content") or delta.get("tool_calls")):
            self.first_token_seen = True
            self.services.metrics.ttft.labels("pruned").observe(time.perf_counter() - self.started)

    async def _finish(self, outcome: _Round, *, only_meta: bool) -> None:
        for chunk in outcome.finish:
            if only_meta:
                chunk["choices"][0]["finish_reason"] = "stop"
            delta = chunk["choices"][0].get("delta")
            if isinstance(delta, dict) and self.role_sent:
                delta.pop("role", None)
            self.role_sent = True
            await self._emit(data_event(json_bytes(chunk)))
        if self.usage is not None and self.usage_chunk is not None:
            await self._emit(
                data_event(json_bytes({**self.usage_chunk, "choices": [], "usage": self.usage}))
            )
        if outcome.done:
            await self._emit(data_event(b"[DONE]"))
        await send_body(self.send, b"", more=False)


async def serve_stream(
    services: TurnServices,
    turn: Turn,
    request: ClientRequest,
    send: Send,
    extra_headers: Headers,
    started: float,
) -> None:
    """Serve ``turn`` as one SSE response to the client."""
    await _StreamServer(services, turn, request, send, extra_headers, started).run()
