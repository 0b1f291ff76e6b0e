"""One upstream round read into what the client sees and what the proxy acts on.

Takes the round's ``chat.completion.chunk`` objects (an SSE answer) or its one
``chat.completion`` (a JSON answer, read as a single chunk whose delta is the whole
message), per OpenAI's Chat Completions reference. For each it returns the choice deltas
the client may see: ``role`` dropped (the client writer sends it once), null and empty
fields dropped, tool calls assembled and meta-calls hidden (:mod:`proxy.apis.chat.calls`),
meta-calls written as text taken out of ``content`` (:mod:`proxy.apis.chat.text_calls`),
other fields (``reasoning_content``, ``logprobs``…) passed on. ``finish_reason`` is
kept, not shown: the round's outcome decides what the client is told.

What cannot be interpreted is never guessed at: an event that is not a chunk, or a tool
call whose name never came, makes the round's ``problem`` (the client is told, with the
API's error, instead of being shown an invented call or the tail of a hidden one). A
tool-call entry with neither a name nor arguments (``{"id": "", "type": "function"}``)
carries nothing to guess at: it is dropped, with a note for the decision log (``notes``),
and a ``finish_reason`` of ``tool_calls`` left without any call becomes ``stop``.

Within a round, ``usage`` is the last one the upstream sent (vLLM's
``continuous_usage_stats`` and some servers put a cumulative ``usage`` on every chunk);
rounds are added up by the caller. ``usage_apart`` says where it came: in a chunk of its
own with empty ``choices`` (OpenAI's ``stream_options.include_usage``), or in a chunk with
choices (llama-server puts ``usage`` and ``timings`` in its finish chunk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.apis.chat.calls import CallAssembler, new_call_id
from proxy.apis.chat.text_calls import TextCallFilter
from proxy.turn.turn import MetaCall, meta_call
from selection.types import BridgedCall

#: Chunk fields the reader handles itself; others are kept as ``extras``.
_STANDARD = frozenset({"id", "object", "created", "model", "system_fingerprint", "choices", "usage", "error"})
_IDENTITY = ("id", "created", "model", "system_fingerprint")
_CHOICE_OWN = frozenset({"index", "delta", "message", "finish_reason"})


class RoundReader:
    """Reads one round; ``is_meta(name)`` says whether a function name is a meta-tool's,
    ``is_bridge(name)`` whether it is the bridge's, and ``resolve(call_id, arguments)`` reads a
    bridge call into the client's call (:meth:`proxy.apis.chat.calls.CallAssembler.resolve_bridges`).

    After the round: ``identity`` (``id``, ``created``, ``model``, ``system_fingerprint``
    of its first chunk), ``usage`` (the last one), ``finish`` (choice index →
    ``finish_reason``), ``error`` (an error object the upstream sent mid-stream),
    ``extras`` (other top-level fields, latest value), ``content`` (choice index → the
    text shown), ``problem`` (why the round cannot be served, or None), ``usage_apart``
    (the last usage came in a chunk without choices), ``notes`` (what was dropped, for
    the decision log).
    """

    def __init__(
        self, is_meta: Callable[[str | None], bool],
        is_bridge: Callable[[str | None], bool] = lambda name: False,
        resolve: Callable[[str, str], BridgedCall] | None = None,
    ) -> None:
        self.is_meta = is_meta
        self.resolve = resolve
        self.calls = CallAssembler(is_meta, is_bridge)
        self.identity: dict[str, Any] | None = None
        self.usage: Any = None
        self.finish: dict[int, str] = {}
        self.error: Any = None
        self.extras: dict[str, Any] = {}
        self.content: dict[int, list[str]] = {}
        self.done = False
        #: Whether the round was an SSE stream (not one JSON body).
        self.streamed = False
        self.problem: str | None = None
        self.usage_apart = False
        self.notes: list[str] = []
        self._filters: dict[int, TextCallFilter] = {}

    def read_chunk(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """Read one chunk; return the client's choice objects (``index``, ``delta``…)."""
        if self.identity is None:
            self.identity = {key: chunk[key] for key in _IDENTITY if chunk.get(key) is not None}
        if chunk.get("error"):
            self.error = chunk["error"]
            return []
        choices = chunk.get("choices")
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
            self.usage_apart = not (isinstance(choices, list) and choices)
        self.extras.update((k, v) for k, v in chunk.items() if k not in _STANDARD and v is not None)
        shown = []
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            index = index if isinstance(index, int) and not isinstance(index, bool) else 0
            delta = choice.get("delta")
            visible = self._delta(index, delta if isinstance(delta, dict) else {})
            if choice.get("finish_reason") is not None:
                self.finish[index] = choice["finish_reason"]
            fields = {k: v for k, v in choice.items() if k not in _CHOICE_OWN and v is not None}
            if visible or fields.get("logprobs"):
                shown.append({"index": index, "delta": visible, **fields})
        return shown

    def read_completion(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Read a whole ``chat.completion`` as one chunk."""
        choices = []
        for choice in data.get("choices") or []:
            if isinstance(choice, dict):
                message = choice.get("message")
                delta = dict(message) if isinstance(message, dict) else {}
                choices.append({**choice, "delta": delta})
        return self.read_chunk({**data, "choices": choices})

    def unreadable_event(self) -> None:
        """The stream had an event that is not a ``chat.completion.chunk`` (not JSON, or
        not an object): it may have carried any part of any call, so the round ends."""
        self.problem = "the upstream sent an event that is not a chat.completion.chunk (not a JSON object)"

    def end(self) -> list[dict[str, Any]]:
        """The round's stream ended: text held back is shown; a call whose name never came
        makes the round's ``problem`` (nothing more is shown then)."""
        if self.problem is not None:
            return []
        dropped = self.calls.drop_empty()
        if dropped:
            entries = "entry" if dropped == 1 else "entries"
            self.notes.append(f"dropped {dropped} tool-call {entries} with neither a function "
                              "name nor arguments")
            for index, finish in self.finish.items():
                if finish in ("tool_calls", "function_call") and not any(
                    call.choice == index for call in self.calls.calls
                ):
                    self.finish[index] = "stop"
        if self.calls.unnamed():
            self.problem = "the upstream's answer has a tool call without a name"
            return []
        shown = []
        if self.resolve is not None:
            for choice, item in self.calls.resolve_bridges(self.resolve):
                shown.append({"index": choice, "delta": {"tool_calls": [item]}})
        for index, text_filter in self._filters.items():
            text = text_filter.end()
            if text:
                self.content.setdefault(index, []).append(text)
                shown.append({"index": index, "delta": {"content": text}})
        return shown

    def meta_calls(self) -> list[MetaCall]:
        """The round's meta-calls, native ones first, then those written as text."""
        calls = [meta_call(c.call_id(), c.name or "", c.arguments_text) for c in self.calls.meta_calls()]
        for text_filter in self._filters.values():
            calls.extend(meta_call(new_call_id(), t.name, t.arguments) for t in text_filter.calls)
        return calls

    def real_call_names(self) -> list[str]:
        return [call.name for call in self.calls.real_calls() if call.name]

    def has_real_calls(self) -> bool:
        return bool(self.calls.real_calls())

    def content_text(self, index: int = 0) -> str | None:
        """The text the client was shown for choice ``index`` this round, or None."""
        parts = self.content.get(index)
        return "".join(parts) if parts else None

    def _delta(self, index: int, delta: dict[str, Any]) -> dict[str, Any]:
        visible: dict[str, Any] = {}
        for key, value in delta.items():
            if key == "role" or value is None or value == "":
                continue
            if key == "content" and isinstance(value, str):
                text_filter = self._filters.setdefault(index, TextCallFilter(self.is_meta))
                text = text_filter.feed(value)
                if text:
                    self.content.setdefault(index, []).append(text)
                    visible["content"] = text
            elif key == "tool_calls":
                items = self.calls.feed(index, value)
                if items:
                    visible["tool_calls"] = items
            elif key == "function_call":
                item = self.calls.feed_legacy(index, value)
                if item:
                    visible["function_call"] = item
            else:
                visible[key] = value
        return visible
