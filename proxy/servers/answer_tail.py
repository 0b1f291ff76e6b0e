"""What a relayed answer says of the server's speed, read from its last bytes.

A request the proxy forwards unchanged (an agent's side request: a title, a summary, a
turn with no tools) is relayed as a byte stream (:meth:`proxy.http.forwarding.Forwarder.relay`)
and never decoded. Its answer still carries what the server measured: llama-server (and
Lemonade's llama.cpp backend) puts ``timings`` on a Chat Completions answer's body, or on
the stream's last event, with ``usage`` beside it (llama.cpp ``tools/server``,
``result_timings::to_json``). :class:`AnswerTail` watches the relayed chunks, keeps the
last :data:`TAIL_BYTES` of them and, once the answer has been sent whole, reads that tail
into a :class:`~proxy.servers.speeds.RoundTiming` for the speed book, so the first
conversation an agent starts after its side requests is already planned in seconds.

The work is done after the client has the whole answer: the relay is not slowed, and an
answer that cannot be read (compressed, cut, no JSON) says nothing.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable

from proxy.http.sse import EventSplitter
from proxy.http.upstream import UpstreamResponse
from proxy.servers.speeds import RoundTiming

#: The most bytes of an answer's end that are kept (a stream's last events, a body's
#: ``timings`` and ``usage``; llama-server's final event is ~0.6 KB).
TAIL_BYTES = 16_384


class AnswerTail:
    """Watches one relayed answer (:class:`proxy.http.forwarding.ResponseTap`): when its
    chunks came (monotonic seconds) and its last :data:`TAIL_BYTES`. ``sent``: when the
    request went upstream; ``learn``: called once with the answer's timing, if it says
    anything."""

    def __init__(self, sent: float, learn: Callable[[RoundTiming], None],
                 clock: Callable[[], float]) -> None:
        self._timing = RoundTiming(sent)
        self._learn = learn
        self._clock = clock
        self._chunks: deque[bytes] = deque()
        self._kept = 0
        self._total = 0

    def seen(self, chunk: bytes) -> None:
        now = self._clock()
        self._timing.first = now if self._timing.first is None else self._timing.first
        self._timing.last = now
        self._chunks.append(chunk)
        self._kept += len(chunk)
        self._total += len(chunk)
        while self._kept - len(self._chunks[0]) >= TAIL_BYTES:
            self._kept -= len(self._chunks.popleft())

    def ended(self, response: UpstreamResponse) -> None:
        """The answer was relayed whole: read its tail and learn from it."""
        encoding = (response.header(b"content-encoding") or b"identity").strip().lower()
        if response.status_code != 200 or encoding != b"identity" or not self._chunks:
            return
        tail, last = b"".join(self._chunks), self._timing.last
        assert last is not None  # set with the first chunk
        content_type = response.header(b"content-type") or b""
        if content_type.startswith(b"text/event-stream"):
            self._read_events(tail, last)
        elif self._kept == self._total:  # the whole body
            self._read_object(tail, last)
        else:
            self._read_members(tail, last)
        timing = self._timing
        if timing.timings is not None or timing.usage is not None:
            self._learn(timing)

    def _read_events(self, tail: bytes, last: float) -> None:
        """A stream's events in the tail (the first may be cut: it reads as nothing), as
        read at ``last``, when the answer's last chunk came."""
        splitter = EventSplitter()
        for event in [*splitter.feed(tail), *splitter.flush()]:
            if event.data is None or event.data.strip() == "[DONE]":
                continue
            try:
                data = json.loads(event.data)
            except (ValueError, RecursionError):
                continue
            if isinstance(data, dict):
                self._timing.seen(data, last, streamed=True)

    def _read_object(self, body: bytes, last: float) -> None:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return
        if isinstance(data, dict):
            self._timing.seen(data, last, streamed=False)

    def _read_members(self, tail: bytes, last: float) -> None:
        """A body longer than the tail: its last ``"timings"`` and ``"usage"`` members,
        where they are in the tail."""
        found = {}
        decoder = json.JSONDecoder()
        for name in ("timings", "usage"):
            key = b'"' + name.encode() + b'"'
            at = tail.rfind(key)
            if at < 0:
                continue
            rest = tail[at + len(key):].decode("utf-8", errors="replace").lstrip()
            if not rest.startswith(":"):
                continue
            try:
                value, _ = decoder.raw_decode(rest[1:].lstrip())
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found[name] = value
        if found:
            self._timing.seen(found, last, streamed=False)
