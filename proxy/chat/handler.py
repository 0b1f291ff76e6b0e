"""``POST /v1/chat/completions``: decide whether to act, select, rewrite, and serve the
response (plain or streaming) with meta-tool calls handled by the proxy.

Decisions (the ``decision`` label of ``toolprune_requests_total``; ``path`` says what was
pruned: ``native`` tools, a ``text`` tool block in a system message, ``both``, or
``none``): ``disabled`` (env switch or ``X-Tool-Pruning: off``), ``passthrough`` (not
JSON, no tools nor tool block, ``n`` > 1), ``small_catalog``, ``fallback`` (selection failed: the original bytes are forwarded),
``dry_run`` (selection computed and reported, original bytes forwarded), ``pruned``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.chat.context import TurnServices, UsageRecorder
from proxy.chat.identity import log_id
from proxy.chat.upstream_info import UpstreamInfo
from proxy.chat.planner import NothingToPrune, Planner, SmallCatalog
from proxy.chat.serving import serve_turn
from proxy.chat.turn import MetaCall, Turn
from proxy.http.asgi import send_error
from proxy.http.errors import InvalidHeader
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import (
    TOOLS_HEADER,
    Headers,
    check_conversation_id,
    pruning_mode,
    top_k_override,
)
from proxy.log import RateLimitedLog, get_logger, where
from proxy.metrics import Metrics
from selection.catalog_cache import CatalogCache
from selection.engine import SelectionEngine
from selection.errors import SelectionError, UnexpectedSelectionError
from selection.policy import Policy
from selection.state import StateStore

logger = get_logger("decision")


class Decision(StrEnum):
    PRUNED = "pruned"
    PASSTHROUGH = "passthrough"
    DISABLED = "disabled"
    SMALL_CATALOG = "small_catalog"
    FALLBACK = "fallback"
    DRY_RUN = "dry_run"


def log_decision(turn: Turn, decision: Decision, selection_s: float, api: str) -> None:
    """The one structured log line of an acting request (no message content): what was
    offered, forwarded and why, for any API (``api``: ``chat_completions``, ``responses``,
    ``messages``). ``selection_s``: seconds spent planning."""
    selection = turn.selection
    logger.info(
        "pruning_decision",
        extra={
            "fields": {
                "api": api,
                "decision": decision.value,
                "path": turn.path,
                "conversation": log_id(turn.conversation),
                "turn": selection.state.turn,
                "offered": turn.offered,
                "forwarded": len(selection.tools),
                "admitted": turn.admitted(),
                "evicted": list(selection.evicted),
                "reasons": {t.name: t.reason for t in selection.tools},
                "dependency_of": dict(selection.parents),
                "tier": list(selection.tier),
                "best_left_out": [[n, round(s, 3)] for n, s in selection.left_out[:3]],
                "meta": turn.meta_events,
                "rounds": turn.rounds,
                "selection_ms": round(selection_s * 1000, 2),
                **cache_fields(turn),
            }
        },
    )


def cache_fields(turn: Turn) -> dict[str, Any]:
    """The decision log's prefix-cache fields: the tokens the proxy expects the upstream
    to reuse and to evaluate, whether the forwarded block changed after the conversation
    started (``cache_break``), and how the block began (``block``)."""
    expectation = turn.expectation
    if expectation is None:
        return {}
    return {
        "expected_cached_tokens": expectation.reused,
        "expected_evaluated_tokens": expectation.evaluated,
        "cache_break": expectation.broken,
        "block": turn.block_start,
    }


#: Bodies larger than this are decoded in a worker thread, so the event loop keeps
#: relaying other streams meanwhile (bytes).
DECODE_IN_THREAD_BYTES = 256 * 1024


def _with_problem(result: str, problem: str) -> str:
    """A meta-call's result (JSON text) with the reason its arguments were not read put
    first in its ``error``."""
    try:
        parsed = json.loads(result)
    except json.JSONDecodeError:
        parsed = None
    parsed = parsed if isinstance(parsed, dict) else {}
    detail = parsed.get("error")
    parsed["error"] = f"{problem}; {detail}" if isinstance(detail, str) else problem
    return json.dumps(parsed)


class ChatHandler:
    """Serves chat completions; see the module docstring."""

    def __init__(
        self,
        *,
        settings: Settings,
        policy: Policy,
        engine: SelectionEngine,
        store: StateStore,
        forwarder: Forwarder,
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
        usage: UsageRecorder | None = None,
        catalogs: CatalogCache | None = None,
        upstream_info: UpstreamInfo | None = None,
    ) -> None:
        self.settings = settings
        self.forwarder = forwarder
        self.metrics = metrics
        #: The usage log (``TOOLPRUNE_USAGE_DB``): told of each acting request and fallback.
        self.usage = usage
        self.fallback_log = RateLimitedLog(logger, settings.fallback_log_interval_s)
        #: Request bodies are decoded through it: a catalogue seen before is not re-parsed.
        self.catalogs = catalogs if catalogs is not None else CatalogCache(
            settings.catalog_cache_bytes, max_tool_bytes=settings.max_tool_definition_bytes
        )
        self.planner = Planner(
            catalogs=self.catalogs,
            settings=settings,
            policy=policy,
            engine=engine,
            store=store,
            metrics=metrics,
            on_late_error=lambda error: self._fallback(error, count=False),
            clock=clock,
            upstream=upstream_info,
        )
        self.services = TurnServices(
            forwarder=forwarder,
            metrics=metrics,
            max_meta_rounds=settings.max_meta_rounds,
            run_meta_calls=self.run_meta_calls,
            upstream_stream=settings.upstream_stream,
        )

    # --- entry ------------------------------------------------------------------
    async def handle(self, request: ClientRequest, send: Send) -> None:
        started = time.perf_counter()
        try:
            mode = pruning_mode(request.headers)
            top_k = top_k_override(request.headers)
            check_conversation_id(request.headers, self.settings.max_conversation_id_bytes)
        except InvalidHeader as error:
            await send_error(send, error)
            return
        if not self.settings.enabled or mode == "off":
            self._count(Decision.DISABLED)
            await self.forwarder.forward(request, send)
            return
        body = await self._decode(request.body)
        if body is None or body.get("n") not in (None, 1):
            self._count(Decision.PASSTHROUGH)
            await self.forwarder.forward(request, send)
            return
        try:
            turn = await self.planner.plan(body, request.headers, top_k)
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
        if mode == "dry-run":
            self._count(Decision.DRY_RUN, turn.path)
            log_decision(turn, Decision.DRY_RUN, selection_s, "chat_completions")
            try:
                await self.forwarder.forward(request, send, extra_response_headers=tools_header)
            finally:
                if self.usage is not None:
                    self.usage.record(turn, Decision.DRY_RUN.value)
            return
        self._count(Decision.PRUNED, turn.path)
        self.metrics.tools_offered.observe(turn.offered)
        self.metrics.tools_forwarded.observe(len(turn.selection.tools))
        self.metrics.schema_bytes_saved.inc(max(turn.schema_bytes_saved(), 0))
        try:
            if turn.native is None:  # text path: the response is not rewritten
                body = turn.upstream_body(with_meta=False)
                await self.forwarder.forward(
                    request, send, body=body, extra_response_headers=tools_header
                )
            else:
                stream = body.get("stream") is True
                await serve_turn(
                    self.services, turn, request, send, tools_header, started, stream=stream
                )
        finally:
            self.metrics.meta_rounds.observe(turn.rounds)
            log_decision(turn, Decision.PRUNED, selection_s, "chat_completions")
            if self.usage is not None:
                self.usage.record(turn, Decision.PRUNED.value)

    async def _decode(self, raw: bytes) -> dict[str, Any] | None:
        """The body as a JSON object (None when it is not one), large ones off the loop."""
        if len(raw) > DECODE_IN_THREAD_BYTES:
            return await asyncio.to_thread(self.catalogs.decode_body, raw)
        return self.catalogs.decode_body(raw)

    # --- planning ---------------------------------------------------------------
    async def run_meta_calls(self, turn: Turn, calls: Sequence[MetaCall]) -> list[str]:
        """See :meth:`Planner.run_meta_calls`. A call whose arguments could not be read
        (``MetaCall.problem``) gets a result that says so. The turn's admissions so far
        are kept (``Turn.earlier_admitted``): the re-selection reports only its own."""
        for name in turn.selection.admitted:
            if name not in turn.earlier_admitted:
                turn.earlier_admitted.append(name)
        results = await self.planner.run_meta_calls(turn, calls)
        return [
            _with_problem(result, call.problem) if call.problem else result
            for call, result in zip(calls, results, strict=True)
        ]

    # --- observability ----------------------------------------------------------
    def _count(self, decision: Decision, path: str = "none") -> None:
        self.metrics.decisions.labels(decision.value, path, "chat_completions").inc()

    def _fallback(self, error: SelectionError, *, count: bool = True) -> None:
        if count:
            self._count(Decision.FALLBACK)
            if self.usage is not None:
                self.usage.record_fallback(error.reason)
        self.metrics.fallbacks.labels(error.reason).inc()
        self.fallback_log.error(
            error.reason,
            "fallback_full_catalog",
            {"reason": error.reason, "error": type(error).__name__, "detail": str(error)},
        )

