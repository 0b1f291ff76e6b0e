"""Running the search meta-calls the proxy answers itself: toolprune's ``search_tools``
and the function that stands for the client's own search tool
(:mod:`selection.tool_search`). Both find the tools the query names first (no embedder
needed; the client's namespace optional), then the ranking's best at or above τ (the
query's identifiers read as words). The embedder is the only I/O; a failure
of it is a late error (logged and counted by ``on_late_error``), never raised: the
search is then ranked by BM25 alone (the semantics of Anthropic's bm25 variant; no I/O),
a tool sharing no word with the query never found. A search that finds nothing loads
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from proxy.turn.turn import MetaCall, Turn
from proxy.metrics import Metrics
from selection.catalog import Catalog
from selection.engine import SelectionEngine
from selection.errors import SelectionError
from selection.meta_tools import (
    LoadOutcome,
    find_group,
    search_outcome,
    search_query,
    search_server,
    unknown_group,
)
from selection.name_search import spelled_out
from selection.policy import Policy, catalog_layout
from selection.tool_search import (
    INVALID_TOOL_INPUT,
    SEARCH_RESULTS,
    SearchResult,
    found_tools,
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
    scores, threshold = await _ranking(engine, policy, turn.catalog, argument, on_late_error)
    return ranked_search(turn.catalog, argument, scores, threshold=threshold)


async def _ranking(
    engine: SelectionEngine, policy: Policy, catalog: Catalog, query: str,
    on_late_error: LateError,
) -> tuple[np.ndarray, float]:
    """A search query's scores and the least score a tool it finds needs: the engine's
    and τ (:data:`LEXICAL_MATCH` when they are BM25 alone: the index is being built and
    nothing of it was embedded in time); BM25 alone when the engine fails. Ranked with the
    catalogue's groups (:mod:`selection.group_ranking`), as the turn's selection, by the
    query with its identifiers written as words (:func:`selection.name_search.spelled_out`)."""
    query = spelled_out(query)
    try:
        groups = catalog_layout(catalog, policy).groups
        scored = await engine.score(catalog, policy.examples, query, groups)
    except SelectionError as error:
        on_late_error(error)
        return (await engine.lexical_task(catalog)).scores(query), LEXICAL_MATCH
    return scored.values, LEXICAL_MATCH if scored.lexical_only else policy.threshold


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
    engine: SelectionEngine, policy: Policy, catalog: Catalog, arguments: str,
    forwarded: set[str], on_late_error: LateError,
) -> LoadOutcome:
    """Answer toolprune's own ``search_tools(query, server?)`` over ``catalog`` (the
    turn's): at most :data:`SEARCH_RESULTS` tools, those the query names first
    (:func:`selection.tool_search.found_tools`). With ``server``, only the tools of the
    group it names (:func:`selection.meta_tools.find_group`), best first whatever their
    score (the model chose the server); an unknown name is answered with the closest
    group names and loads nothing. ``arguments``: the call's JSON text; ``forwarded``:
    the tools the round had (found again, not loaded again)."""
    query, server = search_query(arguments), search_server(arguments)
    if query is None:
        return LoadOutcome((), json.dumps({"error": 'arguments must be {"query": "..."}'}))
    group = None
    if server is not None:
        groups = catalog_layout(catalog, policy).groups.listed
        if (group := find_group(server, groups)) is None:
            return LoadOutcome((), unknown_group(server, groups))
    scores, threshold = await _ranking(engine, policy, catalog, query, on_late_error)
    outside = set() if group is None else set(catalog.names).difference(group.members)
    found = found_tools(catalog, query, scores, limit=SEARCH_RESULTS,
                        threshold=threshold if group is None else -np.inf, exclude=outside)
    return search_outcome(found, catalog, forwarded, None if group is None else group.name)
