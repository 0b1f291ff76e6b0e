"""Whether a request's history continues the one its conversation sent last: each earlier
message still there, unchanged, in its place. While it does, the upstream's KV cache holds
the conversation's prompt up to the new messages, and the tool block stays as it is; a
history the client rewrote (a compacted or edited conversation, a new system prompt)
breaks that prefix whatever the proxy does, and the block may be chosen afresh.

A message is compared by what a chat template renders of it: its role, its text, its
tool calls (name and arguments), the call it answers and its name. Markers a template
does not render (Anthropic's ``cache_control``, ids of content blocks) never count as a
change. Messages are in Chat Completions shape, as every API's adapter reads its request.

Where the API's adapter keeps the ``messages`` array's bytes as the client sent them
(:class:`RawHistory`: Chat Completions), a mark also holds the BLAKE3 of those bytes up
to its last message (``raw``, ``cut``): a later request whose array starts with the same
bytes holds the same messages, so it continues without a message being rendered again
(one hash over the bytes, ~0.3 ms a MB; :mod:`selection.catalog.history_facts` reads its new
messages alone). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import blake3
import msgspec

from selection.conversation.query import content_text


@dataclass(frozen=True)
class RawHistory:
    """A request's ``messages`` array as the client sent it: ``data``, its JSON bytes (a
    read-only buffer), and ``end``, the offset just past its last message (1, past the
    ``[``, when it is empty)."""

    data: memoryview
    end: int

    @classmethod
    def of(cls, raw: Any) -> RawHistory | None:
        """The raw history of a ``messages`` member's bytes (any buffer: ``msgspec.Raw``,
        ``bytes``); None when they are not an array."""
        data = memoryview(raw).cast("B")
        end = len(data)
        while end and data[end - 1] in _WHITESPACE:
            end -= 1
        if end < 2 or data[end - 1] != _CLOSE:
            return None
        end -= 1
        while end and data[end - 1] in _WHITESPACE:
            end -= 1
        return cls(data, end) if data[0] == _OPEN else None


_WHITESPACE = frozenset(b" \t\r\n")
_OPEN, _CLOSE = ord("["), ord("]")


@dataclass(frozen=True)
class HistoryMark:
    """A history as one request sent it: how many ``messages`` it had, and the BLAKE3
    ``digest`` (hex) of what a template renders of them; where its bytes were known,
    ``raw``, the BLAKE3 (hex) of its ``messages`` array's bytes up to its last message,
    and ``cut``, that many bytes (:class:`RawHistory`)."""

    messages: int
    digest: str
    raw: str | None = None
    cut: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messages": self.messages, "digest": self.digest}
        if self.raw is not None:
            data.update(raw=self.raw, cut=self.cut)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> HistoryMark | None:
        """The mark stored as :meth:`to_json` wrote it; None when absent or malformed (a
        malformed ``raw`` part alone is dropped)."""
        if not isinstance(data, Mapping):
            return None
        messages, digest = data.get("messages"), data.get("digest")
        if not (isinstance(messages, int) and messages >= 0 and isinstance(digest, str)):
            return None
        raw, cut = data.get("raw"), data.get("cut")
        if isinstance(raw, str) and isinstance(cut, int) and cut > 0:
            return cls(messages, digest, raw, cut)
        return cls(messages, digest)

    def raw_prefix(self, raw: RawHistory | None) -> Any:
        """The BLAKE3 hasher of ``raw``'s bytes up to :attr:`cut` when they are the bytes
        this mark hashed (so ``raw`` starts with the same messages), else None."""
        if raw is None or self.raw is None or self.cut is None or self.cut > raw.end:
            return None
        hasher = blake3.blake3(raw.data[: self.cut])
        return hasher if hasher.hexdigest(16) == self.raw else None


def rendered(message: Any) -> Any:
    """What a chat template renders of one message (see the module docstring)."""
    if not isinstance(message, Mapping):
        return message
    calls = message.get("tool_calls")
    return [
        message.get("role"), content_text(message.get("content")),
        [[(call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments")]
         for call in calls if isinstance(call, Mapping)] if isinstance(calls, list) else None,
        message.get("tool_call_id"), message.get("name"),
    ]


def mark(messages: Sequence[Any]) -> HistoryMark:
    """The mark of ``messages``."""
    hasher = blake3.blake3()
    for message in messages:
        add_rendered(hasher, message)
    return HistoryMark(len(messages), hasher.hexdigest(16))


def add_rendered(hasher: Any, message: Any) -> None:
    """Add one message to a mark's BLAKE3 ``hasher`` (what :func:`mark` hashes of it)."""
    hasher.update(_encoded(rendered(message)))
    hasher.update(b"\n")


def _encoded(value: Any) -> bytes:
    """``value`` as JSON bytes; ASCII-escaped when it holds a lone surrogate (valid in a
    JSON string, not encodable as UTF-8)."""
    try:
        return msgspec.json.encode(value)
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def continues(previous: HistoryMark | None, messages: Sequence[Any]) -> bool:
    """Whether ``messages`` hold the history ``previous`` marked, unchanged, at their
    start (False when nothing was marked)."""
    if previous is None or previous.messages > len(messages):
        return False
    return mark(messages[: previous.messages]).digest == previous.digest
