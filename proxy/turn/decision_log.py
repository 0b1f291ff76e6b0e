"""What an acting request's decision reports: its report headers (``X-Tool-Pruning-Tools``,
``-Index``, ``-Warning``), the one structured ``pruning_decision`` log line (no message
content, no credentials), and the selection errors met after a turn was planned.

``X-Tool-Pruning-Tools`` is ``forwarded/offered``; under the deferral contract (the
client deferred tools or brought its search tool) it goes on with where the forwarded
tools came from: ``; client=N; toolprune=N; search=N``. It counts the tools of the round
whose answer the client gets (the last): a hidden meta round re-selects the turn and the
report is brought up to date (:func:`refresh_report`) for a response not started yet (a
plain one, written after its last round). A stream's headers leave with its first event,
so they count the first round's; such a stream ends with the answer's count as an SSE
comment (:func:`tools_comment`), and the log line's ``forwarded`` is it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.http.headers import TOOLS_HEADER, Headers
from proxy.log import RateLimitedLog, get_logger
from proxy.metrics import Metrics
from proxy.servers.fit import WARNING_HEADER
from proxy.turn.identity import log_id
from proxy.turn.turn import Turn
from selection.types import SelectionError

logger = get_logger("decision")

#: Response header of a turn ranked by BM25 alone (value ``building``): the catalogue's
#: dense index was still being built when the request came.
INDEX_HEADER = b"x-tool-pruning-index"
#: Response header of a dry run (``X-Tool-Pruning: dry-run``, whose ``X-Tool-Pruning-Tools``
#: reports the selection it would have forwarded): the tools it did forward, all, ``N/N``.
DRY_RUN_HEADER = b"x-tool-pruning-dry-run"


def tools_header(turn: Turn) -> bytes:
    """The ``X-Tool-Pruning-Tools`` value (see the module docstring)."""
    value = f"{len(turn.plan.selection.tools)}/{turn.offered}"
    if turn.deferral:
        origins = list(turn.plan.selection.provenance.values())
        value += "".join(f"; {o}={origins.count(o)}" for o in ("client", "toolprune", "search"))
    return value.encode()


def refresh_report(report: Headers, turn: Turn) -> None:
    """Bring the ``X-Tool-Pruning-Tools`` entry of ``report`` (the response's report
    headers, changed in place) up to ``turn``'s latest selection, after a meta round
    re-selected it. A translate-only turn (``turn.whole``) forwards the same tools every
    round, and a dry run's header reports its plan, not them: left as they are."""
    if turn.whole is not None:
        return
    name = TOOLS_HEADER.encode()
    for index, (key, _) in enumerate(report):
        if key == name:
            report[index] = (name, tools_header(turn))


def tools_comment(turn: Turn) -> bytes:
    """The SSE comment that ends a stream whose hidden rounds changed its tools after its
    headers left: the answer's ``X-Tool-Pruning-Tools`` (clients skip comments)."""
    return b": " + TOOLS_HEADER.encode() + b": " + tools_header(turn) + b"\n\n"


def log_decision(
    turn: Turn, decision: str, selection_s: float, api: str, request_id: bytes = b""
) -> None:
    """The one structured log line of an acting request (no message content): what was
    offered, forwarded and why, for any API (``api``: ``chat_completions``, ``responses``,
    ``messages``). ``selection_s``: seconds spent planning; ``request_id``: the request's
    ``X-Request-Id`` (the ``request`` line's, :mod:`proxy.http.request_log`)."""
    selection = turn.plan.selection
    logger.info(
        "pruning_decision",
        extra={
            "fields": {
                "request_id": request_id.decode("latin-1"),
                "api": api,
                "server": turn.server,
                "decision": decision,
                "path": turn.path,
                "conversation": log_id(turn.conversation),
                "turn": selection.state.turn,
                "offered": turn.offered,
                "forwarded": len(selection.tools),
                "admitted": turn.admitted(),
                "evicted": list(selection.evicted),
                "reasons": {t.name: t.reason for t in selection.tools},
                "provenance": selection.provenance,
                "dependency_of": dict(selection.parents),
                "tier": list(selection.tier),
                "best_left_out": [[n, round(s, 3)] for n, s in selection.left_out[:3]],
                "lexical_only": turn.lexical_only,
                "partial_index": turn.partial_index,
                "meta": turn.meta_events,
                "bridge": turn.bridge_calls,
                "rounds": turn.rounds,
                "notes": turn.notes,
                "selection_ms": round(selection_s * 1000, 2),
                **cache_fields(turn),
                **seconds_fields(turn),
                **turn.plan.group_fields(),
            }
        },
    )


def cache_fields(turn: Turn) -> dict[str, Any]:
    """The decision log's prefix-cache fields: the tokens the proxy expects the upstream
    to reuse and to evaluate, whether the forwarded block changed after the conversation
    started (``cache_break``), how the block began (``block``), where later tools reach
    the model (``delivery``: ``conversation`` or ``block``), and where they do in the
    conversation, whether the client's history continued its last request's
    (``history_continued``: False when the client rewrote it) and the tools the turn
    wanted that stay outside the block (``outside``: delivered, or left to a search)."""
    plan = turn.plan
    expectation = plan.expectation
    if expectation is None:
        return {}
    fields: dict[str, Any] = {
        "expected_cached_tokens": expectation.reused,
        "expected_evaluated_tokens": expectation.evaluated,
        "cache_break": expectation.broken,
        "block": plan.block_start,
        "delivery": "conversation" if plan.delivers else "block",
    }
    if plan.delivers:
        fields["history_continued"] = plan.continued
        fields["outside"] = list(plan.selection.outside)
    return fields


def seconds_fields(turn: Turn) -> dict[str, Any]:
    """The decision log's fields of a plan made in seconds: the server's speeds it was
    made for (``speed``, tokens per second; None: unknown, the plan is in tokens), the
    top-k a block chosen afresh took from them (``first_block``) and the tools delivered
    before the model asked (``proactive``)."""
    plan = turn.plan
    return {
        "speed": plan.speed.shown() if plan.speed is not None else None,
        "first_block": plan.first_block,
        "proactive": list(plan.proactive),
    }


def turn_report(turn: Turn, api: str, request_id: bytes, *, dry_run: bool = False) -> Headers:
    """The report headers of a planned turn: ``X-Tool-Pruning-Tools``, ``X-Tool-Pruning-Dry-Run``
    on a dry run, ``X-Tool-Pruning-Index: building`` when it was ranked while its catalogue
    was being indexed, and ``X-Tool-Pruning-Warning`` when its prompt is expected not to fit
    the upstream's context (then one ``prompt_exceeds_context`` line names the setting that
    fixes it)."""
    report: Headers = [(TOOLS_HEADER.encode(), tools_header(turn))]
    if dry_run:
        report.append((DRY_RUN_HEADER, f"{turn.offered}/{turn.offered}".encode()))
    if turn.lexical_only or turn.partial_index:
        report.append((INDEX_HEADER, b"building"))
    if turn.shortfall is not None:
        report.append((WARNING_HEADER, turn.shortfall.header()))
        logger.warning("prompt_exceeds_context", extra={"fields": {
            "request_id": request_id.decode("latin-1"), "api": api, **turn.shortfall.fields()}})
    return report


def late_error_reporter(metrics: Metrics, interval_s: float) -> Callable[[SelectionError], None]:
    """What the shared planner calls with a selection failure after a request was planned
    (saving a meta-tool's loads, a ``search_tools`` query): the request stays pruned, so
    it is not a fallback; counted and logged (rate-limited, at most once per
    ``interval_s`` seconds per reason). The planner serves every API, so no ``api``
    field."""
    log = RateLimitedLog(logger, interval_s)

    def report(error: SelectionError) -> None:
        metrics.late_errors.labels(error.reason).inc()
        log.error(
            f"late:{error.reason}",
            "selection_error_after_planning",
            {"reason": error.reason, "error": type(error).__name__, "detail": str(error)},
        )

    return report
