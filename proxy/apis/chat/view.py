"""The client's view of a Chat Completions turn: each round's answer — an SSE stream of
``chat.completion.chunk`` objects, or one ``chat.completion`` body (also when a stream
was asked for: some servers answer so, and ``upstream_stream = false`` asks for it) — is
read by a :class:`~proxy.apis.chat.round_reader.RoundReader`, and what the client may see
is shown as it is read (:mod:`proxy.apis.chat.client`: one SSE stream or one JSON body,
the shape the client asked for).

A round's ending is its ``finish_reason``: ``length`` is cut off, none is unfinished
(what the round loop makes of it: :mod:`proxy.turn.rounds`; a stream ended so gets no
ending nor ``[DONE]`` it did not send). An upstream
error object (an ``error`` event, or a chunk carrying ``error``) ends the response with
it. The upstream's SSE comments (keep-alives) are relayed to a streaming client as they
come, also before its first chunk.
"""

from __future__ import annotations

import json
from typing import Any

from proxy.apis.chat.client import PlainClient, StreamClient, asks_usage
from proxy.apis.chat.round_reader import RoundReader
from proxy.http.errors import ProxyError
from proxy.http.forwarding import is_event_stream, response_headers
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, ClientView, Ending, Reply
from proxy.turn.turn import Turn, add_usage, json_value


def _completion(raw: bytes) -> dict[str, Any] | None:
    """A ``chat.completion`` (or an error object) read from a JSON answer, or None."""
    try:
        data = json_value(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        return data
    choices = data.get("choices")
    readable = isinstance(choices, list) and choices and all(
        isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices
    )
    return data if readable else None


class ChatView(ClientView):
    """See the module docstring; one per client response."""

    def __init__(self, turn: Turn, out: ClientOut, first: UpstreamResponse, *, stream: bool) -> None:
        super().__init__(turn, out)
        headers = response_headers(first)
        self.client: StreamClient | PlainClient = (
            StreamClient(out.send, headers, out.headers, self.note_output,
                         include_usage=asks_usage(turn.body))
            if stream else PlainClient(out.send, headers, out.headers, self.note_output)
        )
        self.reader = self._reader()
        self.usage: dict[str, Any] | None = None

    def _reader(self) -> RoundReader:
        """A round's reader: meta-calls hidden, bridge calls made the client's calls."""
        plan = self.turn.plan
        return RoundReader(self.turn.is_meta, self.turn.is_bridge,
                           self.turn.bridged if plan.bridge is not None else None)

    @property
    def started(self) -> bool:
        return self.client.started

    @property
    def shown_output(self) -> bool:
        return self.client.shown_output

    async def start_round(self, response: UpstreamResponse) -> None:
        await super().start_round(response)
        self.reader = self._reader()
        self.reader.streamed = is_event_stream(response)

    async def comment(self, raw: bytes) -> None:
        await self.client.comment(raw)

    async def event(self, name: str | None, data: dict[str, Any]) -> bool:
        if name == "error" and not data.get("error"):
            data = {"error": data}
        shown = self.reader.read_chunk(data)
        self.client.adopt(self.reader.identity)
        await self.client.open()
        await self.client.choices(shown)
        return self.reader.error is None

    def unreadable(self, what: str) -> None:
        self.reader.unreadable_event()

    async def body(self, raw: bytes) -> bool:
        data = _completion(raw)
        if data is None:
            return False
        self.client.adopt(data)
        await self.client.open()
        await self.client.choices(self.reader.read_completion(data))
        return True

    async def end_round(self) -> Reply:
        reader = self.reader
        self.client.adopt(reader.identity)
        await self.client.choices(reader.end())
        self.usage = add_usage(self.usage, reader.usage)
        self.turn.notes.extend(reader.notes)
        if reader.error is not None:
            return Reply(error=reader.error)
        problem = reader.problem
        meta = [] if problem else reader.meta_calls()
        finish = reader.finish.get(0)
        ending = (Ending.UNFINISHED if finish is None
                  else Ending.CUT if finish == "length" else Ending.COMPLETE)
        return Reply(
            meta=meta, real_calls=reader.real_call_names(),
            items=[{"role": "assistant", "content": reader.content_text()}],
            ending=ending, problem=problem, normal_stop=reader.streamed and finish == "stop",
        )

    async def note(self, text: str) -> None:
        await self.client.choices([{"index": 0, "delta": {"content": text}}])

    async def finish(self, reply: Reply, only_meta: bool) -> None:
        finish = dict(self.reader.finish)
        if only_meta and reply.ending is Ending.COMPLETE:
            finish[0] = "stop"  # the meta-calls ran: the answer ends as a finished one
        await self.client.finish(finish, self.usage, self.reader.extras,
                                 usage_apart=self.reader.usage_apart,
                                 done=reply.ending is not Ending.UNFINISHED or self.done_marker)

    async def fail(self, error: ProxyError) -> None:
        await self.client.fail(error)

    async def fail_upstream(self, error: Any) -> None:
        error = error if isinstance(error, dict) else {
            "message": str(error), "type": "upstream_error", "param": None, "code": None,
        }
        await self.client.fail_upstream(error)
