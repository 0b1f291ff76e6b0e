"""``POST /v1/responses`` and ``POST /v1/messages``: the same decisions as chat
completions (:mod:`proxy.chat.decisions`) with the same planner, headers and switches,
through one API's adapter (:mod:`proxy.apis.adapter`); ``api`` = the adapter's label.
A body that is not a JSON object passes through; one the adapter cannot read (or with no
function tools) too.

The first round's answer decides how the turn is served: an event stream as a stream, any
other as a plain response, whatever the request's ``stream`` (some servers answer one with
the other): the client gets the shape the upstream chose, its meta-calls hidden.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.apis.adapter import ApiAdapter
from proxy.apis.events import EventStreamServer
from proxy.apis.rounds import send_turn_round, serve_plain
from proxy.chat.context import TurnServices, UsageRecorder
from proxy.chat.decisions import DecisionFlow
from proxy.chat.planner import PlanInput, Planner
from proxy.chat.translation import whole_turn
from proxy.chat.turn import Turn
from proxy.http.asgi import send_error
from proxy.http.errors import ProxyError
from proxy.http.forwarding import ClientRequest, Forwarder, is_event_stream
from proxy.http.headers import Headers
from proxy.metrics import Metrics


async def _json_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None. Raises RecursionError for one nested deeper
    than ``json.loads`` follows (:class:`proxy.chat.decisions.DecisionFlow` refuses it)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return body if isinstance(body, dict) else None


class ApiHandler:
    """Serves one API's requests; see the module docstring."""

    def __init__(
        self,
        *,
        adapter: ApiAdapter,
        settings: Settings,
        planner: Planner,
        forwarder: Forwarder,
        metrics: Metrics,
        usage: UsageRecorder | None = None,
    ) -> None:
        self.adapter = adapter
        self.planner = planner
        self.shared_state = settings.state_shared_across_credentials
        self.decisions = DecisionFlow(
            api=adapter.api, settings=settings, forwarder=forwarder, metrics=metrics,
            usage=usage,
        )
        self.services = TurnServices(
            forwarder=forwarder,
            metrics=metrics,
            max_meta_rounds=settings.max_meta_rounds,
            run_meta_calls=planner.run_meta_calls,
        )

    async def handle(self, request: ClientRequest, send: Send) -> None:
        request = self.adapter.continued(request)
        read: PlanInput | None = None  # what the adapter read, once

        async def plan(body: dict[str, Any], headers: Headers, top_k: int | None) -> Turn:
            nonlocal read
            read = self.adapter.read(body)
            turn = await self.planner.plan_input(read, headers, top_k)
            turn.api_view = read.api_view  # for the adapter's response side
            return turn

        async def translate(body: dict[str, Any], headers: Headers, decision: str) -> Turn | None:
            # Not read: the adapter cannot read the request (forwarded as sent).
            if read is None:
                return None
            return whole_turn(read, headers, decision, shared=self.shared_state)

        async def serve(turn: Turn, body: dict[str, Any], report: Headers, started: float) -> None:
            try:
                first = await send_turn_round(self.services, self.adapter, turn, request)
            except ProxyError as error:
                await send_error(send, error, headers=report)
                return
            if first.status_code == 200 and is_event_stream(first):
                await EventStreamServer(
                    self.services, self.adapter, turn, request, send, report, started
                ).run(first)
            else:
                await serve_plain(
                    self.services, self.adapter, turn, request, send, report, started, first
                )

        await self.decisions.run(
            request, send, read_body=_json_object, plan=plan, serve=serve, translate=translate
        )
