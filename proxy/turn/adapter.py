"""The adapter protocol: what the turn core needs of one API, so that Chat Completions,
Messages and Responses are served by one handler (:mod:`proxy.turn.handler`) and one round
loop (:mod:`proxy.turn.rounds`).

Three parts, one per lifetime:

* :class:`Api` (one per API, for the app's life): decode a request body and read it
  (:meth:`Api.read`); write an error as the API's SSE error event.
* :class:`ApiRequest` (one per request): what the API read of it (:attr:`ApiRequest.input`,
  the planner's input, and whatever else the API needs to write it back), the body of
  each upstream round, the meta exchange appended to it, and the client's view.
* :class:`ClientView` (one per client response): reads each round's answer — a JSON body
  or an SSE stream, event by event — shows the client what it may see as it is read, and
  reports the round as a :class:`Reply`; then finishes or fails the client's response in
  the API's shape.

The rules a turn follows (when meta-calls run, when the request is re-issued, what an
error or a cut-off round gives the client) are the round loop's, written once.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from starlette.types import Send

from proxy.http.errors import ProxyError
from proxy.http.forwarding import ClientRequest
from proxy.http.headers import Headers
from proxy.http.upstream import UpstreamResponse
from proxy.turn.turn import MetaCall, Turn
from selection.types import SelectionError, TurnInput, decode_object


class Ending(StrEnum):
    """How an upstream round ended.

    ``complete``: a finished answer (``stop``, ``tool_calls``, ``end_turn``, ``tool_use``,
    ``response.completed``…). ``cut``: the upstream ended it short of a finished answer —
    the output limit (``length``, ``max_tokens``, Responses ``incomplete``) or a failed
    response: its meta-calls never run, the client is told what the upstream said.
    ``unfinished``: no end at all (no ``finish_reason``, no ``message_delta``, no terminal
    event).
    """

    COMPLETE = "complete"
    CUT = "cut"
    UNFINISHED = "unfinished"


@dataclass
class Reply:
    """What one upstream round answered, as the turn's rules read it.

    ``meta``: the meta-calls (hidden from the client), arguments checked
    (:func:`proxy.turn.turn.meta_call`). ``real_calls``: names of the client's tool calls.
    ``items``: the round's output as the re-issued request appends it, in the API's shape
    (meta-calls with the arguments they were run with). A bridge call
    (:meth:`proxy.turn.turn.Turn.is_bridge`) the proxy could turn into the client's call is
    one of ``real_calls``, under the real name; one it could not is one of ``meta``
    (answered with why, in a hidden round). ``error``: an error the upstream
    sent inside its answer, in the view's own terms (given back to
    :meth:`ClientView.fail_upstream`). ``problem``: why the answer cannot be interpreted
    (the client gets ``upstream_invalid_response``). ``normal_stop``: a streamed round
    that ended as a finished answer without calls (``stop``, ``end_turn``,
    ``response.completed``): with nothing shown, what a server that drops streamed tool
    calls sends.
    """

    meta: list[MetaCall] = field(default_factory=list)
    real_calls: list[str] = field(default_factory=list)
    items: list[Any] = field(default_factory=list)
    ending: Ending = Ending.COMPLETE
    error: Any = None
    problem: str | None = None
    normal_stop: bool = False


@dataclass(frozen=True)
class ClientOut:
    """Where a client view writes: ``send`` (ASGI), ``headers`` (the proxy's report
    headers, ``X-Tool-Pruning-*``, added to the response's), ``on_output`` (called once,
    when the first content or call reaches the client: the time to first token)."""

    send: Send
    headers: Headers
    on_output: Callable[[], None]


class ClientView(ABC):
    """What the client gets of one acting request over all its upstream rounds: one
    response, plain or streamed, in the API's shape.

    The round loop calls :meth:`start_round`, then :meth:`event` for each SSE event of
    the answer (comments go to :meth:`comment`) or :meth:`body` for a JSON answer, then
    :meth:`end_round`; after the last round :meth:`finish` (or :meth:`fail`)."""

    def __init__(self, turn: Turn, out: ClientOut) -> None:
        self.turn = turn
        self.out = out
        #: The round's stream ended with ``data: [DONE]``.
        self.done_marker = False
        #: Why the round's answer cannot be interpreted (set while reading).
        self.problem: str | None = None
        self._output_noted = False

    #: Whether SSE answers are read event by event (False: read whole, as a JSON body).
    reads_events = True

    @property
    @abstractmethod
    def started(self) -> bool:
        """Whether the client's response has started (status and headers sent)."""

    @property
    @abstractmethod
    def shown_output(self) -> bool:
        """Whether any content or call was shown (or will be, for a plain response)."""

    def note_output(self) -> None:
        """The first content or call reached the client (calls ``out.on_output`` once)."""
        if not self._output_noted:
            self._output_noted = True
            self.out.on_output()

    async def start_round(self, response: UpstreamResponse) -> None:
        """A round answered 200; its body follows."""
        self.done_marker = False
        self.problem = None

    async def comment(self, raw: bytes) -> None:  # noqa: B027 - a hook, no-op by default
        """An SSE comment of the upstream (a keep-alive): relayed to a streaming client."""

    @abstractmethod
    async def event(self, name: str | None, data: dict[str, Any]) -> bool:
        """One SSE event (``name``: its ``event:`` field; ``data`` its JSON object); False
        once the round's stream is over (an error event, a problem)."""

    def unreadable(self, what: str) -> None:
        """An event whose data is not a JSON object: it may carry any part of a hidden
        call, so the round ends with a problem (neither relayed nor guessed at)."""
        self.problem = f"the upstream sent an event that is not {what}"

    @abstractmethod
    async def body(self, raw: bytes) -> bool:
        """A round answered with one JSON body (decoded). False when it is not an answer in
        the API's shape (what the client gets of it is the round loop's rule:
        :mod:`proxy.turn.rounds`)."""

    @abstractmethod
    async def end_round(self) -> Reply:
        """The round's answer ended: what was held back is shown; the round as read (see
        :class:`Reply`)."""

    def upstream_error(self, status: int, body: bytes) -> Any:
        """An upstream's error answer (``status``, decoded ``body``) to a later round, in
        the terms :meth:`fail_upstream` takes: its OpenAI-shaped error object by default
        (:func:`upstream_error_object`)."""
        return upstream_error_object(status, body)

    async def answered(self, reply: Reply) -> None:  # noqa: B027 - a hook, no-op by default
        """``reply``'s meta-calls ran: show what the API shows of them (the client's own
        search tool answered by the proxy). Hidden by default."""

    @abstractmethod
    async def note(self, text: str) -> None:
        """Add ``text`` as the answer's content (a response otherwise left empty once its
        meta-calls are hidden)."""

    @abstractmethod
    async def finish(self, reply: Reply, only_meta: bool) -> None:
        """End the client's response after the last round (``reply``); ``only_meta``: that
        round made meta-calls only, all hidden."""

    @abstractmethod
    async def fail(self, error: ProxyError) -> None:
        """End the client's response with the proxy's ``error``."""

    @abstractmethod
    async def fail_upstream(self, error: Any) -> None:
        """End the client's response with the upstream's error (:attr:`Reply.error`, or
        :meth:`upstream_error`'s)."""


class ApiRequest(Protocol):
    """One request as its API read it (see the module docstring)."""

    #: What the planner reads of the request.
    input: TurnInput

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """The body of the next upstream round (JSON, UTF-8): pruned tools (with the
        meta-tools in their place when ``with_meta``: :meth:`Turn.block_entries`), the
        meta exchanges appended; every other field as the client sent it."""

    def append_exchange(self, turn: Turn, reply: Reply, results: Sequence[str]) -> list[Any]:
        """Record a round that ended in meta-calls and their results (one per call) for
        the re-issued request; returns what it appended (the API's messages or items:
        the exchange the client never sees, kept to stand in later requests' history)."""

    def meta_reply(self, turn: Turn, call: MetaCall) -> Reply:
        """A round whose answer is ``call`` alone, in the API's shape: a meta-call the proxy
        makes itself (a proactive load) appended as if the model had made it."""

    def history_length(self) -> int:
        """How many messages (or ``input`` items) of history the client sent: where this
        request's exchanges stand in its later requests."""

    def view(
        self, turn: Turn, out: ClientOut, first: UpstreamResponse, *, stream: bool
    ) -> ClientView:
        """The client's view of ``turn`` (one per response); ``first``: the first round's
        response (headers read), ``stream``: the client asked for a stream."""


class Api(Protocol):
    """One API's adapter (see the module docstring)."""

    #: The ``api`` label of metrics and the decision log.
    api: str

    def continued(self, request: ClientRequest) -> ClientRequest:
        """The request as the proxy plans and forwards it, pruned or not: the client's,
        or with the ids of server-side state the proxy showed the client mapped to the
        upstream's (Responses ``previous_response_id``)."""

    async def decode(self, raw: bytes) -> dict[str, Any] | None:
        """The body as the JSON object to act on, or None (passed through). Raises
        MalformedRequest (not a JSON object), RecursionError for one nested deeper than
        the decoder follows."""

    async def read(self, body: dict[str, Any]) -> ApiRequest:
        """What the proxy needs of ``body``. Raises MalformedRequest (a body the API
        refuses: forwarded unchanged), NothingToPrune (no tools to prune), CatalogError,
        UnreadableRequest (forward the original bytes), InvalidToolRequest (answered
        400)."""

    def stream_error(self, status: int, body: bytes) -> bytes:
        """An error answer (``status``, its JSON ``body``: the proxy's own error or the
        upstream's) as the API's SSE error event, for a stream the keep-alives started
        (:mod:`proxy.http.keepalive`)."""


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object (:func:`selection.types.decode_object`: the
    values ``json.loads`` gives, each member's bytes kept for writing the upstream's
    body). Raises MalformedRequest (not JSON, or not an object), RecursionError for one nested deeper than ``json.loads`` follows
    (:class:`proxy.turn.decisions.DecisionFlow` refuses it)."""
    body = decode_object(raw)  # as json.loads reads it, the members' bytes kept
    if body is None:
        raise MalformedRequest("the body is not a JSON object")
    return body


def upstream_error_object(status: int, body: bytes) -> dict[str, Any]:
    """The error object of an upstream error answer (``{"error": {...}}`` or
    ``{"error": "text"}``), else one that carries the status and body text."""
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        return error
    message = error if isinstance(error, str) else body.decode("utf-8", errors="replace")[:2000]
    return {"message": message, "type": "upstream_error", "param": None, "code": status}


class MalformedRequest(Exception):
    """The body is one its API refuses (not a JSON object, or its conversation — Chat
    Completions and Messages ``messages``, Responses ``input`` — of the wrong type):
    forwarded unchanged for the upstream to answer, counted and logged as ``malformed``
    (the message says what is wrong; never the body's content)."""


class UnreadableRequest(SelectionError):
    """The request has a shape the adapter cannot read: forwarded unchanged, counted as a
    fallback."""

    reason = "unreadable_request"
