"""Running the search meta-calls the proxy answers itself: toolprune's ``search_tools``
and the function that stands for the client's own search tool
(:mod:`selection.tool_search`). The embedder is the only I/O; a failure of it is a late
error (logged and counted by ``on_late_error``), never raised: ``search_tools`` answers
that search is unavailable; a natural-language search of the client's tool is ranked by
BM25 alone (the semantics of Anthropic's bm25 variant; no I/O).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from proxy.turn.turn import MetaCall, Turn
from proxy.metrics import Metrics
from selection.engine import SelectionEngine
from selection.errors import SelectionError
from selection.meta_tools import LoadOutcome, search_outcome
from selection.policy import Policy
from selection.ranking import semantic_candidates
from selection.tool_search import (
    INVALID_TOOL_INPUT,
    SEARCH_RESULTS,
    SearchResult,
    ranked_search,
    regex_search,
    search_argument,
)

LateError = Callable[[SelectionError], None]
#: The least BM25 score (normalised) of a tool a lexical search finds: one query word in
#: its text (a tool with none is never found).
LEXICAL_MATCH = 1e-6


async def client_search(
    engine: SelectionEngine, policy: Policy, turn: Turn, arguments: str, on_late_error: LateError
) -> SearchResult:
    """Run one call of the client's search tool (``turn.search``) with its semantics: a
    regex over the pool, or the query ranked by toolprune's scores. ``arguments``: the
    call's JSON text."""
    assert turn.search is not None
    argument = search_argument(arguments)
    if turn.search.kind == "regex":
        return regex_search(turn.catalog, argument)
    if argument is None:
        return SearchResult(
            "query", None, error=INVALID_TOOL_INPUT,
            message='arguments must be {"query": "what the tool must do"}',
        )
    try:
        scored = await engine.score(turn.catalog, policy.examples, argument)
    except SelectionError as error:
        on_late_error(error)
        lexical = (await engine.lexical_task(turn.catalog)).scores(argument)
        return ranked_search(turn.catalog, argument, lexical, threshold=LEXICAL_MATCH)
    return ranked_search(turn.catalog, argument, scored.values)


async def whole_searches(
    engine: SelectionEngine, policy: Policy, metrics: Metrics, turn: Turn,
    calls: Sequence[MetaCall], on_late_error: LateError,
) -> list[str]:
    """Answer the search calls of a translate-only turn (``turn.whole``; the search
    function is its only meta-tool): each recorded in ``turn.searches`` for the client's
    view and in ``turn.meta_events``; one answer (JSON text) per call. Every tool is
    forwarded already, so nothing is loaded, and no state is read or written."""
    answers = []
    for call in calls:
        result = await client_search(engine, policy, turn, call.arguments, on_late_error)
        turn.searches[call.id] = result
        metrics.meta_calls.labels("client_search").inc()
        turn.meta_events.append({"tool": "client_search", "loaded": [],
                                 "found": list(result.found), "error": result.error})
        answers.append(result.content(turn.catalog))
    return answers


async def search_tools(
    engine: SelectionEngine, policy: Policy, turn: Turn, query: str | None,
    forwarded: set[str], on_late_error: LateError,
) -> LoadOutcome:
    """Answer toolprune's own ``search_tools(query)``: the :data:`SEARCH_RESULTS`
    best-scored tools of the catalogue."""
    if query is None:
        return LoadOutcome((), json.dumps({"error": 'arguments must be {"query": "..."}'}))
    try:
        scored = await engine.score(turn.catalog, policy.examples, query)
    except SelectionError as error:
        on_late_error(error)
        return LoadOutcome((), json.dumps({"error": "tool search is unavailable"}))
    matches = semantic_candidates(turn.catalog, scored.values, SEARCH_RESULTS, -1.0, set())
    return search_outcome([name for name, _ in matches], turn.catalog, forwarded)
