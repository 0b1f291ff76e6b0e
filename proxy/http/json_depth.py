"""How deep a request body nests JSON, read from its bytes before it is parsed, so that
one limit holds for every body whatever the proxy then does with it.

Python's JSON decoder and encoder recurse once per level, under the interpreter's
recursion limit (1,000 frames, shared with the server's own call stack): measured through
the proxy, a body without tools failed near 985 levels and one with tools near 975 (its
catalogue is parsed, ranked and written again). :data:`MAX_JSON_DEPTH` is below both,
with room for a deeper server stack, and the proxy refuses what passes it
(:meth:`proxy.turn.decisions.DecisionFlow.run`).
"""

from __future__ import annotations

import asyncio

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
    brackets than that is not measured)."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False
    return json_depth(raw) > MAX_JSON_DEPTH


async def body_too_deep(raw: bytes) -> bool:
    """:func:`too_deep`, in a worker thread for a body over
    :data:`MEASURE_IN_THREAD_BYTES`."""
    if len(raw) > MEASURE_IN_THREAD_BYTES:
        return await asyncio.to_thread(too_deep, raw)
    return too_deep(raw)
