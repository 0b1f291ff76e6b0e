"""The client's view of a typed event stream (Responses, Messages): one client stream over
all the upstream rounds, each API's relay deciding event by event what the client sees.

The client's response starts (status 200, the first round's headers) when the first
round answers with an event stream. Each upstream event goes through the API's
:meth:`EventStreamView.on_event` (hidden meta-call items dropped, indexes renumbered, the
round's terminal events held back); the upstream's comments (keep-alives) are relayed as
they come. After the last round the API's terminal events describe what the client saw.
An upstream ``error`` event, or an error answer to a re-issued round, ends the stream with
the API's error event; an event the relay cannot interpret (:attr:`ClientView.problem`)
with ``upstream_invalid_response``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from proxy.http.asgi import send_body, send_error, start_response
from proxy.http.errors import ProxyError, UpstreamResponseInvalid, sse_error_event
from proxy.http.forwarding import is_event_stream, response_headers
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, ClientView, Reply
from proxy.turn.turn import Turn, json_bytes


def typed_event(data: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (both APIs name events so; the
    Anthropic SDKs dispatch on the ``event:`` field)."""
    return b"event: " + str(data.get("type")).encode() + b"\ndata: " + json_bytes(data) + b"\n\n"


def streams_first_answer(first: UpstreamResponse) -> bool:
    """How a typed API (Responses, Messages) serves a turn: in the shape of its first
    round's answer — an event stream streamed, any other answer plain — whatever the
    request's ``stream`` (some servers answer one with the other)."""
    return first.status_code == 200 and is_event_stream(first)


def client_headers(response: UpstreamResponse, report: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's response headers: the upstream's (but its length and encoding: the
    proxy rewrites the body, uncompressed), then the proxy's ``report``."""
    kept = [(n, v) for n, v in response_headers(response)
            if n not in (b"content-length", b"content-encoding")]
    return [*kept, *report]


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
            await start_response(self.out.send, 200, client_headers(response, self.out.headers))
            self._started = True

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
        raise UpstreamResponseInvalid(
            "upstream answered a re-issued request with a body that is not an event stream"
        )

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
        await send_body(self.out.send, events + (b"data: [DONE]\n\n" if self.done_marker else b""),
                        more=False)

    async def fail(self, error: ProxyError) -> None:
        if self._started:
            await send_body(self.out.send, self.error_event(error), more=False)
        else:
            await send_error(self.out.send, error, headers=self.out.headers)

    async def fail_upstream(self, error: Any) -> None:
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
    def note_events(self, text: str) -> list[dict[str, Any]]:
        """Payloads that add ``text`` as a text item or block of the answer."""

    @abstractmethod
    def finish_events(self, reply: Reply) -> list[dict[str, Any]]:
        """The events that end the client's stream after the last round (none when the
        upstream ended without its own)."""
