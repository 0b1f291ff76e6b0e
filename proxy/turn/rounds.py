"""Serving an acting request over one or more upstream rounds, for every API, to a
streaming or a plain client alike: the turn's rules, written once.

Each round's answer — an SSE stream, or one JSON body — is read by the API's
:class:`~proxy.turn.adapter.ClientView`, which shows the client what it may see as it is
read and reports the round (:class:`~proxy.turn.adapter.Reply`). Then the round's
outcome, the same on every API:

- meta-calls alone, the round complete, meta rounds left (``max_meta_rounds``): the
  meta-calls run (:meth:`proxy.turn.planner.Planner.run_meta_calls`), the exchange is
  appended (arguments always valid JSON), the request is re-issued, and the same client
  response goes on;
- a round cut off (``length``, ``max_tokens``, ``incomplete``: :attr:`Ending.CUT`): its
  meta-calls never run; the client is told as the upstream said, the meta-calls removed;
- an answer that is not the API's — a 200 body in no shape of it (a gateway's HTML
  page), a round that ended without its end (no ``finish_reason``, ``message_delta`` or
  terminal event) — follows one rule per case. The proxy needed it (the round offered a
  meta-tool, so it must read the answer for meta-calls, or it is a re-issue, whose client
  response the proxy writes): the client gets ``upstream_invalid_response`` (502, or the
  API's error event once its stream started), and no call in it runs. It did not (the
  first round, no meta-tool offered: ``tool_choice`` none or a named tool): it reaches
  the client as the upstream sent it — a body with its status and content type, a stream
  ending where it ended, nothing added;
- meta-calls with real calls, or after the last meta round: they run (the loads take
  effect next turn); real calls go to the client; with none, the answer ends as a
  finished one and, if nothing at all was shown, a note says what happened
  (:func:`empty_answer_note`);
- an upstream error (a non-200 answer, an error event mid-stream): before the client's
  response started, the upstream's answer reaches it as it is; after, the API's error
  event carries the upstream's error; a context overflow, however the server words it,
  reaches it as the API's own (:mod:`proxy.servers.overflow`), either way;
- an answer the proxy cannot interpret (``Reply.problem``): the client gets
  ``upstream_invalid_response`` (an SSE error event, or 502), nothing of the round's
  calls, and no meta-call runs.

A client that leaves cancels the request (:func:`proxy.http.asgi.run_until_disconnect`):
the round in flight is closed, none is started after it.
"""

from __future__ import annotations

import json
import time

from proxy.http.asgi import send_complete, send_error
from proxy.http.errors import ProxyError, UpstreamResponseInvalid
from proxy.http.forwarding import ClientRequest, is_event_stream, response_headers
from proxy.http.sse import Event, EventSplitter
from proxy.http.upstream import UpstreamResponse, raw_chunks, read_decoded
from proxy.log import get_logger, where
from proxy.servers.speeds import RoundTiming
from proxy.turn.adapter import ApiRequest, ClientOut, ClientView, Ending, Reply
from proxy.turn.context import TurnServices
from proxy.turn.decision_log import refresh_report, tools_comment
from proxy.turn.sender import plain_body, send_round
from proxy.turn.turn import MetaCall, Turn, json_value

logger = get_logger("serving")


def empty_answer_note(rounds: int, ending: Ending, loaded: bool, refused: bool = False) -> str:
    """The content of a response that would be empty once its meta-calls are removed (an
    assistant message without content nor calls is invalid when replayed). ``loaded``:
    whether the last round's meta-calls loaded a tool not offered yet; ``refused``:
    whether they held a bridge call the proxy could not read (answered to the model with
    the valid shape), not only tool-loading calls."""
    if ending is Ending.CUT:
        return (
            "[toolprune] The answer was cut off by the output token limit inside a "
            "tool-loading call, which was not run. Allow more output tokens."
        )
    if refused:
        return (
            f"[toolprune] The model called a tool through call_tool in a shape that could "
            f"not be read, after {rounds} hidden round(s), and wrote no answer; the call was "
            "not made. Ask again, or name the tool and what it should do."
        )
    outcome = (
        "The tools it loaded are offered from the next request on."
        if loaded else
        "It loaded no new tool: the names it asked for are offered already or match no "
        "tool, or its arguments could not be read."
    )
    return (
        f"[toolprune] The model asked to load more tools after {rounds} tool-loading "
        f"round(s) and wrote no answer. {outcome}"
    )


def only_searches(turn: Turn, reply: Reply) -> bool:
    """Whether a round's answer was only the proxy's search or load calls: a round the
    model spent finding tools (a call of the client's, or of the bridge, is work of the
    turn itself)."""
    return bool(reply.meta) and not reply.real_calls and all(
        turn.is_meta(call.name) for call in reply.meta)


class _TurnServer:
    """Runs the rounds of one acting request (see the module docstring)."""

    def __init__(
        self, services: TurnServices, request: ApiRequest, turn: Turn, client: ClientRequest,
        out: ClientOut, stream: bool,
    ) -> None:
        self.services = services
        self.request = request
        self.turn = turn
        self.client = client
        self.out = out
        self.stream = stream
        self.view: ClientView | None = None

    async def run(self) -> None:
        max_rounds = self.services.max_meta_rounds
        try:  # the first round written before anything is sent: a defect shows here
            await self._deliver_proactively()
            first: bytes | None = self._body(self.turn.offer_meta_now(max_rounds))
        except ProxyError as error:
            await self._fail(error)
            return
        except RecursionError:  # a body nested too deep: the caller refuses it
            raise
        except Exception as exc:  # noqa: BLE001 - a defect costs the pruning, never the request
            await self._forward_as_sent(exc)
            return
        streams = self.services.upstream_stream
        plain_upstream = self.stream and streams is not None and not await streams()
        while True:
            offered = self.turn.offer_meta_now(max_rounds)
            try:
                body = first if first is not None else self._body(offered)
                first = None
                timing = RoundTiming(time.monotonic())
                response = await send_round(
                    self.services.forwarder, self.client,
                    plain_body(body) if plain_upstream else body,
                )
            except ProxyError as error:
                await self._fail(error)
                return
            try:
                reply = await self._read(response, offered or self.turn.rounds > 0, timing)
            except ProxyError as error:
                await self._fail(error)
                return
            finally:
                await response.aclose()
            if reply is not None and self.services.observe_speed is not None:
                timing.search_round = only_searches(self.turn, reply)
                model = self.turn.body.get("model")
                self.services.observe_speed(model if isinstance(model, str) else None, timing)
            if reply is None or not await self._after(reply, offered):
                return

    def _body(self, offered: bool) -> bytes:
        """A round's body; a block that delivers in the conversation keeps its meta-tools
        to the end (``offered``: they are offered this round)."""
        return self.request.upstream_body(self.turn, offered or self.turn.plan.delivers)

    async def _forward_as_sent(self, exc: Exception) -> None:
        """A defect in writing the first round (nothing sent yet): the client's request is
        forwarded as it came, and the defect logged and noted (the decision log's
        ``notes``)."""
        self.turn.notes.append(f"forwarded as sent: {type(exc).__name__} at {where(exc)}")
        logger.error("serve_defect_forwarded", extra={"fields": {
            "request_id": self.client.request_id.decode("latin-1"),
            "error": type(exc).__name__, "at": where(exc)}})
        await self.services.forwarder.forward(
            self.client, self.out.send, extra_response_headers=self.out.headers,
            errors=self.services.errors)

    async def _deliver_proactively(self) -> None:
        """Before the first round: the tools the plan delivers proactively, as a meta-call
        the proxy makes itself (its meta-tool, for those names), answered and appended as
        a hidden exchange, kept for the conversation's later requests."""
        turn, meta = self.turn, self.turn.plan.meta
        names = turn.plan.proactive  # none unless a meta-tool can load them
        if not names or meta is None:
            return
        call_id = f"toolprune_load_{turn.plan.state.turn}"
        if meta.load_name:
            call = MetaCall(call_id, meta.load_name, json.dumps({"names": list(names)}))
        else:
            assert meta.search_name is not None
            call = MetaCall(call_id, meta.search_name, json.dumps({"query": ", ".join(names)}))
        results = await self.services.run_meta_calls(turn, [call])
        turn.meta_events[-1]["proactive"] = True
        exchange = self.request.append_exchange(turn, self.request.meta_reply(turn, call), results)
        if self.services.record_exchange is not None:
            await self.services.record_exchange(turn, self.request.history_length(), exchange)

    async def _after(self, reply: Reply, offered: bool) -> bool:
        """Act on a round's outcome (the one meta-round step); True when the request is
        re-issued."""
        view, turn = self.view, self.turn
        assert view is not None
        if reply.error is not None:
            await view.fail_upstream(reply.error)
            return False
        if reply.problem is not None:
            await view.fail(UpstreamResponseInvalid(reply.problem))
            return False
        if reply.ending is Ending.UNFINISHED and (reply.meta or offered or turn.rounds):
            await view.fail(UpstreamResponseInvalid(
                "the upstream's answer ended without saying how (no finish reason, stop "
                "reason or terminal event), so the proxy could not read it for its "
                "tool-loading calls; nothing in it was run"
            ))
            return False
        loaded = False
        if reply.meta and reply.ending is Ending.COMPLETE:
            events_before = len(turn.meta_events)
            results = await self.services.run_meta_calls(turn, reply.meta)
            loaded = any(event.get("loaded") for event in turn.meta_events[events_before:])
            await view.answered(reply)
            if not reply.real_calls and offered:
                exchange = self.request.append_exchange(turn, reply, results)
                recorder = self.services.record_exchange
                if turn.plan.delivers and recorder is not None:
                    await recorder(turn, self.request.history_length(), exchange)
                turn.rounds += 1
                refresh_report(self.out.headers, turn)  # a response not started shows it
                return True
            # mixed, or rounds exhausted: the loads take effect next turn
        only_meta = bool(reply.meta) and not reply.real_calls
        if only_meta and not view.shown_output:
            refused = any(turn.is_bridge(call.name) for call in reply.meta)
            await view.note(empty_answer_note(turn.rounds, reply.ending, loaded, refused))
        elif reply.normal_stop and not reply.meta and not reply.real_calls and not view.shown_output:
            self.services.suspicious_stop(self.client.request_id)
        turn.response_calls = reply.real_calls
        if turn.rounds and turn.whole is None and view.started:  # its headers are the first round's
            await view.comment(tools_comment(turn))
        await view.finish(reply, only_meta)
        return False

    async def _read(self, response: UpstreamResponse, needed: bool,
                    timing: RoundTiming) -> Reply | None:
        """Read one answer through the client's view; None when the request was answered
        here (an upstream error, or a body that is not an answer of the API: relayed as it
        came unless the proxy ``needed`` to read it). Raises UpstreamResponseInvalid for a
        body that is not the API's answer when it did. ``timing``: what the answer says of
        the server's speed, and when its parts came."""
        if self.view is None:
            self.view = self.request.view(self.turn, self.out, response, stream=self.stream)
        view = self.view
        if response.status_code != 200:
            errors = self.services.errors
            if not view.started:
                await self.services.forwarder.relay(
                    response, self.out.send, self.out.headers, errors
                )
                return None
            body = await read_decoded(response)
            error = errors(response.status_code, body) if errors is not None else None
            if error is not None:
                await view.fail(error)
            else:
                await view.fail_upstream(view.upstream_error(response.status_code, body))
            return None
        await view.start_round(response)
        if is_event_stream(response) and view.reads_events:
            await self._read_events(response, view, timing)
        else:
            raw = await read_decoded(response)
            timing.seen_body(raw, time.monotonic())
            if not await view.body(raw):
                if needed or view.started:
                    kind = (response.header(b"content-type") or b"no content type").decode("latin-1")
                    raise UpstreamResponseInvalid(
                        f"the upstream answered 200 with a body that is not the API's answer "
                        f"({kind}), so the proxy could not read it for its tool-loading calls"
                    )
                headers = [(n, v) for n, v in response_headers(response)
                           if n not in (b"content-length", b"content-encoding")]
                await send_complete(self.out.send, 200, [*headers, *self.out.headers], raw)
                return None
        return await view.end_round()

    async def _read_events(self, response: UpstreamResponse, view: ClientView,
                           timing: RoundTiming) -> None:
        splitter = EventSplitter()
        reading = True
        async for data in raw_chunks(response):
            for event in splitter.feed(data):
                reading = reading and await self._event(event, view, timing)
            if not reading:
                if view.done_marker:
                    await response.drain()
                return
        for event in splitter.flush():
            if not await self._event(event, view, timing):
                return

    @staticmethod
    async def _event(event: Event, view: ClientView, timing: RoundTiming) -> bool:
        """Read one SSE event; False once the round's stream is over."""
        if event.data is None:
            if event.raw.lstrip().startswith(b":"):
                await view.comment(event.raw)
            return True
        if event.data.strip() == "[DONE]":
            view.done_marker = True
            return False
        try:
            data = json_value(event.data)
        except (json.JSONDecodeError, RecursionError):
            data = None
        if not isinstance(data, dict):
            view.unreadable("a JSON object")
            return False
        timing.seen(data, time.monotonic(), streamed=True)
        return await view.event(event.event, data)

    async def _fail(self, error: ProxyError) -> None:
        if self.view is not None:
            await self.view.fail(error)
        else:
            await send_error(self.out.send, error, headers=self.out.headers)


async def serve_turn(
    services: TurnServices, request: ApiRequest, turn: Turn, client: ClientRequest,
    out: ClientOut, *, stream: bool,
) -> None:
    """Serve ``turn`` (read by its API as ``request``) as one client response; ``stream``:
    the client asked for a stream (the API's view decides the response's shape)."""
    await _TurnServer(services, request, turn, client, out, stream).run()

