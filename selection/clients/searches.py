"""Answering the meta-calls the proxy runs itself: ``load_tools``, toolprune's
``search_tools`` and the function that stands for the client's own search tool
(:mod:`selection.clients.tool_search`). Both searches find the tools the query names first (no
embedder needed; the client's namespace optional), then the ranking's best at or above τ
(the query's identifiers read as words). The embedder is the only I/O; a
failure of it is a late error (returned for the proxy to log and count), never raised:
the search is then ranked by BM25 alone (the semantics of Anthropic's bm25 variant; no
I/O), a tool sharing no word with the query never found. A search that finds nothing
loads nothing.
"""

from __future__ import annotations

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.policy import Policy, catalog_layout
from selection.choosing.seconds import ServerSpeed, delivered_count, ranked_tools
from selection.clients.meta_tools import (
    LoadOutcome,
    answer_text,
    find_group,
    search_outcome,
    search_query,
    search_server,
    unknown_group,
)
from selection.clients.name_search import exactly_named, spelled_out
from selection.clients.tool_search import (
    INVALID_TOOL_INPUT,
    SEARCH_RESULTS,
    ClientSearch,
    SearchResult,
    found_tools,
    ranked_search,
    regex_search,
    search_argument,
)
from selection.errors import SelectionError
from selection.ranking.engine import SelectionEngine

#: The least BM25 score (normalised) of a tool a lexical search finds: one query word in
#: its text (a tool with none is never found).
LEXICAL_MATCH = 1e-6


class Searches:
    """The searches of one catalogue, ranked by ``engine`` under ``policy``; ``speed``:
    the upstream's speeds, where known (a search then loads the finds worth their
    prefill: :func:`selection.choosing.seconds.delivered_count`); ``late``: the selection
    errors met on the way (the search went on without the embedder)."""

    def __init__(self, engine: SelectionEngine, policy: Policy, catalog: Catalog,
                 speed: ServerSpeed | None = None) -> None:
        self.engine = engine
        self.policy = policy
        self.catalog = catalog
        self.speed = speed
        self.late: list[SelectionError] = []

    async def client_search(self, search: ClientSearch, arguments: str) -> SearchResult:
        """Run one call of the client's search tool with its semantics: a regex over the
        pool, or the query ranked by toolprune's scores. ``arguments``: the call's JSON
        text."""
        argument = search_argument(arguments)
        if search.kind == "regex":
            return regex_search(self.catalog, argument)
        if argument is None:
            return SearchResult(
                "query", None, error=INVALID_TOOL_INPUT,
                message='arguments must be {"query": "what the tool must do"}',
            )
        scores, threshold = await self._ranking(argument)
        return ranked_search(self.catalog, argument, scores, threshold=threshold)

    async def search_tools(self, arguments: str, forwarded: set[str]) -> LoadOutcome:
        """Answer toolprune's own ``search_tools(query, server?)``: at most
        :data:`SEARCH_RESULTS` tools of the catalogue, those the query names first
        (:func:`selection.clients.tool_search.found_tools`). With ``server``, only the tools of the
        group it names (:func:`selection.clients.meta_tools.find_group`), best first whatever their
        score (the model chose the server); an unknown name is answered with the closest
        group names and loads nothing. A query that is a tool's name
        (:func:`selection.clients.name_search.exactly_named`: "create issue", ``create_issue``)
        loads what it names; the other finds are listed by name and purpose, not loaded
        (each would cost its schema's prefill, and a change of the block later costs
        everything after it); where the upstream's speeds are known, only the finds worth
        their prefill are loaded. ``arguments``: the call's JSON text."""
        query, server = search_query(arguments), search_server(arguments)
        if query is None:
            return LoadOutcome((), answer_text({"error": 'arguments must be {"query": "..."}'}))
        group = None
        if server is not None:
            groups = catalog_layout(self.catalog, self.policy).groups.listed
            if (group := find_group(server, groups)) is None:
                return LoadOutcome((), unknown_group(server, groups))
        scores, threshold = await self._ranking(query)
        outside = set() if group is None else set(self.catalog.names).difference(group.members)
        found = found_tools(self.catalog, query, scores, limit=SEARCH_RESULTS,
                            threshold=threshold if group is None else -np.inf, exclude=outside)
        named = set(exactly_named(self.catalog, query, exclude=outside))
        loads = [name for name in found if name in named]
        if not loads:
            worth = set(self._worth_loading([name for name in found if name not in forwarded],
                                            scores, lexical=threshold == LEXICAL_MATCH))
            loads = [name for name in found if name in forwarded or name in worth]
        return search_outcome(loads, self.catalog, forwarded,
                              None if group is None else group.name,
                              listed=[name for name in found if name not in loads])

    def _worth_loading(self, found: list[str], scores: np.ndarray, *, lexical: bool) -> list[str]:
        """Of a search's finds the model does not hold (best first, as ``scores`` rank the
        catalogue), those it loads: all where the upstream's speeds are not known, else
        those whose definitions' prefill is worth the search round they spare (at least
        the best one; only it on BM25's scores alone, ``lexical``, while the catalogue's
        index is built: the odds are fitted on the whole ranking's); the others are
        listed by name."""
        if self.speed is None or not found:
            return found
        if lexical:
            return found[:1]
        positions = [index for name in found if (index := self.catalog.index_of(name)) is not None]
        ranked = ranked_tools(self.catalog, scores, None, positions)
        return found[: max(1, delivered_count(self.speed, ranked))]

    async def _ranking(self, query: str) -> tuple[np.ndarray, float]:
        """A search query's scores and the least score a tool it finds needs: the engine's
        and τ (:data:`LEXICAL_MATCH` when they are BM25 alone: the index is being built and
        nothing of it was embedded in time); BM25 alone when the engine fails. Ranked with
        the catalogue's groups (:mod:`selection.ranking.group_ranking`), as the turn's selection, by
        the query with its identifiers written as words
        (:func:`selection.clients.name_search.spelled_out`)."""
        query = spelled_out(query)
        try:
            groups = catalog_layout(self.catalog, self.policy).groups
            ranked = await self.engine.score(self.catalog, self.policy.examples, query, groups)
        except SelectionError as error:
            self.late.append(error)
            return (await self.engine.lexical_task(self.catalog)).scores(query), LEXICAL_MATCH
        return ranked.values, LEXICAL_MATCH if ranked.lexical_only else self.policy.threshold
