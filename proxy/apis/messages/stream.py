"""Relaying an Anthropic Messages event stream with meta-call blocks hidden.

Events follow Anthropic's streaming reference: ``message_start`` (``message`` with
``usage``), ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``, ``thinking_delta``, ``signature_delta``…) / ``content_block_stop``
keyed by block ``index``, ``message_delta`` (``delta.stop_reason``, cumulative ``usage``),
``message_stop``, ``ping`` and ``error``.

The client sees one ``message_start`` (the first round's), the blocks of every round
with meta-call ``tool_use`` blocks removed and ``index`` renumbered in order, and one
``message_delta`` + ``message_stop``: usage summed over rounds, ``stop_reason``
``tool_use`` only if the last round left it a ``tool_use`` block. A search the proxy ran
for the client's tool search tool is streamed, once run, as its ``server_tool_use`` and
``tool_search_tool_result`` blocks (:mod:`proxy.apis.messages.search`). A note the
proxy adds (:func:`proxy.turn.rounds.empty_answer_note`) is one more text block.

A ``tool_use`` block of the bridge (a call of a tool delivered in the conversation:
:mod:`proxy.apis.messages.bridge`) is held to its ``content_block_stop`` (or the round's
``message_delta``), with every block started after it, so the client gets the blocks in
the model's order; then it is shown as the call it stands for, started with an empty
``input`` and given whole in one ``input_json_delta``, or, when it cannot be made, it is
a meta-call, never shown.

A round's ending is its ``message_delta``'s ``stop_reason`` (``max_tokens`` is cut off);
a stream without one is unfinished.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.apis.messages.bridge import client_call, is_bridge_block
from proxy.apis.messages.search import is_search_call, shown_search, shown_search_events
from proxy.http.errors import ANTHROPIC_ERROR_TYPES
from proxy.turn.adapter import ClientOut, Ending, Reply, upstream_error_object
from proxy.turn.events import EventStreamView
from proxy.turn.turn import Turn, add_usage

#: ``stop_reason`` when the model stopped to call tools, and at a natural end.
TOOL_USE, END_TURN = "tool_use", "end_turn"
#: Delta type → the block field its text accumulates into.
_DELTA_FIELDS = {
    "text_delta": ("text", "text"),
    "input_json_delta": ("partial_json", "input"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
}


#: Stop reasons of an answer cut short of its end: the output limit, the context window.
CUT_REASONS = ("max_tokens", "model_context_window_exceeded")


def ending_of(reason: Any) -> Ending:
    """A round's ending from its ``stop_reason`` (None: the stream never said)."""
    if reason is None:
        return Ending.UNFINISHED
    return Ending.CUT if reason in CUT_REASONS else Ending.COMPLETE


class ContentReader(Protocol):
    """What the relay needs of the request's adapter
    (:class:`proxy.apis.messages.adapter.MessagesRequest`)."""

    def is_meta_block(self, turn: Turn, block: Any) -> bool: ...

    def split_content(self, turn: Turn, content: list[Any]) -> Reply: ...


@dataclass
class _Block:
    """One content block of the current round, rebuilt from its deltas. ``hidden``: a
    meta-call's; ``pending``: a bridge call not yet read; ``waiting``: its events not yet
    relayed (held behind a pending bridge call); ``client_index``: its ``index`` for the
    client, once relayed."""

    hidden: bool
    block: dict[str, Any]
    pending: bool = False
    client_index: int | None = None
    parts: dict[str, list[str]] = field(default_factory=dict)
    waiting: list[dict[str, Any]] = field(default_factory=list)

    def add(self, delta: Mapping[str, Any]) -> None:
        spec = _DELTA_FIELDS.get(str(delta.get("type")))
        if spec is not None and isinstance(delta.get(spec[0]), str):
            self.parts.setdefault(spec[1], []).append(delta[spec[0]])

    def input_text(self) -> str:
        """The block's ``input`` as the model wrote it (JSON text, maybe broken)."""
        parts = self.parts.get("input")
        return "".join(parts) if parts else json.dumps(self.block.get("input", {}))

    def final(self) -> dict[str, Any]:
        """The block as a whole (``input`` parsed from its JSON deltas; when that JSON is
        malformed, ``{}``, or the text itself for a hidden block: its meta-call is told
        what was wrong with it)."""
        block = dict(self.block)
        for name, parts in self.parts.items():
            text = "".join(parts)
            if name == "input":
                try:
                    block["input"] = json.loads(text) if text.strip() else block.get("input", {})
                except (json.JSONDecodeError, RecursionError):
                    block["input"] = text if self.hidden else {}
            else:
                block[name] = block.get(name, "") + text if name != "signature" else text
        return block


class MessagesStream(EventStreamView):
    """See the module docstring."""

    def __init__(self, turn: Turn, out: ClientOut, adapter: ContentReader) -> None:
        super().__init__(turn, out)
        self.adapter = adapter
        self.next_index = 0
        self.usage: dict[str, Any] | None = None
        self.blocks: dict[Any, _Block] = {}
        self.round_usage: dict[str, Any] = {}
        self.delta: dict[str, Any] | None = None
        self.notes: list[dict[str, Any]] = []

    def begin_round(self) -> None:
        self.blocks, self.round_usage, self.delta = {}, {}, None

    def on_event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, Mapping) else None
            self.round_usage = dict(usage) if isinstance(usage, Mapping) else {}
            return [data] if self.round == 1 else []
        if kind in ("message_delta", "message_stop"):
            if kind == "message_delta":
                self.delta = data
            return self._released(ended=True)
        if kind == "content_block_start" and isinstance(data.get("content_block"), Mapping):
            block = dict(data["content_block"])
            pending = is_bridge_block(self.turn, block)
            hidden = not pending and self.adapter.is_meta_block(self.turn, block)
            self.blocks[data.get("index")] = _Block(hidden, block, pending)
        block = self.blocks.get(data.get("index")) if "index" in data else None
        if block is None:
            if "index" in data and any(known.hidden or known.pending for known in self.blocks.values()):
                # It may belong to a hidden or held call: neither relayed nor guessed at.
                self.problem = "the upstream sent an event about a content block it never started"
                return []
            return [data]  # ping, and events this relay does not know
        if kind == "content_block_delta" and isinstance(data.get("delta"), Mapping):
            block.add(data["delta"])
        if block.hidden:
            return []
        if block.pending:
            if kind == "content_block_stop":
                self._make_call(block)
        else:
            block.waiting.append(data)
        return self._released()

    def _make_call(self, block: _Block) -> None:
        """A bridge call read whole: the client's call, given whole once relayed; a
        hidden meta-call when it cannot be made."""
        block.pending = False
        call = client_call(self.turn, block.block, block.input_text())
        if call is None:
            block.hidden = True
            return
        arguments = json.dumps(call["input"], ensure_ascii=False)
        block.block, block.parts = call, {"input": [arguments]}
        block.waiting = [
            {"type": "content_block_start", "content_block": {**call, "input": {}}},
            {"type": "content_block_delta",
             "delta": {"type": "input_json_delta", "partial_json": arguments}},
            {"type": "content_block_stop"},
        ]

    def _released(self, *, ended: bool = False) -> list[dict[str, Any]]:
        """The events now relayed: those of each block in the order blocks started, up to
        a bridge call not read yet (``ended``: the round ended, every one is read now),
        each block numbered for the client as its first event goes."""
        events: list[dict[str, Any]] = []
        for block in self.blocks.values():
            if block.pending and ended:
                self._make_call(block)
            if block.pending:
                break
            if block.hidden or not block.waiting:
                continue
            if block.client_index is None:
                block.client_index, self.next_index = self.next_index, self.next_index + 1
            for event in block.waiting:
                delta = event.get("delta")
                if isinstance(delta, Mapping) and delta.get("type") in ("text_delta", "input_json_delta"):
                    self.first_token = True
                events.append({**event, "index": block.client_index})
            block.waiting = []
        return events

    def round_reply(self) -> Reply:
        usage = dict(self.round_usage)
        delta_usage = self.delta.get("usage") if self.delta else None
        if isinstance(delta_usage, Mapping):
            usage.update({key: value for key, value in delta_usage.items() if value is not None})
        self.usage = add_usage(self.usage, usage)
        ordered = sorted(self.blocks.items(), key=lambda entry: _order(entry[0]))
        reply = self.adapter.split_content(self.turn, [block.final() for _, block in ordered])
        delta = self.delta.get("delta") if self.delta else None
        reason = delta.get("stop_reason") if isinstance(delta, Mapping) else None
        reply.ending = ending_of(reason)
        reply.normal_stop = reason == END_TURN
        return reply

    def answered_events(self, reply: Reply) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for block in reply.items:
            if is_search_call(self.turn, block):
                pair = shown_search(self.turn, block)
                events += shown_search_events(pair, self.next_index)
                self.next_index += len(pair)
                self.first_token = self.first_token or bool(pair)
        return events

    def answer_events(self, answer: dict[str, Any]) -> list[dict[str, Any]] | None:
        """A message's events: ``message_start`` (no content yet), each block started,
        its text or input given whole in one delta, stopped; ``message_delta`` with the
        stop reason and usage; ``message_stop``."""
        content = answer.get("content")
        if not isinstance(content, list) or not all(isinstance(b, Mapping) for b in content):
            return None
        start = {**answer, "content": [], "stop_reason": None, "stop_sequence": None}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for index, block in enumerate(content):
            opened, delta = dict(block), None
            if block.get("type") == "text":
                opened["text"] = ""
                delta = {"type": "text_delta", "text": block.get("text", "")}
            elif "input" in block:
                opened["input"] = {}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            if delta is not None:
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            events.append({"type": "content_block_stop", "index": index})
        stop = {"stop_reason": answer.get("stop_reason"), "stop_sequence": answer.get("stop_sequence")}
        events.append({"type": "message_delta", "delta": stop, "usage": answer.get("usage") or {}})
        return [*events, {"type": "message_stop"}]

    def note_events(self, text: str) -> list[dict[str, Any]]:
        block = {"type": "text", "text": text}
        self.notes.append(block)
        index, self.next_index = self.next_index, self.next_index + 1
        self.first_token = True
        return [
            {"type": "content_block_start", "index": index,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "text_delta", "text": text}},
            {"type": "content_block_stop", "index": index},
        ]

    def upstream_error(self, status: int, body: bytes) -> Any:
        return anthropic_error(status, body)

    def finish_events(self, reply: Reply) -> list[dict[str, Any]]:
        if self.delta is None:
            return []  # the upstream ended without its message_delta: so does the client
        visible = [block.block for block in self.blocks.values() if not block.hidden] + self.notes
        delta = dict(self.delta.get("delta") or {})
        delta["stop_reason"] = stop_reason(delta.get("stop_reason"), visible)
        event = {**self.delta, "delta": delta}
        if self.usage is not None:
            event["usage"] = self.usage
        return [event, {"type": "message_stop"}]


def anthropic_error(status: int, body: bytes) -> dict[str, Any]:
    """An error answer (``status``, ``body``) as Anthropic's ``error`` event payload: its
    own ``error`` object when the answer speaks Anthropic, else one with its message and
    the type Anthropic gives the status."""
    error = upstream_error_object(status, body)
    if not isinstance(error.get("type"), str) or "message" not in error:
        default = "invalid_request_error" if status < 500 else "api_error"
        error = {"type": ANTHROPIC_ERROR_TYPES.get(status, default),
                 "message": str(error.get("message", ""))}
    return {"type": "error", "error": {"type": error["type"], "message": error["message"]}}


def stop_reason(reason: Any, content: Sequence[Any]) -> Any:
    """``reason`` as the client expects it from the blocks it got: ``tool_use`` only
    with a ``tool_use`` block (else the turn ended: ``end_turn``)."""
    if reason == TOOL_USE and not any(
        isinstance(block, Mapping) and block.get("type") == "tool_use" for block in content
    ):
        return END_TURN
    return reason


def _order(index: Any) -> tuple[int, Any]:
    return (0, index) if isinstance(index, int) else (1, str(index))
