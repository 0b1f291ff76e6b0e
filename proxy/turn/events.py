"""Serving an acting request of a typed-event API (Responses, Messages) as one event
stream over several upstream rounds.

An :class:`proxy.apis.adapter.EventRelay` (one per API) decides, event by event, what the client sees:
hidden meta-call items are dropped, indexes renumbered, the round's terminal events
held back. When a round ends with meta-calls only, the calls are answered and the
request re-issued; the next round's stream continues the same client response. The
relay then ends the stream with one terminal event describing what the client saw. An
event the relay cannot interpret (``EventRelay.problem``) ends the stream with the API's
error event (``upstream_invalid_response``); no meta-call of that round runs.
"""

from __future__ import annotations

import time

from starlette.types import Send

from proxy.apis.adapter import ApiAdapter, RoundReply, typed_event
from proxy.apis.rounds import send_turn_round
from proxy.chat.context import TurnServices
from proxy.chat.turn import Turn
from proxy.http.asgi import send_body, send_error, start_response
from proxy.http.errors import ProxyError, UpstreamResponseInvalid
from proxy.http.forwarding import ClientRequest, is_event_stream, response_headers
from proxy.http.headers import Headers
from proxy.http.sse import EventSplitter
from proxy.http.upstream import UpstreamResponse, raw_chunks, read_decoded


class EventStreamServer:
    """Runs the rounds of one streamed acting request (see the module docstring)."""

    def __init__(
        self, services: TurnServices, adapter: ApiAdapter, turn: Turn, request: ClientRequest,
        send: Send, extra_headers: Headers, started: float,
    ) -> None:
        self.services = services
        self.adapter = adapter
        self.turn = turn
        self.request = request
        self.send = send
        self.extra_headers = extra_headers
        self.started = started
        self.relay = adapter.relay(turn)
        self.client_started = False
        self.ttft_observed = False

    async def run(self, first: UpstreamResponse) -> None:
        """Serve the turn; ``first``: the first round's response (:mod:`proxy.apis.handler`
        sends that round)."""
        response = first
        while True:
            offered = self.turn.offer_meta_now(self.services.max_meta_rounds)
            try:
                if not await self._begin(response):
                    return
                await self._relay_round(response)
            except ProxyError as error:
                await self._fail(error)
                return
            finally:
                await response.aclose()
            if self.relay.failed:
                await send_body(self.send, b"", more=False)
                return
            reply = self.relay.end_round()
            if reply.meta and not reply.real_calls and offered:
                results = await self.services.run_meta_calls(self.turn, reply.meta)
                await self._emit(self._answered(reply))
                self.adapter.append_exchange(self.turn, reply, results)
                self.turn.rounds += 1
                try:
                    response = await send_turn_round(
                        self.services, self.adapter, self.turn, self.request
                    )
                except ProxyError as error:
                    await self._fail(error)
                    return
                continue
            if reply.meta:  # mixed, or rounds exhausted: loads take effect next turn
                await self.services.run_meta_calls(self.turn, reply.meta)
                await self._emit(self._answered(reply))
            self.turn.response_calls = reply.real_calls
            if not reply.meta and not reply.real_calls and not self.relay.first_token and self.relay.ended_normally():
                self.services.suspicious_stop(self.adapter.api, self.request.request_id)
            only_meta = bool(reply.meta) and not reply.real_calls
            await send_body(self.send, self.relay.finish_bytes(only_meta), more=False)
            return

    def _answered(self, reply: RoundReply) -> list[bytes]:
        return [typed_event(payload) for payload in self.relay.answered(reply)]

    async def _begin(self, response: UpstreamResponse) -> bool:
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

    async def _relay_round(self, response: UpstreamResponse) -> None:
        self.relay.start_round()
        splitter = EventSplitter()
        async for chunk in raw_chunks(response):
            for event in splitter.feed(chunk):
                await self._emit(self.relay.feed(event))
        for event in splitter.flush():
            await self._emit(self.relay.feed(event))

    async def _emit(self, payloads: list[bytes]) -> None:
        if self.relay.problem is not None:
            raise UpstreamResponseInvalid(self.relay.problem)
        await self._send(payloads)

    async def _send(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            await send_body(self.send, payload)
        if self.relay.first_token and not self.ttft_observed:
            self.ttft_observed = True
            elapsed = time.perf_counter() - self.started
            self.services.metrics.ttft.labels(self.turn.decision).observe(elapsed)

    async def _fail(self, error: ProxyError) -> None:
        if self.client_started:
            await send_body(self.send, self.relay.error_event(error), more=False)
        else:
            await send_error(self.send, error, headers=self.extra_headers)
