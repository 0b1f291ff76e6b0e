"""The upstream of ``benchmarks/client_gone.py``, run as its own process: the scripted
upstream (:mod:`benchmarks.support.upstream`) under uvicorn, each request stamped with the
``time.monotonic()`` its first bytes were read at (``CLOCK_MONOTONIC``, one clock for
every process of the machine), so a round's arrival is timed by a loop that does little
else than read it.

Requests with ``X-Bench: abort`` are answered after ``round_s`` seconds: a ``search_tools``
call first (the meta-tool of a catalogue over 100 tools), then text to the re-issue (its
body carries the call's id, :data:`META_ID`); every other request at once.
``GET /records?id=X`` answers the rounds of request ``X`` (``X-Request-Id``; all rounds
without ``id``): ``[{"id", "path", "arrived_at", "reissue", "completed"}]``.

Run: ``python -m benchmarks.support.abort_upstream PORT ROUND_S``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from urllib.parse import parse_qs

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import Chat, Delayed, Raw, Recorded, Reply, Upstream

HOST = "127.0.0.1"
#: The id of the hidden call of an aborted request's first round: in its re-issue's body.
META_ID = "bench_meta"
QUERY = {"query": "review comments on a pull request"}


class StampedProtocol(HttpToolsProtocol):
    """uvicorn's protocol, stamping each request (scope key ``arrived_at``) with the
    ``time.monotonic()`` its first bytes were read at."""

    def data_received(self, data: bytes) -> None:
        self.read_at = time.monotonic()
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["arrived_at"] = self.read_at  # type: ignore[typeddict-unknown-key]


def records(upstream: Upstream, request_id: str | None) -> list[dict[str, object]]:
    return [
        {"id": r.header("x-request-id"), "path": r.path, "arrived_at": r.arrived_at,
         "reissue": META_ID.encode() in r.body, "completed": r.completed}
        for r in upstream.requests
        if r.path != "/records" and (request_id is None or r.header("x-request-id") == request_id)
    ]


def replies(upstream: Upstream, round_s: float) -> Callable[[Recorded], Reply | None]:
    """The answers of the module docstring."""

    def reply(record: Recorded) -> Reply | None:
        if record.path == "/records":
            wanted = parse_qs(record.query).get("id", [None])[0]
            return Raw(200, json.dumps(records(upstream, wanted)))
        if record.header("x-bench") != "abort":
            return None  # the built-in answer, at once
        again = META_ID.encode() in record.body
        call = {"name": "search_tools", "arguments": json.dumps(QUERY)}
        if record.path.endswith("/responses"):
            answer: Reply = Responses() if again else Responses(
                text=None, calls=[{"call_id": META_ID, **call}])
        elif record.path.endswith("/messages"):
            answer = Message() if again else Message(
                text=None, calls=[{"id": META_ID, "name": "search_tools", "input": QUERY}])
        else:
            answer = Chat() if again else Chat(content=None, tool_calls=[{"id": META_ID, **call}])
        return Delayed(round_s, answer)

    return reply


def main() -> None:
    port, round_s = int(sys.argv[1]), float(sys.argv[2])
    upstream = Upstream()
    upstream.behaviour = replies(upstream, round_s)
    uvicorn.run(upstream.app, host=HOST, port=port, http=StampedProtocol, log_level="warning",
                access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
