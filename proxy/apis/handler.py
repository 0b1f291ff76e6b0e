"""``POST /v1/responses`` and ``POST /v1/messages``: the same decisions as chat
completions (:mod:`proxy.chat`) with the same planner, headers and switches,
through one API's adapter (:mod:`proxy.apis.adapter`).

Decisions are counted in ``toolprune_requests_total`` with ``api`` = the adapter's
label: ``disabled``, ``passthrough`` (not a JSON object, no function tools),
``small_catalog``, ``fallback`` (the adapter or selection could not read or finish the
request: original bytes forwarded), ``dry_run`` and ``pruned``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.apis.adapter import ApiAdapter
from proxy.apis.events import EventStreamServer
from proxy.apis.rounds import serve_plain
from proxy.chat.context import TurnServices, UsageRecorder
from proxy.chat.handler import Decision, log_decision
from proxy.chat.planner import NothingToPrune, Planner, SmallCatalog
from proxy.chat.turn import Turn
from proxy.http.asgi import send_error
from proxy.http.errors import InvalidHeader
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import TOOLS_HEADER, Headers, pruning_mode, top_k_override
from proxy.log import RateLimitedLog, get_logger, where
from proxy.metrics import Metrics
from selection.errors import SelectionError, UnexpectedSelectionError

logger = get_logger("decision")


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
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
        self.settings = settings
        self.planner = planner
        self.forwarder = forwarder
        self.metrics = metrics
        self.usage = usage
        self.fallback_log = RateLimitedLog(logger, settings.fallback_log_interval_s)
        self.services = TurnServices(
            forwarder=forwarder,
            metrics=metrics,
            max_meta_rounds=settings.max_meta_rounds,
            run_meta_calls=planner.run_meta_calls,
        )

    async def handle(self, request: ClientRequest, send: Send) -> None:
        started = time.perf_counter()
        try:
            mode = pruning_mode(request.headers)
            top_k = top_k_override(request.headers)
        except InvalidHeader as error:
            await send_error(send, error)
            return
        if not self.settings.enabled or mode == "off":
            self._count(Decision.DISABLED)
            await self.forwarder.forward(request, send)
            return
        body = _json_object(request.body)
        if body is None:
            self._count(Decision.PASSTHROUGH)
            await self.forwarder.forward(request, send)
            return
        try:
            turn = await self.planner.plan_input(self.adapter.read(body), request.headers, top_k)
        except NothingToPrune:
            self._count(Decision.PASSTHROUGH)
            await self.forwarder.forward(request, send)
            return
        except SmallCatalog as small:
            self._count(Decision.SMALL_CATALOG, small.path)
            self.metrics.tools_offered.observe(small.size)
            await self.forwarder.forward(request, send)
            return
        except SelectionError as error:
            self._fallback(error)
            await self.forwarder.forward(request, send)
            return
        except Exception as exc:  # a defect must cost the pruning, never the request
            self._fallback(UnexpectedSelectionError(f"{type(exc).__name__} at {where(exc)}"))
            await self.forwarder.forward(request, send)
            return
        selection_s = time.perf_counter() - started
        self.metrics.selection_seconds.observe(selection_s)
        tools_header: Headers = [
            (TOOLS_HEADER.encode(), f"{len(turn.selection.tools)}/{turn.offered}".encode())
        ]
        decision = Decision.DRY_RUN if mode == "dry-run" else Decision.PRUNED
        self._count(decision, turn.path)
        try:
            if decision is Decision.DRY_RUN:
                await self.forwarder.forward(request, send, extra_response_headers=tools_header)
                return
            self.metrics.tools_offered.observe(turn.offered)
            self.metrics.tools_forwarded.observe(len(turn.selection.tools))
            self.metrics.schema_bytes_saved.inc(max(turn.schema_bytes_saved(), 0))
            if body.get("stream") is True:
                await EventStreamServer(
                    self.services, self.adapter, turn, request, send, tools_header, started
                ).run()
            else:
                await serve_plain(
                    self.services, self.adapter, turn, request, send, tools_header, started
                )
        finally:
            if decision is Decision.PRUNED:
                self.metrics.meta_rounds.observe(turn.rounds)
            log_decision(turn, decision, selection_s, self.adapter.api)
            if self.usage is not None:
                self.usage.record(turn, decision.value)

    # --- observability ----------------------------------------------------------
    def _count(self, decision: Decision, path: str = "none") -> None:
        self.metrics.decisions.labels(decision.value, path, self.adapter.api).inc()

    def _fallback(self, error: SelectionError) -> None:
        self._count(Decision.FALLBACK)
        if self.usage is not None:
            self.usage.record_fallback(error.reason)
        self.metrics.fallbacks.labels(error.reason).inc()
        self.fallback_log.error(
            error.reason,
            "fallback_full_catalog",
            {"api": self.adapter.api, "reason": error.reason, "error": type(error).__name__,
             "detail": str(error)},
        )
