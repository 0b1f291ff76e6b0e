"""What the proxy needs of one API besides Chat Completions: the request adapter (read
the catalogue, conversation and ``tool_choice``; write the pruned request) and the
response adapter (find, hide and answer meta-calls in a plain response; an
:class:`EventRelay` for event streams). :mod:`proxy.apis.handler` drives them with the
shared planner.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.chat.planner import PlanInput
from proxy.chat.turn import MetaCall, Turn, json_bytes
from proxy.http.errors import ProxyError, sse_error_event
from proxy.http.forwarding import ClientRequest
from proxy.http.sse import Event
from selection.errors import SelectionError


@dataclass
class RoundReply:
    """What one upstream round answered, as far as meta-calls go.

    ``meta``: the meta-calls (hidden from the client). ``real_calls``: names of the
    client tool calls. ``items``: the round's output (items or content blocks) as the
    model produced them, meta-calls included (with the arguments they were run with):
    appended to the conversation when the request is re-issued.
    """

    meta: list[MetaCall] = field(default_factory=list)
    real_calls: list[str] = field(default_factory=list)
    items: list[Any] = field(default_factory=list)


def typed_event(data: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (both APIs name events so; the
    Anthropic SDKs dispatch on the ``event:`` field)."""
    return b"event: " + str(data.get("type")).encode() + b"\ndata: " + json_bytes(data) + b"\n\n"


class EventRelay(ABC):
    """What the client sees of each upstream event; state for one client response."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        #: An ``error`` event was relayed: the stream ends with it.
        self.failed = False
        #: A content or tool-call delta reached the client (time to first token).
        self.first_token = False
        #: The upstream ended its stream with ``data: [DONE]``.
        self.done_marker = False
        self.round = 0
        #: Why the stream cannot be relayed further (an event that cannot be interpreted:
        #: it may carry part of a hidden call, so it is neither relayed nor guessed at).
        self.problem: str | None = None

    def feed(self, event: Event) -> list[bytes]:
        """Bytes to send the client for one upstream event (none once ``problem`` is set)."""
        if event.data is None:
            return [event.raw]  # comments (keep-alives)
        if event.data.strip() == "[DONE]":
            self.done_marker = True
            return []
        try:
            data = json.loads(event.data)
        except (json.JSONDecodeError, RecursionError):
            data = None
        if not isinstance(data, dict):
            self.problem = "the upstream sent an event that is not a JSON object"
            return []
        return [typed_event(payload) for payload in self.on_event(data)]

    def error_event(self, error: ProxyError) -> bytes:
        """The event that ends the client's stream with ``error``, in the API's shape
        (:func:`proxy.http.errors.sse_error_event`: OpenAI's, Anthropic's on Messages)."""
        return sse_error_event(error)

    def start_round(self) -> None:
        """Called before each upstream round's events."""
        self.round += 1

    @abstractmethod
    def on_event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Payloads to relay for one upstream event (possibly rewritten, or none)."""

    @abstractmethod
    def end_round(self) -> RoundReply:
        """The round's meta-calls, client calls and output, once its stream ended."""

    def answered(self, reply: RoundReply) -> list[dict[str, Any]]:
        """Payloads to relay once ``reply``'s meta-calls have run (before the next round,
        or before the stream ends): what the client's API shows of the calls the proxy
        ran for it, such as the client's own search tool (``turn.searches``). None by
        default: meta-calls are hidden."""
        return []

    @abstractmethod
    def ended_normally(self) -> bool:
        """Whether the last round ended as a finished answer (not cut, not failed)."""

    @abstractmethod
    def finish(self, only_meta: bool) -> list[dict[str, Any]]:
        """The events that end the client's stream (``only_meta``: the last round made
        meta-calls only, all hidden)."""

    def finish_bytes(self, only_meta: bool) -> bytes:
        events = b"".join(typed_event(payload) for payload in self.finish(only_meta))
        return events + (b"data: [DONE]\n\n" if self.done_marker else b"")


class ApiAdapter(Protocol):
    """One API's request and response adapters."""

    #: The ``api`` label of metrics and the decision log.
    api: str

    def continued(self, request: ClientRequest) -> ClientRequest:
        """The request as the proxy plans and forwards it, pruned or not: the client's,
        or with the ids of server-side state the proxy showed the client mapped to the
        upstream's (Responses ``previous_response_id``)."""

    def read(self, body: dict[str, Any]) -> PlanInput:
        """What the planner needs of ``body``. Raises NothingToPrune (no function
        tools), CatalogError, UnreadableRequest (forward the original bytes)."""

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """The body of the next upstream round: pruned tools (with the meta-tools in
        their place when ``with_meta``: :meth:`proxy.chat.turn.Turn.block_entries`),
        ``tool_choice`` as planned, the meta exchanges appended; every other field as the
        client sent it."""

    def append_exchange(
        self, turn: Turn, reply: RoundReply, results: Sequence[str]
    ) -> None:
        """Record a round that ended in meta-calls and their answers (one per call) for
        the re-issued request."""

    def read_reply(self, turn: Turn, data: dict[str, Any]) -> RoundReply:
        """Split a plain response body. Raises ValueError/KeyError/TypeError when it has
        not the API's shape (the body is then relayed as it is)."""

    def finish_reply(
        self, turn: Turn, data: dict[str, Any], usage: dict[str, Any] | None, only_meta: bool
    ) -> None:
        """Make ``data`` what the client sees: meta-calls removed, ``usage`` summed over
        rounds, the stop reason consistent with what is left."""

    def relay(self, turn: Turn) -> EventRelay:
        """A relay for this turn's event stream (one per client response)."""


class UnreadableRequest(SelectionError):
    """The request has a shape the adapter cannot read: forwarded unchanged, counted as a
    fallback."""

    reason = "unreadable_request"
