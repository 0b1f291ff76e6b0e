"""Serving an acting request over one or more upstream rounds, to a streaming or a plain
client alike.

Each round's answer — an SSE stream, or one JSON body (also when a stream was asked
for: some servers answer so, and ``upstream_stream = false`` asks for it) — is read by a
:class:`~proxy.chat.round_reader.RoundReader`; what the client may see is shown as it is
read (:mod:`proxy.chat.client`). Then the round's outcome:

- meta-calls alone, the round complete (``finish_reason`` other than ``length``), meta
  rounds left: the meta-calls run, the exchange is appended (arguments always valid
  JSON), the request is re-issued, and the same client response goes on;
- a round that ended with ``length`` (or without a finish reason): its meta-calls never
  run; the client gets ``length`` (or an error), the meta-calls removed;
- meta-calls with real calls, or after the last meta round: they run (the loads take
  effect next turn); real calls go to the client; with none, ``finish_reason`` is
  ``stop`` and, if nothing at all was shown, a note says what happened;
- an upstream error (a non-200 answer to a re-issue, an error event mid-stream): the
  client gets the upstream's error object — its own status when nothing was shown yet;
- an answer the proxy cannot interpret (an event that is not a chunk, a call without a
  name: ``RoundReader.problem``): the client gets ``upstream_invalid_response`` (an SSE
  error event, or 502), nothing of the round's calls, and no meta-call runs.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import Send

from proxy.chat.context import TurnServices
from proxy.chat.client import PlainClient, StreamClient, asks_usage, upstream_error_object
from proxy.chat.round_reader import RoundReader
from proxy.chat.rounds import send_round
from proxy.chat.turn import Turn, add_usage
from proxy.http.asgi import send_complete
from proxy.http.errors import ProxyError, UpstreamResponseInvalid
from proxy.http.forwarding import ClientRequest, is_event_stream, response_headers
from proxy.http.headers import Headers
from proxy.http.sse import Event, EventSplitter
from proxy.http.upstream import UpstreamResponse, raw_chunks, read_decoded

Client = StreamClient | PlainClient


def empty_answer_note(rounds: int, finish: str) -> str:
    """The content of a response that would be empty once its meta-calls are removed
    (an assistant message without content nor calls is invalid when replayed)."""
    if finish == "length":
        return (
            "[toolprune] The answer was cut off (finish_reason length) inside a "
            "tool-loading call, which was not run. Allow more completion tokens."
        )
    return (
        f"[toolprune] The model asked to load more tools after {rounds} tool-loading "
        "round(s) and wrote no answer. The tools it asked for are available from the next "
        "request on."
    )


class _TurnServer:
    def __init__(
        self, services: TurnServices, turn: Turn, request: ClientRequest, send: Send,
        extra_headers: Headers, started: float, stream: bool,
    ) -> None:
        self.services = services
        self.turn = turn
        self.request = request
        self.send = send
        self.extra_headers = extra_headers
        self.started = started
        self.stream = stream
        self.client: Client | None = None
        self.usage: dict[str, Any] | None = None

    def _observe_ttft(self) -> None:
        elapsed = time.perf_counter() - self.started
        self.services.metrics.ttft.labels(self.turn.decision).observe(elapsed)

    def _client_for(self, response: UpstreamResponse) -> Client:
        if self.client is None:
            headers = [*response_headers(response), *self.extra_headers]
            if self.stream:
                self.client = StreamClient(self.send, headers, self._observe_ttft,
                                           include_usage=asks_usage(self.turn.body))
            else:
                self.client = PlainClient(self.send, headers, self._observe_ttft)
        return self.client

    async def run(self) -> None:
        max_rounds = self.services.max_meta_rounds
        streams = self.services.upstream_stream
        asks_stream = self.turn.body.get("stream") is True
        stream_upstream = True if streams is None or not asks_stream else await streams()
        while True:
            offered = self.turn.offer_meta_now(max_rounds)
            try:
                response = await send_round(
                    self.services.forwarder.upstream, self.services.metrics, self.request,
                    self.turn, max_rounds, stream_upstream=stream_upstream,
                )
            except ProxyError as error:
                await self._fail(error)
                return
            try:
                reader = await self._read_round(response)
            except ProxyError as error:
                await self._fail(error)
                return
            finally:
                await response.aclose()
            if reader is None:
                return
            if not await self._after_round(reader, offered):
                return

    async def _after_round(self, reader: RoundReader, offered: bool) -> bool:
        """Act on a round's outcome; True when the request is re-issued."""
        client = self.client
        assert client is not None
        self.usage = add_usage(self.usage, reader.usage)
        self.turn.notes.extend(reader.notes)
        if reader.error is not None:
            await client.fail_upstream(_error_object(reader.error))
            return False
        if reader.problem is not None:
            await client.fail(UpstreamResponseInvalid(reader.problem))
            return False
        meta = reader.meta_calls()
        finish = reader.finish.get(0)
        real = reader.has_real_calls()
        if finish is None and (meta or reader.streamed):
            await client.fail(UpstreamResponseInvalid(
                "the upstream's answer ended without a finish_reason"
                + ("; the tool-loading call in it was not run" if meta else "")
            ))
            return False
        if meta and finish != "length":
            if not real and offered:
                results = await self.services.run_meta_calls(self.turn, meta)
                self.turn.append_meta_exchange(reader.content_text(), meta, results)
                self.turn.rounds += 1
                return True
            await self.services.run_meta_calls(self.turn, meta)  # loads take effect next turn
            if not real:
                reader.finish[0] = finish = "stop"
        if meta and not real and not client.shown_output:
            note = empty_answer_note(self.turn.rounds, finish or "stop")
            await client.choices([{"index": 0, "delta": {"content": note}}])
        elif reader.streamed and finish == "stop" and not meta and not real and not client.shown_output:
            self.services.suspicious_stop("chat_completions", self.request.request_id)
        self.turn.response_calls = reader.real_call_names()
        await client.finish(reader.finish, self.usage, reader.extras, usage_apart=reader.usage_apart)
        return False

    async def _read_round(self, response: UpstreamResponse) -> RoundReader | None:
        """Read one answer, showing the client what it may see; None when the request
        was answered here (an upstream error or a body that is no chat completion)."""
        client = self._client_for(response)
        if response.status_code != 200:
            if not client.started:
                await self.services.forwarder.relay(response, self.send, self.extra_headers)
            else:
                body = await read_decoded(response)
                await client.fail_upstream(upstream_error_object(response.status_code, body))
            return None
        reader = RoundReader(self.turn.is_meta)
        if is_event_stream(response):
            reader.streamed = True
            splitter = EventSplitter()
            reading = True
            async for data in raw_chunks(response):
                for event in splitter.feed(data):
                    reading = reading and await self._read_event(event, reader, client)
                if not reading:
                    if reader.done:
                        await response.drain()
                    break
            if reading:
                for event in splitter.flush():
                    await self._read_event(event, reader, client)
        else:
            raw = await read_decoded(response)
            data = _completion(raw)
            if data is None:
                if client.started:
                    raise UpstreamResponseInvalid("upstream answered a re-issued request with a body that is not a chat completion")
                headers = [(n, v) for n, v in response_headers(response) if n not in (b"content-length", b"content-encoding")]
                await send_complete(self.send, 200, [*headers, *self.extra_headers], raw)
                return None
            client.adopt(data)
            await client.open()
            await client.choices(reader.read_completion(data))
        client.adopt(reader.identity)
        await client.choices(reader.end())
        return reader

    async def _read_event(self, event: Event, reader: RoundReader, client: Client) -> bool:
        """Read one SSE event; False once the round's stream is over."""
        if event.data is None:
            if event.raw.lstrip().startswith(b":"):
                await client.comment(event.raw)
            return True
        if event.data.strip() == "[DONE]":
            reader.done = True
            return False
        try:
            chunk = json.loads(event.data)
        except (json.JSONDecodeError, RecursionError):
            chunk = None
        if not isinstance(chunk, dict):
            reader.unreadable_event()
            return False
        if event.event == "error" and not chunk.get("error"):
            chunk = {"error": chunk}
        shown = reader.read_chunk(chunk)
        client.adopt(reader.identity)
        await client.open()
        await client.choices(shown)
        return reader.error is None

    async def _fail(self, error: ProxyError) -> None:
        if self.client is not None:
            await self.client.fail(error)
        else:
            await StreamClient(self.send, self.extra_headers, lambda: None).fail(error)


def _completion(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        return data
    choices = data.get("choices")
    readable = isinstance(choices, list) and choices and all(
        isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices
    )
    return data if readable else None


def _error_object(error: Any) -> dict[str, Any]:
    if isinstance(error, dict):
        return error
    return {"message": str(error), "type": "upstream_error", "param": None, "code": None}


async def serve_turn(
    services: TurnServices, turn: Turn, request: ClientRequest, send: Send,
    extra_headers: Headers, started: float, *, stream: bool,
) -> None:
    """Serve ``turn`` as one client response: SSE when ``stream``, else one JSON body."""
    await _TurnServer(services, turn, request, send, extra_headers, started, stream).run()
