"""One acting request, whatever its API: what selection planned for it (a
:class:`selection.types.Plan`: the catalogue, the selection, the meta-tools), and what its
rounds did (meta-calls run, searches answered, the calls the client got). How its body is
written for the upstream is its API adapter's (:mod:`proxy.turn.adapter`); the forwarded
block's order is the plan's (:meth:`Turn.block_entries`), for every API.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from proxy.servers.fit import Shortfall
from selection.types import (
    BridgedCall,
    ClientSearch,
    Plan,
    SearchResult,
    ToolChoice,
    standard_loads,
)


@dataclass
class MetaCall:
    """A meta-tool call the model made: ``id``, ``name``, ``arguments`` (JSON text)."""

    id: str
    name: str
    arguments: str
    #: Why the model's arguments could not be read (``arguments`` is then ``"{}"``).
    problem: str | None = None


def arguments_text(value: Any) -> str:
    """Tool-call ``arguments`` as text: the APIs send a string; a server that sends the
    object itself (Ollama's native shape) gets it serialised; null is ``""``."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def meta_call(call_id: str, name: str, arguments: str) -> MetaCall:
    """A meta-call whose ``arguments`` is always JSON object text: the parsed value
    re-serialised, or ``"{}"`` with a ``problem`` the model is told about
    (:meth:`proxy.turn.planner.Planner.run_meta_calls`). ``arguments``: the call's
    arguments as the model wrote them (JSON text, maybe cut off)."""
    if not arguments.strip():
        return MetaCall(call_id, name, "{}", "the call had no arguments")
    try:
        value = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):
        return MetaCall(call_id, name, "{}", "the arguments were cut off or are not valid JSON")
    if not isinstance(value, dict):
        return MetaCall(call_id, name, "{}", "the arguments are not a JSON object")
    return MetaCall(call_id, name, json.dumps(value, ensure_ascii=False))


def with_problem(result: str, problem: str) -> str:
    """A meta-call's result (JSON text) with the reason its arguments were not read
    (``MetaCall.problem``) put first in its ``error``."""
    try:
        parsed = json.loads(result)
    except json.JSONDecodeError:
        parsed = None
    parsed = parsed if isinstance(parsed, dict) else {}
    detail = parsed.get("error")
    parsed["error"] = f"{problem}; {detail}" if isinstance(detail, str) else problem
    return json.dumps(parsed)


@dataclass
class Turn:
    """The acting request being served, possibly over several upstream rounds: what
    selection planned for it (``plan``, replaced by each meta round's re-selection; read
    its selection, meta-tools and block from it) and what its rounds did.

    ``conversation`` / ``agent``: the state keys of its conversation and of its agent
    (model, system prompt, catalogue: where the block the upstream last prefilled for it
    is kept; None for a translate-only turn). ``whole``: the decision (``fallback``,
    ``small_catalog``, ``dry_run``) under which the client's catalogue goes whole,
    translated for a plain server (:func:`proxy.turn.translation.whole_turn`); None:
    planned.
    """

    plan: Plan
    conversation: str
    agent: str | None = None
    whole: str | None = None
    rounds: int = 0
    meta_events: list[dict[str, Any]] = field(default_factory=list)
    #: Names of the real tool calls in the response the client got.
    response_calls: list[str] = field(default_factory=list)
    #: What the proxy dropped from the upstream's answers, one note each (decision log).
    notes: list[str] = field(default_factory=list)
    #: Tools admitted by selections this turn made before its latest (meta rounds
    #: re-select; the decision log lists every admission of the turn).
    earlier_admitted: list[str] = field(default_factory=list)
    #: Calls of the client's search tool answered this turn, by call id, in call order.
    searches: dict[str, SearchResult] = field(default_factory=dict)
    #: The upstream's kind, as identified (:mod:`proxy.servers.probe`).
    server: str = "unknown"
    #: The prompt is expected to exceed the model's context (None: it fits, or unknown).
    shortfall: Shortfall | None = None
    #: Each bridge call read this turn: what it became and what was repaired, or why it
    #: was refused (:meth:`selection.types.BridgedCall.report`; no argument values).
    bridge_calls: list[dict[str, Any]] = field(default_factory=list)
    _bridged: dict[tuple[int, str, str], BridgedCall] = field(default_factory=dict, repr=False)

    @property
    def body(self) -> dict[str, Any]:
        """The request as the client sent it."""
        return self.plan.reading.request.body

    @property
    def tool_choice(self) -> ToolChoice:
        return self.plan.reading.choice

    @property
    def offered(self) -> int:
        """The tools the client sent."""
        return self.plan.reading.offered

    @property
    def search(self) -> ClientSearch | None:
        """The client's own search tool, emulated (its function is ``meta.client_search``)."""
        return self.plan.reading.request.search

    @property
    def deferral(self) -> bool:
        """The client deferred tools or brought its own search tool: the deferral contract
        holds (:mod:`selection.clients.deferral`)."""
        return self.plan.reading.deferral.active

    @property
    def finder(self) -> str | None:
        """The plain function the client finds its deferred tools with (a search it runs
        itself: :mod:`selection.clients.client_deferral`), or None."""
        return self.plan.reading.deferral.finder

    @property
    def lexical_only(self) -> bool:
        """Ranked by BM25 alone: the catalogue's dense index was still being built."""
        return self.plan.ranking is not None and self.plan.ranking.lexical_only

    @property
    def partial_index(self) -> bool:
        """Ranked by the texts embedded so far: the catalogue's index was being built."""
        return self.plan.ranking is not None and self.plan.ranking.partial

    @property
    def query_vector(self) -> np.ndarray | None:
        """The whole query's vector, for the usage log (None: not ranked)."""
        return None if self.plan.ranking is None else self.plan.ranking.query_vector

    @property
    def path(self) -> str:
        """Which prompt parts were pruned: ``native``, ``text`` or ``both``."""
        return self.plan.reading.path

    @property
    def decision(self) -> str:
        """The decision it is served under (the ``decision`` label of
        ``toolprune_time_to_first_token_seconds``): ``pruned``, or :attr:`whole`'s."""
        return self.whole or "pruned"

    def is_meta(self, name: str | None) -> bool:
        return self.plan.meta is not None and name in self.plan.meta.names

    def is_bridge(self, name: str | None) -> bool:
        """Whether ``name`` is the bridge's: a call of it stands for a call of a tool
        delivered in the conversation (:meth:`selection.types.Plan.bridged`)."""
        return name is not None and name == self.plan.bridge

    def bridged(self, call_id: str, arguments: str) -> BridgedCall:
        """The bridge call ``call_id`` of this round read into the call it stands for
        (``arguments``: its JSON text; :meth:`selection.types.Plan.bridged`), its outcome
        kept for the decision log and the metrics (:attr:`bridge_calls`) once, however
        often an API's view asks."""
        key = (self.rounds, call_id, arguments)
        made = self._bridged.get(key)
        if made is None:
            made = self._bridged[key] = self.plan.bridged(arguments)
            self.bridge_calls.append(made.report())
        return made

    def add_llama_fields(self, body: dict[str, Any]) -> None:
        """Add to an upstream ``body`` the llama-server fields the proxy sends
        (``n_cache_reuse``), unless the client set them (its value is kept)."""
        if self.plan.cache_reuse:
            body.setdefault("n_cache_reuse", self.plan.cache_reuse)

    def admitted(self) -> list[str]:
        """Every tool admitted this turn: by the first selection and after meta-calls."""
        return list(dict.fromkeys([*self.earlier_admitted, *self.plan.selection.admitted]))

    def offer_meta_now(self, max_rounds: int) -> bool:
        """Meta-tools are offered until ``max_rounds`` re-issues have been made."""
        return self.plan.meta is not None and self.rounds < max_rounds


def json_bytes(value: Any) -> bytes:
    """``value`` as compact-enough UTF-8 JSON; ASCII-escaped when it holds a lone surrogate
    (valid in JSON text, not encodable as UTF-8)."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def json_value(raw: bytes | str) -> Any:
    """JSON text as ``json.loads`` reads it (``msgspec`` first, in C; the standard library
    for what it refuses: ``NaN``, ``1e400``, a lone surrogate escape). Raises
    ``json.JSONDecodeError`` (or ``UnicodeDecodeError``) for what is not JSON or what it
    cannot read (an integer past Python's digits limit, 4,300), and RecursionError for
    JSON nested past the decoder's depth."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return standard_loads(raw)


_decode = msgspec.json.Decoder().decode


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """Sum OpenAI ``usage`` objects (nested ``*_details`` counts too)."""
    if not isinstance(usage, Mapping):
        return total
    if total is None:
        return json.loads(json.dumps(usage))
    for key, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and isinstance(total.get(key), int | float):
            total[key] += value
        elif isinstance(value, Mapping) and isinstance(total.get(key), Mapping):
            total[key] = add_usage(dict(total[key]), value)
        elif key not in total:
            total[key] = value
    return total


def exchanges_by_place(exchanges: Sequence[Mapping[str, Any]], history: int) -> dict[int, list[Any]]:
    """Where a conversation's kept hidden exchanges stand in a client history of
    ``history`` messages or items: place (the number of client items before them) → the
    exchanges' items there, in recording order. An exchange at or past the end is the
    request's own, or an abandoned request's, and is left out."""
    by_place: dict[int, list[Any]] = {}
    for exchange in exchanges:
        at, items = exchange.get("at"), exchange.get("items")
        if isinstance(at, int) and 0 <= at < history and isinstance(items, list):
            by_place.setdefault(at, []).extend(items)
    return by_place


#: Writes one client history item with its calls of tools outside the block as calls of
#: the bridge (its name): an API's own shapes. ``bridged``: the name a call of a tool gives
#: inside the bridge call (None: the call is not written through the bridge).
CallWriter = Callable[[Any, Callable[[str], str | None], str], Any]
#: Puts the kept hidden exchanges back into a history (an API's own shapes).
Splicer = Callable[[list[Any], Sequence[Mapping[str, Any]]], list[Any]]


def as_upstream_saw(turn: Turn, items: list[Any], write: CallWriter, splice: Splicer) -> list[Any]:
    """A client's history (messages or items) as the upstream saw it, for a turn that
    delivers tools in the conversation: every call of a tool outside the block written back
    as the bridge call the model made (``write``), then, while the history continues the
    conversation's, the kept hidden exchanges spliced back where they stood (``splice``).
    ``items`` as they are when the turn does not deliver in the conversation."""
    plan = turn.plan
    bridge = plan.bridge
    if not plan.delivers or bridge is None:
        return items
    written = [write(item, plan.bridged_name, bridge) for item in items]
    return splice(written, plan.state.exchanges) if plan.continued else written
