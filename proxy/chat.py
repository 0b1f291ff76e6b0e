"""``POST /v1/chat/completions``: decide whether to act, select, rewrite, and serve the
response (plain or streaming) with meta-tool calls handled by the proxy.

Decisions (the ``decision`` label of ``toolprune_requests_total``): ``disabled`` (env
switch or ``X-Tool-Pruning: off``), ``passthrough`` (not JSON, no tools, ``n`` > 1),
``small_catalog``, ``fallback`` (selection failed: the original bytes are forwarded),
``dry_run`` (selection computed and reported, original bytes forwarded), ``pruned``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.forwarding import ClientRequest, Forwarder
from proxy.headers import TOOLS_HEADER, Headers, header
from proxy.log import RateLimitedLog, get_logger
from proxy.metrics import Metrics
from proxy.plain import serve_plain
from proxy.streaming import serve_stream
from proxy.turn import MetaCall, Turn, called_tools, conversation_id, log_id, read_tool_choice
from selection.catalog import parse_functions, parse_tools
from selection.engine import SelectionEngine
from selection.errors import CatalogError, SelectionError, StateStoreError
from selection.meta_tools import (
    LoadOutcome,
    build_meta_tools,
    execute_load,
    requested_names,
    search_outcome,
    search_query,
)
from selection.policy import Policy, catalog_bundles
from selection.query import build_query
from selection.selector import select, semantic_candidates
from selection.state import ConversationState, StateStore

logger = get_logger("decision")

#: Tools a ``search_tools`` call loads at most.
SEARCH_RESULTS = 5


class Decision(StrEnum):
    PRUNED = "pruned"
    PASSTHROUGH = "passthrough"
    DISABLED = "disabled"
    SMALL_CATALOG = "small_catalog"
    FALLBACK = "fallback"
    DRY_RUN = "dry_run"


class _SmallCatalog(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def _parse_json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


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
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.engine = engine
        self.store = store
        self.forwarder = forwarder
        self.metrics = metrics
        self.clock = clock
        self.fallback_log = RateLimitedLog(logger, settings.fallback_log_interval_s)

    # --- entry ------------------------------------------------------------------
    async def handle(self, request: ClientRequest, send: Send) -> None:
        started = time.perf_counter()
        mode = (header(request.headers, b"x-tool-pruning") or b"on").decode("latin-1").lower()
        if not self.settings.enabled or mode == "off":
            self.metrics.decisions.labels(Decision.DISABLED).inc()
            await self.forwarder.forward(request, send)
            return
        body = _parse_json_object(request.body)
        key = None if body is None else "tools" if "tools" in body else (
            "functions" if "functions" in body else None
        )
        if body is None or key is None or body.get("n") not in (None, 1):
            self.metrics.decisions.labels(Decision.PASSTHROUGH).inc()
            await self.forwarder.forward(request, send)
            return
        try:
            turn = await self._plan(request, body, key)
        except _SmallCatalog as small:
            self.metrics.decisions.labels(Decision.SMALL_CATALOG).inc()
            self.metrics.tools_offered.observe(small.size)
            await self.forwarder.forward(request, send)
            return
        except SelectionError as error:
            self._fallback(error)
            await self.forwarder.forward(request, send)
            return
        selection_s = time.perf_counter() - started
        self.metrics.selection_seconds.observe(selection_s)
        tools_header: Headers = [
            (TOOLS_HEADER.encode(), f"{len(turn.selection.tools)}/{turn.offered}".encode())
        ]
        if mode == "dry-run":
            self.metrics.decisions.labels(Decision.DRY_RUN).inc()
            self._log(turn, Decision.DRY_RUN, selection_s)
            await self.forwarder.forward(request, send, extra_response_headers=tools_header)
            return
        self.metrics.decisions.labels(Decision.PRUNED).inc()
        self.metrics.tools_offered.observe(turn.offered)
        self.metrics.tools_forwarded.observe(len(turn.selection.tools))
        self.metrics.schema_bytes_saved.inc(max(turn.schema_bytes_saved(), 0))
        serve = serve_stream if body.get("stream") is True else serve_plain
        try:
            await serve(self, turn, request, send, tools_header, started)
        finally:
            self.metrics.meta_rounds.observe(turn.rounds)
            self._log(turn, Decision.PRUNED, selection_s)

    # --- planning ---------------------------------------------------------------
    async def _plan(self, request: ClientRequest, body: dict[str, Any], key: str) -> Turn:
        catalog = parse_tools(body[key]) if key == "tools" else parse_functions(body[key])
        if len(catalog) <= self.policy.min_catalog_tools:
            raise _SmallCatalog(len(catalog))
        offered = len(catalog)
        choice = read_tool_choice(body)
        if choice.allowed is not None:
            catalog = catalog.restricted_to(set(choice.allowed))
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise CatalogError("messages is not an array")
        conversation = conversation_id(header(request.headers, b"x-conversation-id"), body, catalog)
        state = await self._load_state(conversation)
        query = build_query(messages, self.settings.query_user_messages, self.settings.query_chars)
        scores = None
        if query:
            scored = await self.engine.score(catalog, self.policy.examples, query)
            self.metrics.embedding_seconds.observe(scored.embedding_s)
            scores = scored.values
        pinned = [*([choice.pinned] if choice.pinned else []), *called_tools(messages)]
        top_k = self._top_k_override(request)
        selection = select(
            catalog, scores, self.policy, state, now=self.clock(), pinned=pinned, top_k=top_k
        )
        selection.state.turn += 1
        meta = None
        if choice.offer_meta and len(selection.tools) < len(catalog):
            core = {t.name for t in selection.tools if t.reason == "core"}
            meta = build_meta_tools(
                catalog, core, catalog_bundles(catalog, self.policy),
                search=len(catalog) > self.settings.search_tools_min_catalog,
            )
        await self._save_state(conversation, selection.state)
        return Turn(
            body, catalog, conversation, selection, scores, pinned, meta, choice, offered, top_k
        )

    def _top_k_override(self, request: ClientRequest) -> int | None:
        value = header(request.headers, b"x-tool-pruning-top-k")
        return int(value) if value is not None and value.isdigit() else None

    async def _load_state(self, conversation: str) -> ConversationState:
        try:
            return await self.store.get(conversation) or ConversationState()
        except StateStoreError:
            self.metrics.state_errors.labels("get").inc()
            raise

    async def _save_state(self, conversation: str, state: ConversationState) -> None:
        try:
            await self.store.put(conversation, state)
        except StateStoreError:
            self.metrics.state_errors.labels("put").inc()
            raise

    # --- meta-tools -------------------------------------------------------------
    async def run_meta_calls(self, turn: Turn, calls: Sequence[MetaCall]) -> list[str]:
        """Execute meta-calls: update the conversation's loaded set and state, and return
        one ``tool`` message content per call (JSON text)."""
        forwarded = {tool.name for tool in turn.selection.tools}
        outcomes: list[LoadOutcome] = []
        for call in calls:
            assert turn.meta is not None
            if call.name == turn.meta.load_name:
                outcome = execute_load(requested_names(call.arguments), turn.catalog, forwarded)
                label = "load_tools"
            else:
                outcome = await self._search(turn, search_query(call.arguments), forwarded)
                label = "search_tools"
            self.metrics.meta_calls.labels(label).inc()
            forwarded.update(outcome.admit)
            outcomes.append(outcome)
            turn.meta_events.append({"tool": label, "loaded": list(outcome.admit)})
        admit = [name for outcome in outcomes for name in outcome.admit]
        state = turn.selection.state
        state.meta_calls += len(calls)
        turn.selection = select(
            turn.catalog, turn.scores, self.policy, state, now=self.clock(),
            pinned=turn.pinned, requested=admit, top_k=turn.top_k,
        )
        try:
            await self._save_state(turn.conversation, turn.selection.state)
        except StateStoreError as error:
            self._fallback(error, count=False)
        return [outcome.content for outcome in outcomes]

    async def _search(self, turn: Turn, query: str | None, forwarded: set[str]) -> LoadOutcome:
        if query is None:
            return LoadOutcome((), json.dumps({"error": 'arguments must be {"query": "..."}'}))
        try:
            scored = await self.engine.score(turn.catalog, self.policy.examples, query)
        except SelectionError as error:
            self._fallback(error, count=False)
            return LoadOutcome((), json.dumps({"error": "tool search is unavailable"}))
        matches = semantic_candidates(turn.catalog, scored.values, SEARCH_RESULTS, -1.0, set())
        return search_outcome([name for name, _ in matches], turn.catalog, forwarded)

    # --- observability ----------------------------------------------------------
    def _fallback(self, error: SelectionError, *, count: bool = True) -> None:
        if count:
            self.metrics.decisions.labels(Decision.FALLBACK).inc()
        self.metrics.fallbacks.labels(error.reason).inc()
        self.fallback_log.error(
            error.reason,
            "fallback_full_catalog",
            {"reason": error.reason, "error": type(error).__name__, "detail": str(error)},
        )

    def _log(self, turn: Turn, decision: Decision, selection_s: float) -> None:
        selection = turn.selection
        logger.info(
            "pruning_decision",
            extra={
                "fields": {
                    "decision": decision.value,
                    "path": "native",
                    "conversation": log_id(turn.conversation),
                    "turn": selection.state.turn,
                    "offered": turn.offered,
                    "forwarded": len(selection.tools),
                    "admitted": list(selection.admitted),
                    "evicted": list(selection.evicted),
                    "reasons": {t.name: t.reason for t in selection.tools},
                    "best_left_out": [[n, round(s, 3)] for n, s in selection.left_out[:3]],
                    "meta": turn.meta_events,
                    "rounds": turn.rounds,
                    "selection_ms": round(selection_s * 1000, 2),
                }
            },
        )

