"""``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages``: one handler,
given the API's adapter (:class:`proxy.turn.adapter.Api`). The decisions and their
counting are :class:`proxy.turn.decisions.DecisionFlow`'s, the plan the shared
:class:`proxy.turn.planner.Planner`'s, the rounds :func:`proxy.turn.rounds.serve_turn`'s;
``api`` = the adapter's label. A body the adapter does not decode (not a JSON object,
Chat Completions ``n`` > 1) passes through; one it cannot read, or with no tools to
prune, too.

A turn whose tools are all in a system-prompt text block (Chat Completions' text path:
no native tools) is forwarded rewritten, its answer relayed unread.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.http.errors import ProxyError
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import Headers
from proxy.metrics import Metrics
from proxy.servers.answer_tail import AnswerTail
from proxy.servers.facts import UNKNOWN
from proxy.servers.overflow import read_overflow
from proxy.servers.probe import ServerProbe
from proxy.servers.speeds import RoundTiming
from proxy.turn.adapter import Api, ApiRequest, ClientOut
from proxy.turn.context import AnswerTapper, SpeedObserver, TurnServices, UsageRecorder
from proxy.turn.decisions import DecisionFlow
from proxy.turn.planner import Planner
from proxy.turn.rounds import serve_turn
from proxy.turn.translation import whole_turn
from proxy.turn.turn import Turn


class TurnHandler:
    """Serves one API's acting requests; see the module docstring. ``server``: what the
    upstream is: its context overflows reach the client in the API's shape
    (:func:`proxy.servers.overflow.read_overflow`; None: any server's); ``streaming``:
    whether streamed turns go upstream streamed (None: always; only an API whose client
    view makes a stream of a JSON answer takes it: Chat Completions)."""

    def __init__(
        self,
        *,
        api: Api,
        settings: Settings,
        planner: Planner,
        forwarder: Forwarder,
        metrics: Metrics,
        usage: UsageRecorder | None = None,
        server: ServerProbe | None = None,
        streaming: ServerProbe | None = None,
    ) -> None:
        self.api = api
        self.planner = planner
        self.forwarder = forwarder
        self.metrics = metrics
        self.shared_state = settings.state_shared_across_credentials

        def overflow(status: int, body: bytes) -> ProxyError | None:
            kind = server.current.kind if server is not None else UNKNOWN
            return read_overflow(status, body, kind)

        observe = self._speed_observer(server, metrics) if server is not None else None
        self.decisions = DecisionFlow(
            api=api.api, settings=settings, forwarder=forwarder, metrics=metrics, usage=usage,
            stream_error=api.stream_error, errors=overflow,
            answer_tap=self._answer_tapper(observe) if observe is not None else None,
        )
        self.services = TurnServices(
            api=api.api,
            forwarder=forwarder,
            metrics=metrics,
            max_meta_rounds=settings.max_meta_rounds,
            run_meta_calls=planner.run_meta_calls,
            record_exchange=planner.record_exchange,
            upstream_stream=streaming.streams_tool_calls if streaming is not None else None,
            errors=overflow,
            observe_speed=observe,
        )

    @staticmethod
    def _speed_observer(server: ServerProbe, metrics: Metrics) -> SpeedObserver:
        """Learns each round's speeds into the probe's book and shows the answering
        model's in the metrics."""

        def observe(model: str | None, timing: RoundTiming) -> None:
            server.speeds.observe(model, timing)
            speed = server.speeds.speed(model)
            if speed.prefill_tps is not None:
                metrics.upstream_prefill_speed.set(speed.prefill_tps)
            if speed.decode_tps is not None:
                metrics.upstream_decode_speed.set(speed.decode_tps)
            if speed.search_call_tokens is not None:
                metrics.upstream_search_call_tokens.set(speed.search_call_tokens)

        return observe

    @staticmethod
    def _answer_tapper(observe: SpeedObserver) -> AnswerTapper:
        """Watches a forwarded answer (:class:`proxy.servers.answer_tail.AnswerTail`) and
        learns from it under the request's model."""

        def tap(body: dict[str, Any]) -> AnswerTail:
            model = body.get("model")
            return AnswerTail(time.monotonic(),
                              partial(observe, model if isinstance(model, str) else None),
                              time.monotonic)

        return tap

    async def handle(self, request: ClientRequest, send: Send) -> None:
        request = self.api.continued(request)
        read: ApiRequest | None = None  # what the adapter read, once

        async def plan(body: dict[str, Any], headers: Headers, top_k: int | None, save: bool) -> Turn:
            nonlocal read
            read = await self.api.read(body)
            return await self.planner.plan(read.input, headers, top_k, save=save)

        async def translate(body: dict[str, Any], headers: Headers, decision: str) -> Turn | None:
            if read is None:  # the adapter could not read the request: forwarded as sent
                return None
            return whole_turn(self.planner.selector, read.input, headers, decision,
                              shared=self.shared_state)

        async def serve(
            turn: Turn, body: dict[str, Any], report: Headers, started: float, send: Send
        ) -> None:
            assert read is not None
            if turn.plan.native is None:  # text path: the answer is not rewritten
                rewritten = read.upstream_body(turn, False)
                await self.forwarder.forward(
                    request, send, body=rewritten, extra_response_headers=report,
                    errors=self.services.errors, tap=self.decisions.tap(body),
                )
                return

            def first_output() -> None:
                elapsed = time.perf_counter() - started
                self.metrics.ttft.labels(turn.decision).observe(elapsed)

            await serve_turn(
                self.services, read, turn, request, ClientOut(send, report, first_output),
                stream=body.get("stream") is True,
            )

        await self.decisions.run(
            request, send, read_body=self.api.decode, plan=plan, serve=serve,
            translate=translate,
        )
