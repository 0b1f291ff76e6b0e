"""Tool-call deltas of one upstream round assembled into calls, and the deltas the client
sees of them (meta-calls hidden, real calls renumbered).

Shapes follow OpenAI's ``chat.completion.chunk`` reference: ``delta.tool_calls`` items
``{"index", "id"?, "type"?, "function": {"name"?, "arguments"?}}``, the legacy
``delta.function_call`` ``{"name"?, "arguments"?}``.

Keying rules. An item belongs to the call keyed by (choice index, call index, id): the
call index is the item's ``index`` (its position in the delta's list when absent, as
Ollama sent before v0.4.7); the id is the item's ``id`` (or ``function.id``, where
llama-server put it before May 2025). An id or name that is null or ``""`` is absent
(SGLang sends ``"id": null`` on continuations, vLLM ``"id": ""``, LM Studio
``"name": ""``).

1. An item whose id is the id of a call of its choice continues that call, whatever its
   index (SGLang repeats the id on every delta).
2. An item with a new id opens a new call, even at an index already used (Ollama and some
   vLLM parsers put every call of a turn at index 0, each with its own id) — unless the
   call at that index has no id yet and no other name, when the id is late and adopted.
3. An item without an id continues the latest call at its (choice, index) (OpenAI,
   vLLM, llama-server: the id comes on the first delta only)...
4. ...unless it names a function other than that call's: then it opens a new call (whole
   calls in one chunk each, at one index, without ids). At an index where its choice has
   no call yet, an item with neither id nor name continues the choice's only call when
   it has exactly one (a server that renumbered the call after its first delta: opened at
   index 9, its argument fragments at index 0); with none or several, it opens a new call
   (whose name never comes).
5. A name equal to the call's name is a repetition, never a fragment (llama-server before
   May 2025 repeated it on every delta); arguments are appended as they come, an object
   (not a string) serialised.

The client sees each real call once its name is known: an opening item (``index``
renumbered from 0 in the order calls were named, ``id`` — synthesised when the upstream
gave none —, ``type``, ``function.name``, the arguments so far), then argument fragments
only. Meta-calls are never shown. A bridge call (a call of ``call_tool``, standing for a
tool delivered in the conversation: :mod:`selection.clients.bridge`) is held to the end of
the round, with every real call after it in its choice (so the client gets the calls in
the model's order); then it is shown as the call it stands for, in one opening item with
its whole arguments (:meth:`CallAssembler.resolve_bridges`), or, when it cannot be made,
it becomes a meta-call the proxy answers. A call whose name never came is never shown: with no
arguments either (an entry such as ``{"id": "", "type": "function"}``) it is an empty
entry, dropped (:meth:`CallAssembler.drop_empty`); with arguments, the proxy does not
invent a name, nor tell it from the tail of a hidden call, so the round cannot be served
(:meth:`CallAssembler.unnamed`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.turn.turn import arguments_text
from selection.types import BridgedCall

#: The call index standing for the legacy ``function_call`` delta.
LEGACY_INDEX = -1


def new_call_id() -> str:
    """A tool-call id in OpenAI's ``call_`` form (for calls the upstream gave none)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _present(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class Call:
    """One call of a round. ``upstream_id``: the id the upstream gave (for keying);
    ``id``: the id the client and the re-issued history use (set when first shown or
    read). ``meta``: None until the name is known."""

    choice: int
    index: int
    upstream_id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    meta: bool | None = None
    bridge: bool = False
    id: str | None = None
    client_index: int | None = None
    shown: int = -1  # fragments shown to the client; -1: not opened yet

    @property
    def legacy(self) -> bool:
        return self.index == LEGACY_INDEX

    @property
    def arguments_text(self) -> str:
        return "".join(self.arguments)

    def call_id(self) -> str:
        if self.id is None:
            self.id = self.upstream_id or new_call_id()
        return self.id


class CallAssembler:
    """Assembles the tool-call deltas of one round; see the module docstring.

    ``is_meta(name)``: whether a function name is a meta-tool's; ``is_bridge(name)``:
    whether it is the bridge's.
    """

    def __init__(
        self, is_meta: Callable[[str | None], bool],
        is_bridge: Callable[[str | None], bool] = lambda name: False,
    ) -> None:
        self.is_meta = is_meta
        self.is_bridge = is_bridge
        self.calls: list[Call] = []
        self._latest: dict[tuple[int, int], Call] = {}
        self._next_client_index: dict[int, int] = {}
        #: Choices with a bridge call: their later real calls are held to the round's end.
        self._holding: set[int] = set()

    def feed(self, choice: int, items: Any) -> list[dict[str, Any]]:
        """Take one ``delta.tool_calls`` list; return the items the client sees."""
        shown: list[dict[str, Any]] = []
        for position, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            function = item.get("function") if isinstance(item.get("function"), dict) else {}
            index = item.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                index = position
            upstream_id = _present(item.get("id")) or _present(function.get("id"))
            call = self._call_for(choice, index, upstream_id, _present(function.get("name")))
            self._add(call, function)
            shown.extend(self._shown_items(call))
        return shown

    def feed_legacy(self, choice: int, function_call: Any) -> dict[str, Any] | None:
        """Take one ``delta.function_call``; return the ``function_call`` the client sees."""
        if not isinstance(function_call, dict):
            return None
        call = self._latest.get((choice, LEGACY_INDEX))
        if call is None:
            call = self._open(choice, LEGACY_INDEX, None)
        self._add(call, function_call)
        return self._shown_legacy(call)

    def drop_empty(self) -> int:
        """At the end of the round: drop the calls that never got a name nor arguments
        (empty entries, never shown); returns how many."""
        kept = [c for c in self.calls if c.meta is not None or c.arguments_text.strip()]
        dropped = len(self.calls) - len(kept)
        self.calls = kept
        return dropped

    def unnamed(self) -> list[Call]:
        """At the end of the round: the calls whose name never came (never shown)."""
        return [call for call in self.calls if call.meta is None]

    def resolve_bridges(self, resolve: Callable[[str, str], BridgedCall]) -> list[tuple[int, dict[str, Any]]]:
        """At the end of the round: each bridge call made the call it stands for
        (``resolve`` reads its id and arguments) or, when it cannot be or stands for a meta-tool's
        call, a meta-call; returns the
        held calls' opening items (``(choice, item)``, whole arguments), in call order."""
        shown: list[tuple[int, dict[str, Any]]] = []
        for call in self.calls:
            if call.bridge:
                resolved = resolve(call.call_id(), call.arguments_text)
                call.bridge = False
                if not resolved.client_call:  # refused, or a meta-tool's: the proxy answers
                    call.meta = True
                    continue
                call.name, call.arguments = resolved.name, [resolved.arguments]
            if call.meta is False and call.shown < 0 and call.choice in self._holding:
                self._number(call)
                shown.extend((call.choice, item) for item in self._shown_items(call, held=False))
        self._holding.clear()
        return shown

    def meta_calls(self) -> list[Call]:
        return [call for call in self.calls if call.meta]

    def real_calls(self) -> list[Call]:
        return [call for call in self.calls if call.meta is False]

    # --- keying ---------------------------------------------------------------------
    def _call_for(self, choice: int, index: int, upstream_id: str | None, name: str | None) -> Call:
        latest = self._latest.get((choice, index))
        if upstream_id is not None:
            for call in reversed(self.calls):
                if call.choice == choice and call.upstream_id == upstream_id:
                    return call
            if (
                latest is not None
                and latest.upstream_id is None
                and latest.shown < 0
                and (name is None or latest.name in (None, name))
            ):
                latest.upstream_id = upstream_id
                return latest
            return self._open(choice, index, upstream_id)
        if latest is None and name is None:
            opened = [call for call in self.calls if call.choice == choice and not call.legacy]
            if len(opened) == 1:
                self._latest[(choice, index)] = opened[0]
                return opened[0]
        if latest is None or (name is not None and latest.name not in (None, name)):
            return self._open(choice, index, None)
        return latest

    def _open(self, choice: int, index: int, upstream_id: str | None) -> Call:
        call = Call(choice, index, upstream_id)
        self.calls.append(call)
        self._latest[(choice, index)] = call
        return call

    def _add(self, call: Call, function: dict[str, Any]) -> None:
        name = _present(function.get("name"))
        if name is not None and call.name is None:
            call.name = name
            call.meta = self.is_meta(name)
            call.bridge = not call.meta and self.is_bridge(name)
            if call.bridge:
                self._holding.add(call.choice)
            elif not call.meta and call.choice not in self._holding:
                self._number(call)
        fragment = arguments_text(function.get("arguments"))
        if fragment:
            call.arguments.append(fragment)

    def _number(self, call: Call) -> None:
        if call.client_index is None:
            call.client_index = self._next_client_index.get(call.choice, 0)
            self._next_client_index[call.choice] = call.client_index + 1

    # --- what the client sees -------------------------------------------------------
    def _pending_text(self, call: Call) -> str:
        start = max(call.shown, 0)
        call.shown = len(call.arguments)
        return "".join(call.arguments[start:])

    def _shown_items(self, call: Call, *, held: bool | None = None) -> list[dict[str, Any]]:
        """What the client sees of ``call`` now: nothing for a meta-call, a bridge call,
        or a real call held behind one (``held``: None reads it from the call's choice)."""
        held = call.choice in self._holding if held is None else held
        if call.meta is not False or call.bridge or (held and call.shown < 0):
            return []
        if call.shown < 0:
            arguments = self._pending_text(call)
            function = {"name": call.name or "", "arguments": arguments}
            return [{"index": call.client_index, "id": call.call_id(), "type": "function", "function": function}]
        fragment = self._pending_text(call)
        return [{"index": call.client_index, "function": {"arguments": fragment}}] if fragment else []

    def _shown_legacy(self, call: Call) -> dict[str, Any] | None:
        if call.meta is not False:
            return None
        if call.shown < 0:
            return {"name": call.name or "", "arguments": self._pending_text(call)}
        fragment = self._pending_text(call)
        return {"arguments": fragment} if fragment else None
