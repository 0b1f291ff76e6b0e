"""One acting request, whatever its API: what was planned for it (the catalogue, the
selection, the meta-tools), and what its rounds did (meta-calls run, searches answered,
the calls the client got). How its body is written for the upstream is its API
adapter's (:mod:`proxy.turn.adapter`); the forwarded block's order is here
(:meth:`Turn.block_entries`), for every API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proxy.turn.text_plan import TextPlan
from selection.catalog import Catalog, canonical_json
from selection.group_ranking import GroupMatch
from selection.history import ToolChoice
from selection.meta_tools import MetaTools
from selection.prefix import CacheExpectation
from selection.selector import Selection
from selection.tool_search import ClientSearch, SearchResult


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


#: Selection reasons of the block's head: the client's CORE, then toolprune's.
_CORE = ("client", "core")


@dataclass
class Turn:
    """The acting request being served, possibly over several upstream rounds.

    ``catalog`` is what selection chose from: the native ``tools`` (``native``) and the
    entries of a text block (``text``), or either alone.
    """

    body: dict[str, Any]
    catalog: Catalog
    native: Catalog | None
    text: TextPlan | None
    conversation: str
    selection: Selection
    scores: np.ndarray | None
    pinned: list[str]
    meta: MetaTools | None
    tool_choice: ToolChoice
    offered: int
    top_k: int | None = None
    #: The tools a one-intent request names (``Scores.named``), kept for meta rounds.
    named: np.ndarray | None = None
    rounds: int = 0
    meta_events: list[dict[str, Any]] = field(default_factory=list)
    #: Names of the real tool calls in the response the client got.
    response_calls: list[str] = field(default_factory=list)
    #: What the proxy dropped from the upstream's answers, one note each (decision log).
    notes: list[str] = field(default_factory=list)
    #: The state key of the conversation's agent (model, system prompt, catalogue): where
    #: the block the upstream last prefilled for it is kept.
    agent: str | None = None
    #: Prompt tokens the proxy expects the upstream to reuse from its KV cache and to
    #: evaluate for this request's first round.
    expectation: CacheExpectation | None = None
    #: ``adopted``: this new conversation's tools began as its agent's last block (the
    #: upstream's cached prefix); ``shared``: this later turn's did, after another
    #: conversation's request (:class:`proxy.turn.blocks.BlockStart`); None otherwise.
    block_start: str | None = None
    #: Tools admitted by selections this turn made before its latest (meta rounds
    #: re-select; the decision log lists every admission of the turn).
    earlier_admitted: list[str] = field(default_factory=list)
    #: Ranked by BM25 alone: the catalogue's dense index was still being built.
    lexical_only: bool = False
    #: Ranked by the texts embedded so far: the catalogue's index was still being built.
    partial_index: bool = False
    #: llama-server's ``n_cache_reuse`` to send when the client did not (0: none).
    cache_reuse: int = 0
    #: The client's own search tool, emulated (its function is ``meta.client_search``).
    search: ClientSearch | None = None
    #: The client deferred tools or brought its own search tool: the deferral contract
    #: holds (:mod:`proxy.turn.deferral`).
    deferral: bool = False
    #: Under the contract, the client's CORE in forwarding order (None: no contract).
    client_core: tuple[str, ...] | None = None
    #: The plain function the client finds its deferred tools with
    #: (:mod:`selection.client_deferral`), or None.
    finder: str | None = None
    #: Selection admits candidates by its ranking (off: deferred tools load by search only).
    preload: bool = True
    #: Calls of the client's search tool answered this turn, by call id, in call order.
    searches: dict[str, SearchResult] = field(default_factory=dict)

    #: Translate-only: the decision (``fallback``, ``small_catalog``, ``dry_run``) under
    #: which the client's catalogue goes whole, translated for a plain server
    #: (:func:`proxy.turn.translation.whole_turn`): no selection, no state. None: planned.
    whole: str | None = None

    #: The learned part of ``scores`` (``Scores.boost``), kept for meta rounds.
    boost: np.ndarray | None = None
    #: The whole query's vector (``Scores.query_vector``), for the usage log.
    query_vector: np.ndarray | None = None
    #: The groups' part of the turn's ranking (``Scores.groups``): the decision log and
    #: ``toolprune explain`` report the groups that matched; None without groups.
    groups: GroupMatch | None = None

    def group_fields(self) -> dict[str, Any]:
        """The decision log's and ``toolprune explain``'s group fields
        (:meth:`selection.group_ranking.GroupMatch.report`): the groups that matched best
        and the tools that came in through their group; none when not ranked by groups."""
        if self.groups is None:
            return {}
        return self.groups.report(self.catalog, [(t.name, t.reason) for t in self.selection.tools])

    @property
    def path(self) -> str:
        """Which prompt parts were pruned: ``native``, ``text`` or ``both``."""
        if self.native is not None and self.text is not None:
            return "both"
        return "native" if self.native is not None else "text"

    @property
    def decision(self) -> str:
        """The decision it is served under (the ``decision`` label of
        ``toolprune_time_to_first_token_seconds``): ``pruned``, or :attr:`whole`'s."""
        return self.whole or "pruned"

    def is_meta(self, name: str | None) -> bool:
        return self.meta is not None and name in self.meta.names

    def block_entries(self, meta: Sequence[Any]) -> list[Any]:
        """The forwarded native tools in block order, as the client defined them (in its
        API's shape, ``defer_loading`` removed): the client's CORE then toolprune's CORE
        tools in catalogue order, then the loaded tools in admission
        order with ``meta`` (the meta-tools' entries, in that shape) after the first
        ``meta_at`` of them (the tools of the block's first request: tools admitted later
        follow the meta-tool, so its text stays in the upstream's cached prefix)."""
        assert self.native is not None
        definitions = {tool.name: tool.forwarded_definition for tool in self.native.tools}
        selected = [t for t in self.selection.tools if t.name in definitions]
        core = [definitions[t.name] for t in selected if t.reason in _CORE]
        rest = [t.name for t in selected if t.reason not in _CORE]
        state = self.selection.state
        at = len(rest)
        if state.meta_at is not None:
            before = set(list(state.loaded)[: state.meta_at])
            at = sum(name in before for name in rest)
        return [
            *core, *(definitions[name] for name in rest[:at]), *meta,
            *(definitions[name] for name in rest[at:]),
        ]

    def schema_bytes_saved(self) -> int:
        """Bytes of tool definitions (JSON, or block text) not forwarded, less the
        meta-tools'."""
        forwarded = {tool.name for tool in self.selection.tools}
        dropped = sum(t.size_bytes for t in self.catalog.tools if t.name not in forwarded)
        meta = self.meta.definitions if self.meta else ()
        return dropped - sum(len(canonical_json(definition)) for definition in meta)

    def add_llama_fields(self, body: dict[str, Any]) -> None:
        """Add to an upstream ``body`` the llama-server fields the proxy sends
        (``n_cache_reuse``), unless the client set them (its value is kept)."""
        if self.cache_reuse:
            body.setdefault("n_cache_reuse", self.cache_reuse)

    def admitted(self) -> list[str]:
        """Every tool admitted this turn: by the first selection and after meta-calls."""
        return list(dict.fromkeys([*self.earlier_admitted, *self.selection.admitted]))

    def offer_meta_now(self, max_rounds: int) -> bool:
        """Meta-tools are offered until ``max_rounds`` re-issues have been made."""
        return self.meta is not None and self.rounds < max_rounds


def json_bytes(value: Any) -> bytes:
    """``value`` as compact-enough UTF-8 JSON; ASCII-escaped when it holds a lone surrogate
    (valid in JSON text, not encodable as UTF-8)."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


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
