"""How deep a request body nests JSON, read from its bytes before it is parsed, so that
one limit holds for every body whatever the proxy then does with it.

Python's JSON decoder and encoder recurse once per level, under the interpreter's
recursion limit (1,000 frames, shared with the server's own call stack): measured through
the proxy, a body without tools failed near 985 levels and one with tools near 975 (its
catalogue is parsed, ranked and written again). :data:`MAX_JSON_DEPTH` is below both,
with room for a deeper server stack, and the proxy refuses what passes it
(:meth:`proxy.turn.decisions.DecisionFlow.run`).

A conversation's request repeats the one before it and adds a few messages, so the depth
of a large body is measured member by member (split by ``msgspec``, one pass in C), and a
large array member (``messages``, ``input``, ``tools``) from the longest prefix this
process measured before (:class:`PrefixDepths`: found by its first bytes, checked by a
BLAKE3 of its bytes, ~0.3 ms a MB): only the bytes after that prefix, the new messages,
are read as brackets. The depth is the same either way.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass

import blake3
import msgspec
import numpy as np

#: The deepest nesting a request body may have (levels: ``{}`` is 1, ``{"a": []}`` 2).
MAX_JSON_DEPTH = 900
#: Bodies larger than this are measured in a worker thread (bytes), as Chat Completions
#: decodes them, so the event loop keeps relaying other streams meanwhile.
MEASURE_IN_THREAD_BYTES = 256 * 1024
#: Every byte but a quote and the four brackets (deleted before the brackets are counted).
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'"[]{}')
_OPENING = (ord("["), ord("{"))
_CLOSING = (ord("]"), ord("}"))


def json_depth(raw: bytes) -> int:
    """The deepest nesting of the JSON text ``raw`` (0 without brackets): its brackets
    outside strings counted in order. Escapes are dropped first (``\\\\`` before ``\\"``,
    as a JSON reader meets them), so a quote inside a string never ends it. For text that
    is not JSON, the same count of its brackets (its decoder then refuses it)."""
    structure = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    if not structure:
        return 0
    marks = np.frombuffer(structure, dtype=np.uint8)
    outside = (np.cumsum(marks == ord('"')) & 1) == 0
    opening = (marks == _OPENING[0]) | (marks == _OPENING[1])
    closing = (marks == _CLOSING[0]) | (marks == _CLOSING[1])
    steps = (opening & outside).astype(np.int32) - (closing & outside)
    return int(np.cumsum(steps).max())


def too_deep(raw: bytes) -> bool:
    """Whether ``raw`` nests deeper than :data:`MAX_JSON_DEPTH` (a body with no more
    brackets than that is not measured; a large one member by member,
    :func:`body_depth`)."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False
    return body_depth(raw) > MAX_JSON_DEPTH


#: Members of fewer bytes are measured whole: too small for a prefix to pay.
PREFIX_MIN_BYTES = 64 * 1024
_split = msgspec.json.Decoder(dict[str, msgspec.Raw])


def body_depth(raw: bytes) -> int:
    """:func:`json_depth` of ``raw``, measured per top-level member of a JSON object,
    each large array from its longest known prefix (:data:`PREFIXES`); text that is not
    a JSON object is measured whole."""
    try:
        members = _split.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return json_depth(raw)
    deepest = 0
    for value in members.values():
        data = memoryview(value).cast("B")
        if len(data) >= PREFIX_MIN_BYTES and data[0] == _OPENING[0]:
            depth = PREFIXES.depth(data)
        else:
            depth = json_depth(bytes(data))
        deepest = max(deepest, depth)
    return 1 + deepest


@dataclass(frozen=True)
class _Prefix:
    """An array's bytes up to ``cut`` (the end of an item): their BLAKE3 ``digest``, the
    ``edge`` bytes just before ``cut`` (a cheap first check) and their ``depth``."""

    cut: int
    digest: bytes
    edge: bytes
    depth: int


class PrefixDepths:
    """Depths of array prefixes this process measured, by the array's first
    :attr:`HEAD` bytes: a few per head (the requests of one agent's conversations start
    alike), the most recent first; thread-safe (large bodies are measured in threads)."""

    HEAD = 4096
    EDGE = 64
    PER_HEAD = 8

    def __init__(self, heads: int = 1024) -> None:
        self.heads = heads
        self._lock = threading.Lock()
        self._known: OrderedDict[bytes, list[_Prefix]] = OrderedDict()

    def depth(self, data: memoryview) -> int:
        """:func:`json_depth` of the JSON array ``data``, read after the longest prefix
        known; the array's own prefix (up to its last item) is remembered."""
        head = bytes(data[: self.HEAD])
        with self._lock:
            candidates = sorted(self._known.get(head, ()), key=lambda p: -p.cut)
        start, depth, hasher = 0, 0, blake3.blake3()
        for known in candidates:
            if known.cut > len(data) or data[known.cut - self.EDGE: known.cut] != known.edge:
                continue
            prefix = blake3.blake3(data[: known.cut])
            if prefix.digest() == known.digest:
                start, depth, hasher = known.cut, known.depth, prefix
                break
        tail = bytes(data[start:])
        depth = max(depth, json_depth(tail) if start == 0 else 1 + json_depth(tail))
        cut = _last_item_end(data)
        if cut > max(start, self.EDGE):
            hasher.update(data[start:cut])
            self._remember(head, _Prefix(cut, hasher.digest(), bytes(data[cut - self.EDGE: cut]),
                                         depth))
        return depth

    def _remember(self, head: bytes, entry: _Prefix) -> None:
        with self._lock:
            known = [p for p in self._known.get(head, []) if p.cut != entry.cut]
            self._known[head] = [entry, *known][: self.PER_HEAD]
            self._known.move_to_end(head)
            while len(self._known) > self.heads:
                self._known.popitem(last=False)


def _last_item_end(data: memoryview) -> int:
    """The offset just past an array's last item (its closing bracket and the white
    space before it left off)."""
    end = len(data)
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    end -= 1  # the closing bracket
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    return max(end, 0)


#: The process's prefix depths.
PREFIXES = PrefixDepths()


async def body_too_deep(raw: bytes) -> bool:
    """:func:`too_deep`, in a worker thread for a body over
    :data:`MEASURE_IN_THREAD_BYTES`."""
    if len(raw) > MEASURE_IN_THREAD_BYTES:
        return await asyncio.to_thread(too_deep, raw)
    return too_deep(raw)
