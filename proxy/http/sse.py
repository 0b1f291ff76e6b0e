"""Server-sent events framing for relaying, per the WHATWG HTML "Server-sent events"
event-stream format.

Relaying needs what SSE client libraries discard: each event's exact bytes and the
comment lines (``: ping`` keep-alives). :class:`EventSplitter` cuts a byte stream into
raw events at blank lines; :func:`decode` reads one event's fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n")
_LINE = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class Event:
    """One event: ``raw`` (its exact bytes, blank-line terminator included), ``event``
    (the ``event:`` field or None), ``data`` (``data:`` lines joined by ``\\n``, or None
    when the block has no data line, e.g. only comments)."""

    raw: bytes
    event: str | None
    data: str | None


def decode(raw: bytes) -> Event:
    """Decode one raw event block (UTF-8; invalid bytes replaced)."""
    event_type: str | None = None
    data_lines: list[str] = []
    for line in _LINE.split(raw.decode("utf-8", errors="replace")):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data_lines.append(value)
        elif field == "event":
            event_type = value
    return Event(raw, event_type, "\n".join(data_lines) if data_lines else None)


class EventSplitter:
    """Feed bytes as they arrive; get back the events completed so far."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        events = []
        while match := _EVENT_END.search(self._buffer):
            raw, self._buffer = self._buffer[: match.end()], self._buffer[match.end() :]
            events.append(decode(raw))
        return events

    def flush(self) -> list[Event]:
        """The last event when the stream ended without a blank line."""
        rest, self._buffer = self._buffer, b""
        return [decode(rest + b"\n\n")] if rest.strip() else []


def data_event(payload: bytes) -> bytes:
    """Frame ``payload`` (single-line JSON or ``[DONE]``) as one ``data:`` event."""
    return b"data: " + payload + b"\n\n"
