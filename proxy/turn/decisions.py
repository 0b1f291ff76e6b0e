"""The decision ladder every acting API shares (chat completions, Responses, Messages):
read the toolprune headers, decide whether to act, plan, and either serve the planned
turn or forward the request unchanged; count, log and record each decision.

Decisions (the ``decision`` label of ``toolprune_requests_total``; ``path`` says what was
pruned: ``native`` tools, a ``text`` tool block in a system message, ``both``, or
``none``; ``api`` the API): ``disabled`` (env switch or ``X-Tool-Pruning: off``),
``passthrough`` (no tools nor tool block, or Chat Completions ``n`` > 1),
``malformed`` (a body the API refuses: not a JSON object, or its conversation of the
wrong type, :class:`~proxy.turn.adapter.MalformedRequest`; forwarded unchanged for the
upstream to answer, logged with what is wrong), ``small_catalog`` (forwarded whole by
rule, reported by ``X-Tool-Pruning-Tools`` and :data:`SMALL_CATALOG_HEADER`),
``fallback`` (selection failed: the original bytes are forwarded), ``dry_run``
(selection computed and reported, original bytes forwarded), ``pruned``, ``rejected`` (a
body nested deeper than :data:`~proxy.http.json_depth.MAX_JSON_DEPTH` levels, with tools
or without: 400 ``request_too_deeply_nested``, logged with reason ``json_too_deep``;
never forwarded, never a RecursionError; or tools that break their API's deferral or
tool-search contract: a 400 in the API's error shape,
:class:`~proxy.turn.planner.InvalidToolRequest`).

A request that is not pruned (``small_catalog``, ``fallback``, ``dry_run``) is forwarded
as sent unless its tools need translating for a plain server (the client's deferral or
search tool, Responses namespaces): then its handler's ``translate`` gives a
translate-only turn (:mod:`proxy.turn.translation`), served like a planned one under that
decision. A dry run plans without saving (:meth:`proxy.turn.planner.Planner.plan`,
``save``): it changes nothing a later request sees. ``disabled``, ``passthrough`` and
``malformed`` always forward the client's bytes.

A streaming request (``"stream": true``) is kept alive once its body is read
(:mod:`proxy.http.keepalive`, ``sse_keepalive_s``): while it is planned and served, the
client gets an SSE comment whenever it has waited that long in silence, and a response the
keep-alives started carries every later outcome on that stream (an error as the API's
error event). Forwarding the client's bytes as they came (passthrough, a request not
pruned nor translated) stops them, unless they already started the response.
What a decision reports (the response's ``X-Tool-Pruning-*`` headers, the one
``pruning_decision`` log line) is :mod:`proxy.turn.decision_log`'s; a planned prompt
expected not to fit the model's context adds ``X-Tool-Pruning-Warning`` and a
``prompt_exceeds_context`` line (:mod:`proxy.servers.fit`). Every request but a
``disabled`` one has the upstream's context overflow answered in the API's own error
shape (``errors``: :mod:`proxy.servers.overflow`); ``disabled`` relays its bytes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.http.asgi import send_error
from proxy.http.errors import InvalidHeader, InvalidRequest, RequestTooDeep
from proxy.http.forwarding import ClientRequest, ErrorReader, Forwarder, ResponseTap
from proxy.http.headers import (
    TOOLS_HEADER,
    Headers,
    check_conversation_id,
    pruning_mode,
    top_k_override,
)
from proxy.http.json_depth import MAX_JSON_DEPTH, body_too_deep
from proxy.http.keepalive import ErrorEvent, KeepAliveSend, unchanged
from proxy.http.request_log import RequestLog
from proxy.log import RateLimitedLog, get_logger, where
from proxy.metrics import Metrics
from proxy.turn.adapter import MalformedRequest
from proxy.turn.context import AnswerTapper, UsageRecorder
from proxy.turn.decision_log import log_decision, turn_report
from proxy.turn.planner import InvalidToolRequest
from proxy.turn.turn import Turn
from selection.types import NothingToPrune, SelectionError, SmallCatalog, UnexpectedSelectionError

logger = get_logger("decision")

#: On a request forwarded whole because selection failed (``fallback``): why, the
#: ``SelectionError`` reason its log line names (``catalog_error``…).
FALLBACK_HEADER = b"x-tool-pruning-fallback"
#: On a catalogue forwarded whole by rule (``small_catalog``, with ``X-Tool-Pruning-Tools``
#: ``N/N``): why, the reason its log line names: ``min_catalog_tools`` (at most that many
#: tools) or ``no_saving`` (top-k of its tools and the meta-tool would cost at least the
#: whole catalogue: a top-k at or above its size, or a dozen one-line tools).
SMALL_CATALOG_HEADER = b"x-tool-pruning-small-catalog"

#: Reads a request body: the JSON object to act on, or None to pass the request through.
BodyReader = Callable[[bytes], Awaitable[dict[str, Any] | None]]
#: Plans a turn from the body, the request headers, the ``X-Tool-Pruning-Top-K`` value and
#: whether to save it (False: a dry run, which changes no state).
TurnPlanner = Callable[[dict[str, Any], Headers, int | None, bool], Awaitable[Turn]]
#: Serves a planned turn: ``(turn, body, extra response headers, started, send)``,
#: ``started`` the request's ``time.perf_counter()`` at arrival, ``send`` the response's
#: (kept alive while the client streams: :class:`~proxy.http.keepalive.KeepAliveSend`).
TurnServer = Callable[[Turn, dict[str, Any], Headers, float, Send], Awaitable[None]]
#: The translate-only turn of a request that is not pruned (body, request headers, the
#: decision), or None: its bytes are forwarded as sent.
TurnTranslator = Callable[[dict[str, Any], Headers, str], Awaitable[Turn | None]]


class Decision(StrEnum):
    PRUNED = "pruned"
    PASSTHROUGH = "passthrough"
    MALFORMED = "malformed"
    DISABLED = "disabled"
    SMALL_CATALOG = "small_catalog"
    FALLBACK = "fallback"
    DRY_RUN = "dry_run"
    REJECTED = "rejected"


class InvalidTools(InvalidRequest):
    """The request's tools break their API's deferral / tool-search contract: HTTP 400."""

    code = "invalid_tools"


class DecisionFlow:
    """One API's decision ladder (see the module docstring). ``api`` labels its metrics
    and log lines."""

    def __init__(
        self,
        *,
        api: str,
        settings: Settings,
        forwarder: Forwarder,
        metrics: Metrics,
        usage: UsageRecorder | None = None,
        stream_error: ErrorEvent | None = None,
        errors: ErrorReader | None = None,
        answer_tap: AnswerTapper | None = None,
    ) -> None:
        self.api = api
        #: Watches the answer of a request forwarded without a turn (``passthrough``,
        #: ``malformed`` with a body, not pruned nor translated) for the server's speeds.
        self.answer_tap = answer_tap
        #: Reads the upstream's error answers to a request the proxy acts on (all but
        #: ``disabled``): a context overflow is answered in the API's shape.
        self.errors = errors
        #: The API's SSE error event: with it, a streaming request is kept alive
        #: (``sse_keepalive_s``; :mod:`proxy.http.keepalive`).
        self.stream_error = stream_error
        self.settings = settings
        self.forwarder = forwarder
        self.metrics = metrics
        self.usage = usage
        self.fallback_log = RateLimitedLog(logger, settings.fallback_log_interval_s)

    async def run(
        self,
        request: ClientRequest,
        send: Send,
        *,
        read_body: BodyReader,
        plan: TurnPlanner,
        serve: TurnServer,
        translate: TurnTranslator,
    ) -> None:
        """Serve ``request``: an invalid toolprune header, or a body nested too deep, is a
        400; a request not acted on (disabled, passthrough, malformed) is forwarded
        unchanged; a planned turn is served by ``serve``; one not pruned (small
        catalogue, selection failed, a defect in planning, ``dry-run`` with the report
        header) goes through :meth:`forward_whole`."""
        started = time.perf_counter()
        try:
            mode = pruning_mode(request.headers)
            top_k = top_k_override(request.headers)
            check_conversation_id(request.headers, self.settings.max_conversation_id_bytes)
        except InvalidHeader as error:
            await send_error(send, error)
            return
        if not self.settings.enabled or mode == "off":
            self.count(Decision.DISABLED, log=request.log)
            await self.forwarder.forward(request, send)
            return
        if await body_too_deep(request.body):
            await self.reject_too_deep(request, send)
            return
        try:
            body = await read_body(request.body)
        except RecursionError:
            await self.reject_too_deep(request, send)
            return
        except MalformedRequest as malformed:
            self.malformed(malformed, request)
            await self.forwarder.forward(request, send)
            return
        if body is None:
            self.count(Decision.PASSTHROUGH, log=request.log)
            await self.forwarder.forward(request, send, errors=self.errors)
            return
        interval_s = self.settings.sse_keepalive_s
        if body.get("stream") is not True or self.stream_error is None or interval_s <= 0:
            await self._act(request, send, body, mode, top_k, started, plan, serve, translate)
            return
        keepalive = KeepAliveSend(send, interval_s, self.stream_error)
        async with keepalive.running():
            await self._act(request, keepalive, body, mode, top_k, started, plan, serve, translate)

    async def _act(
        self, request: ClientRequest, send: Send, body: dict[str, Any], mode: str,
        top_k: int | None, started: float, plan: TurnPlanner, serve: TurnServer,
        translate: TurnTranslator,
    ) -> None:
        """:meth:`run` once the body is decoded: plan, then serve or forward."""
        try:
            planned = await self._plan(plan, body, request, top_k, save=mode != "dry-run")
        except RecursionError:
            await self.reject_too_deep(request, send)
            return
        except InvalidToolRequest as invalid:
            self.count(Decision.REJECTED, log=request.log)
            await send_error(send, InvalidTools(invalid.message))
            return
        if not isinstance(planned, Turn):  # counted by _plan
            decision, report = planned
            if decision in (Decision.PASSTHROUGH, Decision.MALFORMED):
                await self.forwarder.forward(request, await unchanged(send), errors=self.errors,
                                             tap=self.tap(body))
            else:
                await self.forward_whole(
                    decision, request, send, body, translate, serve, report, started
                )
            return
        turn = planned
        selection_s = time.perf_counter() - started
        self.metrics.selection_seconds.observe(selection_s)
        report = turn_report(turn, self.api, request.request_id, dry_run=mode == "dry-run")
        if isinstance(send, KeepAliveSend):  # a prefill may outlast the keep-alive interval
            send.declare_headers(report)
        decision = Decision.DRY_RUN if mode == "dry-run" else Decision.PRUNED
        too_deep = False
        try:
            if decision is Decision.DRY_RUN:
                whole = await self.forward_whole(
                    decision, request, send, body, translate, serve, report, started
                )
                if whole is not None:  # what this request ran and called, for the log
                    turn.meta_events, turn.rounds = whole.meta_events, whole.rounds
                    turn.response_calls = whole.response_calls
                return
            self.metrics.tools_offered.observe(turn.offered)
            self.metrics.tools_forwarded.observe(len(turn.plan.selection.tools))
            self.metrics.schema_bytes_saved.inc(max(turn.plan.schema_bytes_saved(), 0))
            try:
                await serve(turn, body, report, started, send)
            except RecursionError:  # writing the rewritten body, before any byte was sent
                if getattr(send, "started", True):
                    raise
                too_deep = True
        finally:
            if not too_deep:  # counted when served (or cut), so a refused body is not
                self.count(decision, turn.path, request.log)
                if decision is Decision.PRUNED:
                    self.metrics.meta_rounds.observe(turn.rounds)
                    self.count_bridge_calls(turn)
                log_decision(turn, decision.value, selection_s, self.api, request.request_id)
                if self.usage is not None:
                    self.usage.record(turn, decision.value)
        if too_deep:
            await self.reject_too_deep(request, send)

    async def forward_whole(
        self, decision: Decision, request: ClientRequest, send: Send, body: dict[str, Any],
        translate: TurnTranslator, serve: TurnServer, report: Headers, started: float,
    ) -> Turn | None:
        """Forward a request that is not pruned, with the ``report`` response headers: its
        translate-only turn served by ``serve`` when ``translate`` gives one, else the
        client's bytes. A request whose catalogue cannot be read, a translation that
        fails (a defect: logged, rate-limited) or a turn too deeply nested to write sends
        the client's bytes too. ``started``: the request's ``time.perf_counter()`` at
        arrival. Returns the translate-only turn served, or None."""
        try:
            whole = await translate(body, request.headers, decision.value)
        except SelectionError:  # the catalogue cannot be read: a fallback said so already
            whole = None
        except Exception as exc:  # noqa: BLE001 - a defect: the bytes as sent are still valid
            self.fallback_log.error(
                "translate", "translation_failed",
                {"api": self.api, "decision": decision.value,
                 "error": f"{type(exc).__name__} at {where(exc)}"},
            )
            whole = None
        if whole is not None:
            try:
                await serve(whole, body, report, started, send)
                return whole
            except RecursionError:  # writing the translated body, before any byte was sent
                if getattr(send, "started", True):
                    raise
        await self.forwarder.forward(
            request, await unchanged(send), extra_response_headers=report, errors=self.errors,
            tap=self.tap(body),
        )
        return None

    def tap(self, body: dict[str, Any]) -> ResponseTap | None:
        """What watches the answer to ``body`` forwarded for the server's speeds (None:
        nothing)."""
        return self.answer_tap(body) if self.answer_tap is not None else None

    async def reject_too_deep(self, request: ClientRequest, send: Send) -> None:
        """Refuse a body nested deeper than :data:`MAX_JSON_DEPTH` levels: 400, counted
        and logged as decision ``rejected`` with reason ``json_too_deep``."""
        self.count(Decision.REJECTED, log=request.log)
        self.log_unplanned(request, Decision.REJECTED, "json_too_deep")
        await send_error(send, RequestTooDeep(
            f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels, the most the "
            "proxy reads"
        ))

    def malformed(self, malformed: MalformedRequest, request: ClientRequest) -> None:
        """Count and log a body its API refuses (``malformed``; the reason says what is
        wrong), which is then forwarded unchanged."""
        self.count(Decision.MALFORMED, log=request.log)
        self.log_unplanned(request, Decision.MALFORMED, str(malformed))

    def log_unplanned(
        self, request: ClientRequest, decision: Decision, reason: str, **fields: object
    ) -> None:
        """The ``pruning_decision`` line of a request not planned: its decision, why
        (``reason``) and any other ``fields``."""
        logger.info("pruning_decision", extra={"fields": {
            "request_id": request.request_id.decode("latin-1"), "api": self.api,
            "decision": decision.value, "reason": reason, **fields,
        }})

    async def _plan(
        self, plan: TurnPlanner, body: dict[str, Any], request: ClientRequest,
        top_k: int | None, *, save: bool,
    ) -> Turn | tuple[Decision, Headers]:
        """The planned turn (saved unless ``save`` is False), or the decision (counted and
        logged) not to prune it — ``passthrough``, ``malformed``, ``small_catalog`` or
        ``fallback`` — with the headers that report it. Raises InvalidToolRequest
        (answered 400)."""
        try:
            return await plan(body, request.headers, top_k, save)
        except InvalidToolRequest:
            raise
        except MalformedRequest as malformed:
            self.malformed(malformed, request)
            return Decision.MALFORMED, []
        except NothingToPrune:
            self.count(Decision.PASSTHROUGH, log=request.log)
            return Decision.PASSTHROUGH, []
        except SmallCatalog as small:
            return Decision.SMALL_CATALOG, self.small_catalog(small, request, top_k)
        except SelectionError as error:
            reason = self.fallback(error, request.log)
        except RecursionError:
            raise  # too deep to plan: refused by ``run``
        except Exception as exc:  # noqa: BLE001 - a defect costs the pruning, never the request
            reason = self.fallback(
                UnexpectedSelectionError(f"{type(exc).__name__} at {where(exc)}"), request.log
            )
        return Decision.FALLBACK, [(FALLBACK_HEADER, reason.encode())]

    def small_catalog(
        self, small: SmallCatalog, request: ClientRequest, top_k: int | None
    ) -> Headers:
        """Count and log a catalogue forwarded whole by rule; the headers that say so:
        every tool forwarded (``X-Tool-Pruning-Tools: N/N``) and why
        (:data:`SMALL_CATALOG_HEADER`)."""
        self.count(Decision.SMALL_CATALOG, small.path, request.log)
        self.metrics.tools_offered.observe(small.size)
        self.log_unplanned(request, Decision.SMALL_CATALOG, small.reason, path=small.path,
                           offered=small.size, forwarded=small.size, top_k=top_k)
        return [(TOOLS_HEADER.encode(), f"{small.size}/{small.size}".encode()),
                (SMALL_CATALOG_HEADER, small.reason.encode())]

    def count(self, decision: Decision, path: str = "none", log: RequestLog | None = None) -> None:
        """Count ``decision``; ``log``: the request's log line, which names it too."""
        self.metrics.decisions.labels(decision.value, path, self.api).inc()
        if log is not None:
            log.decision = decision.value

    def count_bridge_calls(self, turn: Turn) -> None:
        """Count the turn's bridge calls by what was repaired, and by why when refused."""
        for call in turn.bridge_calls:
            for kind in call["repairs"]:
                self.metrics.bridge_repairs.labels(kind).inc()
            if call.get("refused"):
                self.metrics.bridge_refusals.labels(call["refused"]).inc()

    def fallback(self, error: SelectionError, log: RequestLog | None = None) -> str:
        """Count, record and log (rate-limited) a selection failure that sends the
        request with the full catalogue; its reason."""
        self.count(Decision.FALLBACK, log=log)
        if log is not None:  # the request's own line names why: the line below is rate-limited
            log.fallback_reason = error.reason
        if self.usage is not None:
            self.usage.record_fallback(error.reason)
        self.metrics.fallbacks.labels(error.reason).inc()
        self.fallback_log.error(error.reason, "fallback_full_catalog", {
            "api": self.api, "reason": error.reason, "error": type(error).__name__,
            "detail": str(error)})
        return error.reason
