"""Running the search meta-calls the proxy answers itself: toolprune's ``search_tools``
and the function that stands for the client's own search tool
(:mod:`selection.tool_search`). The embedder is the only I/O; a failure of it is a late
error (logged and counted by ``on_late_error``), answered to the model, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from proxy.chat.turn import Turn
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
    unavailable,
)

LateError = Callable[[SelectionError], None]


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
        return unavailable("query", argument)
    return ranked_search(turn.catalog, argument, scored.values)


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
