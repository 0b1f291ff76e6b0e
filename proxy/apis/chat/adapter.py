"""``POST /v1/chat/completions``: decide whether to act, select, rewrite, and serve the
response (plain or streaming) with meta-tool calls handled by the proxy. The decisions
and their counting are :mod:`proxy.chat.decisions`' (shared with the other APIs); a body
is passed through when it is not a JSON object or asks for ``n`` > 1 choices.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.types import Send

from config.settings import Settings
from proxy.chat.context import TurnServices, UsageRecorder
from proxy.chat.decisions import DecisionFlow
from proxy.chat.planner import PlanInput, Planner
from proxy.chat.serving import serve_turn
from proxy.chat.translation import whole_turn
from proxy.chat.turn import MetaCall, Turn
from proxy.chat.upstream_info import UpstreamInfo
from proxy.chat.upstream_kind import StreamingSupport
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import Headers
from proxy.metrics import Metrics
from selection.catalog_cache import CatalogCache
from selection.engine import SelectionEngine
from selection.history import read_tool_choice
from selection.policy import Policy
from selection.state import StateStore


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
        streaming: StreamingSupport | None = None,
    ) -> None:
        """``streaming``: whether streamed turns go upstream streamed (None: always)."""
        self.forwarder = forwarder
        self.shared_state = settings.state_shared_across_credentials
        self.decisions = DecisionFlow(
            api="chat_completions", settings=settings, forwarder=forwarder, metrics=metrics,
            usage=usage,
        )
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
            on_late_error=self.decisions.late_error,
            clock=clock,
            upstream=upstream_info,
        )
        self.services = TurnServices(
            forwarder=forwarder,
            metrics=metrics,
            max_meta_rounds=settings.max_meta_rounds,
            run_meta_calls=self.run_meta_calls,
            upstream_stream=streaming.streams_tool_calls if streaming is not None else None,
        )

    # --- entry ------------------------------------------------------------------
    async def handle(self, request: ClientRequest, send: Send) -> None:
        async def serve(turn: Turn, body: dict[str, Any], report: Headers, started: float) -> None:
            if turn.native is None:  # text path: the response is not rewritten
                rewritten = turn.upstream_body(with_meta=False)
                await self.forwarder.forward(
                    request, send, body=rewritten, extra_response_headers=report
                )
            else:
                await serve_turn(
                    self.services, turn, request, send, report, started,
                    stream=body.get("stream") is True,
                )

        await self.decisions.run(
            request, send, read_body=self._decode, plan=self.planner.plan, serve=serve,
            translate=self._translate,
        )

    async def _translate(
        self, body: dict[str, Any], headers: Headers, decision: str
    ) -> Turn | None:
        """The translate-only turn of a request not pruned (:mod:`proxy.chat.translation`):
        on this API, a native catalogue with deferred functions (``defer_loading`` is not
        forwarded). None: the bytes go as sent."""
        key = "tools" if "tools" in body else "functions" if "functions" in body else None
        messages = body.get("messages")
        if key is None or not isinstance(messages, list):
            return None
        native = self.catalogs.catalog(body[key], legacy=key == "functions")
        request = PlanInput(body, native, messages, read_tool_choice(body))
        return whole_turn(request, headers, decision, shared=self.shared_state)

    async def _decode(self, raw: bytes) -> dict[str, Any] | None:
        """The body as a JSON object (None when it is not one, or asks for ``n`` > 1
        choices), large ones decoded off the loop."""
        if len(raw) > DECODE_IN_THREAD_BYTES:
            body = await asyncio.to_thread(self.catalogs.decode_body, raw)
        else:
            body = self.catalogs.decode_body(raw)
        return body if body is not None and body.get("n") in (None, 1) else None

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
