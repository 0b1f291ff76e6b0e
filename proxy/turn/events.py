"""The client's view of a typed event stream (Responses, Messages): one client stream over
all the upstream rounds, each API's relay deciding event by event what the client sees.

The client's response starts (status 200, the first round's headers as an event stream)
with the first byte it gets. A round answered with one JSON body (a server that does not
stream, or an upstream asked for it by a client that streams) is turned into the API's
events (:meth:`EventStreamView.answer_events`) and relayed as such. Each upstream event
goes through the API's
:meth:`EventStreamView.on_event` (hidden meta-call items dropped, indexes renumbered, the
round's terminal events held back); the upstream's comments (keep-alives) are relayed as
they come. After the last round the API's terminal events describe what the client saw.
An upstream ``error`` event, or an error answer to a re-issued round, ends the stream with
the API's error event; an event the relay cannot interpret (:attr:`ClientView.problem`)
with ``upstream_invalid_response``.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from typing import Any

from proxy.http.asgi import send_body, send_error, start_response
from proxy.http.errors import ProxyError, sse_error_event
from proxy.http.forwarding import is_event_stream, response_headers
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, ClientView, Reply
from proxy.turn.turn import Turn, json_bytes, json_value

#: The content type of an event stream.
EVENT_STREAM = (b"content-type", b"text/event-stream")


def typed_event(data: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (both APIs name events so; the
    Anthropic SDKs dispatch on the ``event:`` field)."""
    return b"event: " + str(data.get("type")).encode() + b"\ndata: " + json_bytes(data) + b"\n\n"


def serves_a_stream(first: UpstreamResponse, stream: bool) -> bool:
    """Whether a typed API (Responses, Messages) serves a turn as a stream: the client
    asked for one (a JSON answer is made one), or the first round's answer is one (some
    servers answer a plain request so)."""
    return stream or (first.status_code == 200 and is_event_stream(first))


def client_headers(
    response: UpstreamResponse, report: list[tuple[bytes, bytes]], *, events: bool = False
) -> list[tuple[bytes, bytes]]:
    """The client's response headers: the upstream's (but its length and encoding: the
    proxy rewrites the body, uncompressed; with ``events``, its content type: the client
    gets an event stream), then the proxy's ``report``."""
    dropped = (b"content-length", b"content-encoding", *((b"content-type",) if events else ()))
    kept = [(n, v) for n, v in response_headers(response) if n not in dropped]
    return [*kept, *((EVENT_STREAM,) if events else ()), *report]


class EventStreamView(ClientView):
    """See the module docstring; one per client response."""

    def __init__(self, turn: Turn, out: ClientOut) -> None:
        super().__init__(turn, out)
        self._started = False
        self.round = 0
        #: A content or tool-call delta reached the client (time to first token).
        self.first_token = False
        #: The upstream's ``error`` event of this round (its payload), or None.
        self.error: dict[str, Any] | None = None
        self._headers: list[tuple[bytes, bytes]] = [EVENT_STREAM, *out.headers]

    @property
    def started(self) -> bool:
        return self._started

    @property
    def shown_output(self) -> bool:
        return self.first_token

    async def start_round(self, response: UpstreamResponse) -> None:
        await super().start_round(response)
        self.round += 1
        self.error = None
        self.begin_round()
        if not self._started:
            self._headers = client_headers(response, self.out.headers, events=True)

    async def _open(self) -> None:
        """Start the client's stream (on its first byte)."""
        if not self._started:
            self._started = True
            await start_response(self.out.send, 200, self._headers)

    async def comment(self, raw: bytes) -> None:
        await self._send([raw])

    async def event(self, name: str | None, data: dict[str, Any]) -> bool:
        if data.get("type") == "error":
            self.error = data
            return False
        payloads = self.on_event(data)
        if self.problem is not None:
            return False
        await self._send([typed_event(payload) for payload in payloads])
        return True

    async def body(self, raw: bytes) -> bool:
        """A JSON answer relayed as the API's events; False for one that is not the API's
        answer (the round loop's rule)."""
        try:
            data = json_value(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            data = None
        events = self.answer_events(data) if isinstance(data, dict) else None
        if events is None:
            return False
        for payload in events:
            if not await self.event(payload.get("type"), payload):
                break
        return True

    async def end_round(self) -> Reply:
        if self.problem is not None:
            return Reply(problem=self.problem)
        if self.error is not None:
            return Reply(error=self.error)
        return self.round_reply()

    async def answered(self, reply: Reply) -> None:
        await self._send([typed_event(payload) for payload in self.answered_events(reply)])

    async def note(self, text: str) -> None:
        await self._send([typed_event(payload) for payload in self.note_events(text)])

    async def finish(self, reply: Reply, only_meta: bool) -> None:
        events = b"".join(typed_event(payload) for payload in self.finish_events(reply))
        await self._open()
        await send_body(self.out.send, events + (b"data: [DONE]\n\n" if self.done_marker else b""),
                        more=False)

    async def fail(self, error: ProxyError) -> None:
        if self._started:
            await send_body(self.out.send, self.error_event(error), more=False)
        else:
            await send_error(self.out.send, error, headers=self.out.headers)

    async def fail_upstream(self, error: Any) -> None:
        await self._open()
        await send_body(self.out.send, typed_event(self.next_event(error)), more=False)

    def error_event(self, error: ProxyError) -> bytes:
        """The event that ends the client's stream with the proxy's ``error``, in the API's
        shape (:func:`proxy.http.errors.sse_error_event`: OpenAI's, Anthropic's on
        Messages)."""
        return sse_error_event(error)

    def next_event(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` as the client's next event (Responses numbers its events)."""
        return payload

    async def _send(self, payloads: list[bytes]) -> None:
        if payloads:
            await self._open()
        for payload in payloads:
            await send_body(self.out.send, payload)
        if self.first_token:
            self.note_output()

    # --- the API's relay ----------------------------------------------------------
    def begin_round(self) -> None:
        """Called before each upstream round's events."""

    @abstractmethod
    def on_event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Payloads to relay for one upstream event (possibly rewritten, or none); sets
        :attr:`problem` for an event it cannot interpret."""

    @abstractmethod
    def round_reply(self) -> Reply:
        """The round's meta-calls, client calls, output and ending, once its stream ended."""

    def answered_events(self, reply: Reply) -> list[dict[str, Any]]:
        """Payloads to relay once ``reply``'s meta-calls have run: what the client's API
        shows of the calls the proxy ran for it (the client's own search tool). None by
        default: meta-calls are hidden."""
        return []

    @abstractmethod
    def answer_events(self, answer: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The events a stream of the API carries for ``answer``, one whole JSON answer
        (None: it is not the API's answer)."""

    @abstractmethod
    def note_events(self, text: str) -> list[dict[str, Any]]:
        """Payloads that add ``text`` as a text item or block of the answer."""

    @abstractmethod
    def finish_events(self, reply: Reply) -> list[dict[str, Any]]:
        """The events that end the client's stream after the last round (none when the
        upstream ended without its own)."""
