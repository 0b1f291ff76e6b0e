"""Whether a request's history continues the one its conversation sent last: each earlier
message still there, unchanged, in its place. While it does, the upstream's KV cache holds
the conversation's prompt up to the new messages, and the tool block stays as it is; a
history the client rewrote (a compacted or edited conversation, a new system prompt)
breaks that prefix whatever the proxy does, and the block may be chosen afresh.

A message is compared by what a chat template renders of it: its role, its text, its
tool calls (name and arguments), the call it answers and its name. Markers a template
does not render (Anthropic's ``cache_control``, ids of content blocks) never count as a
change. Messages are in Chat Completions shape, as every API's adapter reads its request.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import blake3
import msgspec

from selection.conversation.query import content_text


@dataclass(frozen=True)
class HistoryMark:
    """A history as one request sent it: how many ``messages`` it had, and the BLAKE3
    ``digest`` (hex) of what a template renders of them."""

    messages: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> HistoryMark | None:
        """The mark stored as :meth:`to_json` wrote it; None when absent or malformed."""
        if not isinstance(data, Mapping):
            return None
        messages, digest = data.get("messages"), data.get("digest")
        if isinstance(messages, int) and messages >= 0 and isinstance(digest, str):
            return cls(messages, digest)
        return None


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
        hasher.update(_encoded(rendered(message)))
        hasher.update(b"\n")
    return HistoryMark(len(messages), hasher.hexdigest(16))


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
    return mark(messages[: previous.messages]) == previous
