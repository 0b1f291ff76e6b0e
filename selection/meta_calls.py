"""One meta-call of a round answered: ``load_tools``, ``search_tools``, the function standing
for the client's own search, and a call of the ``call_tool`` bridge the proxy keeps (a
meta-tool called through it is run as that meta-tool; one that cannot be made is answered
with why: :mod:`selection.clients.bridge_calls`). The turn is re-selected by the front door
(:meth:`selection.planning.Selector.run_meta_calls`). No I/O but the engine's, through the
searches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from selection.clients.meta_tools import LoadOutcome, execute_load, requested_names
from selection.clients.searches import Searches
from selection.clients.shown_names import tool_named
from selection.clients.tool_search import SearchResult
from selection.plan import Plan


class MetaCallLike(Protocol):
    """A meta-tool call the model made: ``id``, ``name``, ``arguments`` (JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class MetaAnswer:
    """One meta-call answered: what it loads and its content (``outcome``), its ``label``
    (``load_tools``, ``search_tools``, ``client_search``, ``call_tool``), its decision-log
    ``fields``, the client-search result (``search``; None: another call), what it
    ``found``."""

    outcome: LoadOutcome
    label: str
    fields: Mapping[str, Any]
    search: SearchResult | None
    found: tuple[str, ...]

    @property
    def event(self) -> dict[str, Any]:
        return {"tool": self.label, "loaded": list(self.outcome.admit), **self.fields}


@dataclass(frozen=True)
class _Rerouted:
    """A meta-tool's call the model made through the bridge, as the call it stands for."""

    id: str
    name: str
    arguments: str


async def answer_meta_call(
    plan: Plan, searches: Searches, call: MetaCallLike, forwarded: set[str]
) -> MetaAnswer:
    """``call`` (a meta-call of ``plan``'s round) answered; what it loads joins
    ``forwarded`` (the tools the round's upstream request holds, and the loads so far)."""
    meta = plan.meta
    assert meta is not None
    if call.name == meta.client_search:
        assert plan.reading.request.search is not None
        result = await searches.client_search(plan.reading.request.search, call.arguments)
        admit = () if plan.whole else tuple(n for n in result.found if n not in forwarded)
        answer = MetaAnswer(LoadOutcome(admit, result.content(plan.catalog)), "client_search",
                            {"found": list(result.found), "error": result.error},
                            result, result.found)
    elif call.name == meta.bridge:  # a meta-tool called through it, or a refused call
        made = plan.bridged(call.arguments)
        if made.runs_meta and made.name is not None:
            rerouted = _Rerouted(call.id, made.name, made.arguments)
            return await answer_meta_call(plan, searches, rerouted, forwarded)
        refused = made.error or '{"error": "the call was not made"}'
        answer = MetaAnswer(LoadOutcome((), refused), "call_tool", {}, None, ())
    elif call.name == meta.load_name:
        requested = requested_names(call.arguments)  # by their names or as a delivery showed them
        named = None if requested is None else [tool_named(name, plan.catalog) for name in requested]
        outcome = execute_load(named, plan.catalog, forwarded)
        answer = MetaAnswer(outcome, "load_tools", {}, None, outcome.admit)
    else:
        outcome = await searches.search_tools(call.arguments, forwarded)
        answer = MetaAnswer(outcome, "search_tools", {}, None, outcome.admit)
    forwarded.update(answer.outcome.admit)
    return answer
