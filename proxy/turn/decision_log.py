"""What an acting request's decision reports: ``X-Tool-Pruning-Tools`` and the one
structured ``pruning_decision`` log line (no message content, no credentials).

``X-Tool-Pruning-Tools`` is ``forwarded/offered``; under the deferral contract (the
client deferred tools or brought its search tool) it goes on with where the forwarded
tools came from, as planned for the first round: ``; client=N; toolprune=N; search=N``.
"""

from __future__ import annotations

from typing import Any

from proxy.log import get_logger
from proxy.turn.identity import log_id
from proxy.turn.turn import Turn

logger = get_logger("decision")


def tools_header(turn: Turn) -> bytes:
    """The ``X-Tool-Pruning-Tools`` value (see the module docstring)."""
    value = f"{len(turn.plan.selection.tools)}/{turn.offered}"
    if turn.deferral:
        origins = list(turn.plan.selection.provenance.values())
        value += "".join(f"; {o}={origins.count(o)}" for o in ("client", "toolprune", "search"))
    return value.encode()


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
                "rounds": turn.rounds,
                "notes": turn.notes,
                "selection_ms": round(selection_s * 1000, 2),
                **cache_fields(turn),
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
