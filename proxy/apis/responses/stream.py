"""Relaying a Responses API event stream with meta-call items hidden.

Event types and fields follow OpenAI's Responses streaming reference: ``response.created``
/ ``.in_progress`` / ``.queued``; item events (``response.output_item.added`` /
``.done`` with ``item``; ``response.content_part.*``, ``response.output_text.*``,
``response.function_call_arguments.delta`` / ``.done``, ``response.reasoning_*``…) that
name their item by ``output_index`` and/or ``item_id``; the terminal
``response.completed`` / ``.incomplete`` / ``.failed`` with the whole ``response``; and
``error``. Every event has a ``sequence_number`` (servers such as llama-server omit it,
and ``output_index``; what is absent stays absent).

The client sees one ``response.created`` (the first round's), items of every round with
meta-call items removed and ``output_index`` renumbered in order, ``sequence_number``
counting its own events, and one terminal event: the last round's, its ``output`` the
items the client saw, its ``usage`` summed over rounds and its ``id`` the one
``response.created`` gave (the SDKs' stream helpers require one id per stream; see
:class:`proxy.apis.responses.chains.ResponseChains` for what ``previous_response_id`` then
refers to). A hosted search the proxy ran is streamed, once run, as its
``tool_search_call`` and ``tool_search_output`` items; a note the proxy adds
(:func:`proxy.turn.rounds.empty_answer_note`) is one more output message.

A ``function_call`` of the bridge (:mod:`proxy.apis.responses.bridge`) is held, with every
item after it, until its ``response.output_item.done`` (or the round's terminal event)
gives its whole arguments: then the client gets the call it stands for, its events whole
(added, one arguments delta, done) at the next ``output_index``, and the items held
after it in the model's order; a bridge call that cannot be made is hidden as a meta-call.
Its ``response.function_call_arguments.*`` events are never relayed.

A round's ending is its terminal event: ``response.incomplete`` (or ``.failed``) is cut
off; a stream without one is unfinished.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.apis.responses.item_events import item_events
from proxy.apis.responses.search import is_search_call, shown_search_events
from proxy.http.errors import ProxyError
from proxy.turn.adapter import ClientOut, Ending, Reply, upstream_error_object
from proxy.turn.events import EventStreamView, typed_event
from proxy.turn.turn import Turn, add_usage

LIFECYCLE = ("response.created", "response.in_progress", "response.queued")
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")
TOKEN_EVENTS = ("response.output_text.delta", "response.function_call_arguments.delta",
                "response.refusal.delta", "response.custom_tool_call_input.delta")


#: Terminal statuses of a response cut short of its end.
CUT_STATUSES = ("incomplete", "failed", "cancelled")


def ending_of(status: Any, *, streamed: bool = True) -> Ending:
    """A round's ending from its response's ``status`` (None on a stream: it never sent a
    terminal event; a plain answer without one is taken as complete)."""
    if status is None and streamed:
        return Ending.UNFINISHED
    return Ending.CUT if status in CUT_STATUSES else Ending.COMPLETE


def note_item(text: str) -> dict[str, Any]:
    """An assistant output message holding ``text``."""
    return {"id": f"msg_tp_{uuid.uuid4().hex[:24]}", "type": "message", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def responses_error(status: int, body: bytes) -> dict[str, Any]:
    """An error answer (``status``, ``body``) as the Responses ``error`` event payload,
    carrying its error object (see :meth:`ResponsesStream.error_event`)."""
    error = upstream_error_object(status, body)
    return {"type": "error", "code": error.get("code"), "message": error.get("message"),
            "param": error.get("param"), "sequence_number": 0, "error": error}


class OutputReader(Protocol):
    """What the relay needs of the request's adapter
    (:class:`proxy.apis.responses.adapter.ResponsesRequest`)."""

    def is_meta_item(self, turn: Turn, item: Any) -> bool: ...

    def is_bridge_item(self, turn: Turn, item: Any) -> bool: ...

    def is_client_search(self, item: Any) -> bool: ...

    def client_output(self, turn: Turn, items: list[Any]) -> list[Any]: ...

    def client_name(self, name: str) -> str: ...

    def split_output(self, turn: Turn, output: list[Any]) -> Reply: ...

    def client_response(
        self, turn: Turn, response: dict[str, Any], output: list[Any],
        usage: dict[str, Any] | None, client_id: str | None = None,
    ) -> dict[str, Any]: ...


@dataclass
class _Item:
    """One output item of the current round: ``client_index`` is given when it is first
    shown. A bridge call (``bridge``) is ``settled`` once read: ``call`` the client's call
    it stands for (None: it cannot be made, and is ``hidden``)."""

    hidden: bool
    client_index: int | None
    item: dict[str, Any]
    arguments: list[str] = field(default_factory=list)
    bridge: bool = False
    settled: bool = False
    call: dict[str, Any] | None = None


class ResponsesStream(EventStreamView):
    """See the module docstring."""

    def __init__(self, turn: Turn, out: ClientOut, adapter: OutputReader) -> None:
        super().__init__(turn, out)
        self.adapter = adapter
        self.sequence = 0
        self.next_index = 0
        self.usage: dict[str, Any] | None = None
        self.output: list[Any] = []  # what the client saw, all rounds
        self.items: list[_Item] = []
        self.keys: dict[tuple[str, Any], _Item] = {}
        #: Events held behind a bridge call not read yet, in arrival order.
        self.held: list[tuple[_Item, dict[str, Any]]] = []
        self.terminal: dict[str, Any] | None = None
        #: The response id the client got in ``response.created`` (kept to the end).
        self.client_id: str | None = None
        #: The upstream numbers its events (``sequence_number``): so are the proxy's.
        self.numbered = False

    def begin_round(self) -> None:
        self.items, self.keys, self.terminal, self.held = [], {}, None, []

    # --- events -----------------------------------------------------------------
    def on_event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        kind = data.get("type")
        if kind in LIFECYCLE:
            if self.round > 1:
                return []
            if isinstance(data.get("response"), Mapping):
                response = self.adapter.client_response(
                    self.turn, dict(data["response"]), data["response"].get("output", []), None
                )
                self.client_id = self.client_id or response.get("id")
                data = {**data, "response": response}
            return [self._numbered(data)]
        if kind in TERMINAL:
            self.terminal = data
            return self._settle_all()
        item = self._item_of(data)
        if item is None:
            if _names_an_item(data) and any(k.hidden or k.bridge for k in self.items):
                # It may belong to the hidden call: neither relayed nor guessed at.
                self.problem = "the upstream sent an event about an output item it never opened"
                return []
            return [self._numbered(data)]
        if item.hidden:
            self._collect(item, data)
            return []
        if item.bridge or self.held:  # the client gets the calls in the model's order
            self.held.append((item, data))
            if item.bridge:
                self._collect(item, data)
                if kind == "response.output_item.done":
                    self._settle(item)
                    return self._release()
            return []
        return self._shown(item, data)

    def _shown(self, item: _Item, data: dict[str, Any]) -> list[dict[str, Any]]:
        """One event of an item the client sees, as the client sees it."""
        kind = data.get("type")
        if item.client_index is None:
            item.client_index = self._next()
        if kind in ITEM_EVENTS:
            data = {**data, "item": self.adapter.client_output(self.turn, [data["item"]])[0]}
        elif self.adapter.is_client_search(item.item):
            return []  # a tool_search_call has no argument events
        elif isinstance(data.get("name"), str):  # some servers name the item's tool
            data = {**data, "name": self.adapter.client_name(data["name"])}
        if "output_index" in data:
            data = {**data, "output_index": item.client_index}
        if kind in TOKEN_EVENTS and data.get("delta"):
            self.first_token = True
        return [self._numbered(data)]

    def _next(self) -> int:
        """The next ``output_index`` of the client's output."""
        self.next_index += 1
        return self.next_index - 1

    def _settle(self, item: _Item) -> None:
        """Read a bridge call whose arguments are whole: the client's call, or hidden."""
        if item.arguments and not item.item.get("arguments"):
            item.item["arguments"] = "".join(item.arguments)
        shown = self.adapter.client_output(self.turn, [item.item])
        item.settled, item.call, item.hidden = True, shown[0] if shown else None, not shown

    def _settle_all(self) -> list[dict[str, Any]]:
        """At the round's end: every bridge call read (its item as the terminal event's
        ``output`` has it, else as streamed), every held event released."""
        response = self.terminal.get("response") if self.terminal else None
        output = response.get("output") if isinstance(response, Mapping) else None
        final = {item.get("id"): item for item in output or () if isinstance(item, Mapping)}
        for item in self.items:
            if item.bridge and not item.settled:
                item.item = dict(final.get(item.item.get("id"), item.item))
                self._settle(item)
        return self._release()

    def _release(self) -> list[dict[str, Any]]:
        """The held events the client may see now, in order, up to the first bridge call
        not read yet: a bridge call made the client's is shown whole where it stood."""
        shown: list[dict[str, Any]] = []
        while self.held:
            item, data = self.held[0]
            if item.bridge and not item.settled:
                break
            del self.held[0]
            if item.bridge and item.call is not None and item.client_index is None:
                item.client_index = self._next()
                self.first_token = True
                shown += [self._numbered({**event, "sequence_number": 0} if self.numbered else event)
                          for event in item_events(item.client_index, item.call)]
            elif not item.bridge and not item.hidden:
                shown += self._shown(item, data)
        return shown

    def error_event(self, error: ProxyError) -> bytes:
        """The Responses ``error`` event (``code``, ``message``, ``param``,
        ``sequence_number``), with the OpenAI error object as ``error`` too: the
        ``openai`` SDKs raise ``APIError`` on an event that carries one."""
        payload = {
            "type": "error", "code": error.code, "message": error.message, "param": None,
            "sequence_number": self.sequence,
            "error": {"message": error.message, "type": error.error_type, "param": None, "code": error.code},
        }
        self.sequence += 1
        return typed_event(payload)

    def answered_events(self, reply: Reply) -> list[dict[str, Any]]:
        """Item events of the hosted searches among ``reply``'s meta-calls, which have run
        (see the module docstring); their items join the client's output."""
        searches = [item for item in reply.items if is_search_call(self.turn, item)]
        return self._added(self.adapter.client_output(self.turn, searches))

    def answer_events(self, answer: dict[str, Any]) -> list[dict[str, Any]] | None:
        """A response's events: ``response.created`` (no output yet), each output item
        added, its text or arguments given whole in one delta, done; the terminal event
        its status names. Each carries a ``sequence_number`` (renumbered as relayed)."""
        output = answer.get("output")
        if not isinstance(output, list) or not all(isinstance(i, Mapping) for i in output):
            return None
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}}
        ]
        for index, item in enumerate(output):
            events += item_events(index, item)
        status = answer.get("status")
        terminal = f"response.{status}" if f"response.{status}" in TERMINAL else "response.completed"
        events.append({"type": terminal, "response": answer})
        return [{**event, "sequence_number": 0} for event in events]

    def note_events(self, text: str) -> list[dict[str, Any]]:
        return self._added([note_item(text)])

    def _added(self, items: list[Any]) -> list[dict[str, Any]]:
        """Events that add ``items`` whole to the client's output."""
        events = shown_search_events(items, self.next_index)
        self.next_index += len(items)
        self.output.extend(items)
        self.first_token = self.first_token or bool(items)
        return [self._numbered({**event, "sequence_number": 0} if self.numbered else event)
                for event in events]

    def upstream_error(self, status: int, body: bytes) -> Any:
        return responses_error(status, body)

    def next_event(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._numbered(payload)

    def _numbered(self, data: dict[str, Any]) -> dict[str, Any]:
        if "sequence_number" not in data:
            return data
        self.numbered = True
        data = {**data, "sequence_number": self.sequence}
        self.sequence += 1
        return data

    def _item_of(self, data: dict[str, Any]) -> _Item | None:
        """The item an event is about (registered on its first item event), or None."""
        by_index = ("index", data["output_index"]) if "output_index" in data else None
        payload = data.get("item") if data.get("type") in ITEM_EVENTS else None
        item_id = payload.get("id") if isinstance(payload, Mapping) else data.get("item_id")
        by_id = ("id", item_id) if isinstance(item_id, str) else None
        known = self.keys.get(by_index) if by_index else None
        known = known or (self.keys.get(by_id) if by_id else None)
        if known is None and isinstance(payload, Mapping):
            hidden = self.adapter.is_meta_item(self.turn, payload)
            bridge = not hidden and self.adapter.is_bridge_item(self.turn, payload)
            known = _Item(hidden, None, dict(payload), bridge=bridge)
            self.items.append(known)
        if known is not None:
            if isinstance(payload, Mapping):
                known.item = dict(payload)
            for key in (by_index, by_id):
                if key is not None:
                    self.keys[key] = known
        return known

    @staticmethod
    def _collect(item: _Item, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "response.function_call_arguments.delta":
            item.arguments.append(str(data.get("delta", "")))
        elif kind == "response.function_call_arguments.done" and isinstance(data.get("arguments"), str):
            item.arguments = [data["arguments"]]

    # --- round ends -------------------------------------------------------------
    def _round_output(self) -> list[Any]:
        """The round's output items: the terminal event's, else those streamed."""
        response = self.terminal.get("response") if self.terminal else None
        output = response.get("output") if isinstance(response, Mapping) else None
        if isinstance(output, list):
            return output
        items = []
        for item in self.items:
            if (item.hidden or item.bridge) and item.arguments and not item.item.get("arguments"):
                item.item["arguments"] = "".join(item.arguments)
            items.append(item.item)
        return items

    def round_reply(self) -> Reply:
        output = self._round_output()
        response = self.terminal.get("response") if self.terminal else None
        if isinstance(response, Mapping):
            self.usage = add_usage(self.usage, response.get("usage"))
        self.output += self.adapter.client_output(
            self.turn, [item for item in output if not is_search_call(self.turn, item)]
        )
        reply = self.adapter.split_output(self.turn, output)
        status = response.get("status") if isinstance(response, Mapping) else None
        if self.terminal is not None and status is None:  # the event's type says it
            status = str(self.terminal.get("type")).removeprefix("response.")
        reply.ending = ending_of(status)
        reply.normal_stop = self.terminal is not None and self.terminal.get("type") == "response.completed"
        return reply

    def finish_events(self, reply: Reply) -> list[dict[str, Any]]:
        if self.terminal is None or not isinstance(self.terminal.get("response"), Mapping):
            return self._settle_all()  # no terminal event from the upstream: none to the client
        response = self.adapter.client_response(
            self.turn, dict(self.terminal["response"]), self.output, self.usage, self.client_id
        )
        return [self._numbered({**self.terminal, "response": response})]


def _names_an_item(data: Mapping[str, Any]) -> bool:
    """Whether an event is about one output item (by index, id, or its arguments)."""
    kind = str(data.get("type"))
    return "output_index" in data or "item_id" in data or kind.startswith("response.function_call_arguments")
