"""The front door of selection: one turn in, one frozen :class:`~selection.plan.Plan` out.

A :class:`Selector` holds what selection needs across requests (the engine and its
signals, the policy, the query's shape) and answers, for the proxy, ``toolprune
explain`` and ``toolprune eval`` alike:

1. :meth:`Selector.read`: the request's catalogue (native tools and a system-prompt tool
   block), the client's deferral contract, whether it is pruned at all (``NothingToPrune``,
   ``SmallCatalog``) and the keys its state lives under (what names the conversation and
   its agent). No state, no I/O but a thread for a very long system prompt.
2. :meth:`Selector.plan`: the turn's block start (its own block or its agent's, the record
   read through the loader the caller gives), its ranking (:meth:`rank`, the engine: the
   only I/O; none for a tool's result sent back on a kept block,
   :meth:`needs_no_ranking`) and the choice (:meth:`choose`, pure): the tools in block order, the
   meta-tools, the next states of the conversation and its agent, and the prompt tokens
   the upstream is expected to reuse.
3. :meth:`Selector.run_meta_calls`: ``load_tools``, ``search_tools`` and the client's own
   search, answered, and the turn re-selected (:class:`MetaOutcome`).

The caller keeps headers, upstream facts, metrics and every state read and write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from selection.catalog.catalog import Catalog
from selection.catalog.history_facts import HistoryFacts, read_history
from selection.catalog.policy import Policy, catalog_layout
from selection.catalog.text_plan import search_text_plan, selection_catalog
from selection.choosing.block_order import SelectedTool, Selection
from selection.choosing.blocks import BlockStart, agent_block, start_block
from selection.choosing.prefix import (
    prefix_key,
    split_system,
    tool_token_cap,
)
from selection.choosing.seconds import best_ranked, first_block_count
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from selection.clients.bridge import CALL_TOOL, delivered_results
from selection.clients.deferral import Deferral, read_deferral
from selection.clients.searches import Searches
from selection.clients.tool_search import SearchResult, search_meta_tools
from selection.conversation.continuity import HistoryMark
from selection.conversation.history import ToolChoice
from selection.conversation.query import query_parts
from selection.delivery import (
    Delivery,
    client_core,
    proactive_delivery,
    proactive_names,
    read_delivery,
    starts_user_turn,
)
from selection.embedders.protocol import Embedder
from selection.errors import NothingToPrune, SelectionError, SmallCatalog
from selection.indexes.query_embedding import QueryEmbeddingStats
from selection.indexes.tool_index import ToolIndex
from selection.meta_calls import MetaCallLike, answer_meta_call
from selection.plan import Plan, TurnInput, TurnReading, Upstream
from selection.planning_costs import discovers_by_search, expectation, meta_tools, token_cap
from selection.ranking.engine import SelectionEngine
from selection.ranking.pipeline import Ranking


@dataclass(frozen=True)
class SelectorSettings:
    """What a selector reads of the settings besides its policy: the query's shape
    (``query_user_messages`` user messages, ``query_chars`` characters, ``query_parts``
    parts: :func:`selection.conversation.query.query_parts`), the share of the upstream's context the
    forwarded tools may take (``tool_budget_share``), and the catalogue size above which
    the meta-tool is ``search_tools`` rather than ``load_tools``. ``proactive_loads``: on a
    frozen block, whether a new user turn's best tools the block lacks are delivered in the
    conversation before the model asks (``auto``: by the seconds they save, where the
    server's speeds are known; ``always``; ``never``: :attr:`selection.plan.Plan.proactive`).
    ``rankings_logged``: a usage log keeps each turn's ranking for learning, so every turn
    is ranked (:meth:`Selector.needs_no_ranking`)."""

    query_user_messages: int = 1
    query_chars: int = 1000
    query_parts: int = 6
    tool_budget_share: float = 0.5
    search_tools_min_catalog: int = 100
    proactive_loads: str = "auto"
    rankings_logged: bool = False


@dataclass(frozen=True)
class MetaOutcome:
    """Meta-calls answered: ``plan`` re-selected (the same plan for a translate-only
    turn), ``results`` one JSON text per call, ``labels`` what each call was
    (``load_tools``, ``search_tools``, ``client_search``), ``events`` one decision-log
    entry per call, ``searches`` the client-search results by call id (for its API to show
    the client), ``late`` the selection errors met on the way (the answers went on
    without the embedder)."""

    plan: Plan
    results: tuple[str, ...]
    labels: tuple[str, ...]
    events: tuple[dict[str, Any], ...]
    searches: Mapping[str, SearchResult]
    late: tuple[SelectionError, ...]


#: A block chosen afresh with the server's speeds known weighs its ranking's best this many.
FIRST_BLOCK_SCAN = 24


class Selector:
    """Plans turns for one engine (its embedder and signals) and policy (see the module
    docstring). ``clock``: Unix seconds, stamping admissions."""

    def __init__(
        self, engine: SelectionEngine, policy: Policy, settings: SelectorSettings, *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.policy = policy
        self.settings = settings
        self.clock = clock

    @property
    def embedder(self) -> Embedder:
        """The engine's embedder (loaded by the caller: :meth:`Embedder.load`)."""
        return self.engine.embedder

    def warm(self, catalog: Catalog) -> asyncio.Task[tuple[ToolIndex, float]] | None:
        """Start indexing ``catalog`` in the background (``toolprune serve --warm``): the
        build task (its result: the index and the seconds it took), or None when it is
        indexed already."""
        return self.engine.warm(catalog, self.policy.examples)

    @property
    def query_stats(self) -> QueryEmbeddingStats:
        """The query embedder's counters (batches, cache hits), for the metrics."""
        return self.engine.queries.stats

    async def aclose(self) -> None:
        """Stop the engine's builds and close its embedder and stores."""
        await self.engine.aclose()

    async def read(
        self, request: TurnInput, *, top_k: int | None = None,
        context_tokens: Callable[[], Awaitable[int | None]] | None = None,
    ) -> TurnReading:
        """Selection's reading of ``request`` (see :class:`~selection.plan.TurnReading`).
        ``top_k``: the request's override; ``context_tokens``: reads the upstream's context
        (None: unknown), only for a catalogue pruning might enlarge (the caller's I/O).

        Raises: NothingToPrune (no tools and no tool block, or nothing ``allowed_tools``
        names is known), SmallCatalog (forwarded whole: at most ``min_catalog_tools``
        tools, or pruning would save less than ``min_saving``), CatalogError.

        Deferral is the client's contract: its catalogue is planned whatever its size, the
        tools it did not defer are forwarded every round, and toolprune admits from the
        deferred ones by its ranking only with ``preload_deferred``."""
        policy, native, messages = self.policy, request.native, request.messages
        text = None
        if request.text_path and policy.text_formats:
            text = await search_text_plan(messages, policy.text_formats,
                                          policy.min_catalog_tools + 1)
        if native is None and text is None:
            raise NothingToPrune()
        catalog = selection_catalog(native, text)
        deferral = _deferral(request, catalog, native)
        path = "both" if native is not None and text is not None else "native" if native else "text"
        if len(catalog) <= policy.min_catalog_tools and not deferral.active:
            raise SmallCatalog(len(catalog), path, "min_catalog_tools")
        if not deferral.active and policy.forwards_whole(catalog, top_k, None):
            context = await context_tokens() if context_tokens is not None else None
            whole_cap = tool_token_cap(context, self.settings.tool_budget_share, 0)
            if policy.forwards_whole(catalog, top_k, whole_cap):
                raise SmallCatalog(len(catalog), path, "no_saving")
        choice, offered = request.choice, len(catalog)
        if deferral.client_searches:  # the client's search is the one discovery mechanism
            choice = replace(choice, offer_meta=False)
        if choice.allowed is not None:
            catalog = catalog.restricted_to(set(choice.allowed))
            if not len(catalog):  # nothing allowed is known: the upstream judges the request
                raise NothingToPrune()
            native = native.restricted_to(set(choice.allowed)) if native else None
        system, history = split_system(messages)
        return TurnReading(
            request, catalog, native, text, deferral, choice,
            preload=policy.preload_deferred or not catalog.deferred, offered=offered,
            system=system, history=history,
            agent=prefix_key(request.body.get("model"), system, deferral.identity),
        )

    def whole(self, request: TurnInput) -> Plan:
        """The translate-only plan of ``request``, forwarded whole (``fallback``,
        ``small_catalog``, ``dry_run``) yet translated for a plain server
        (:attr:`TurnInput.needs_translation`): every tool the client did not defer, then
        the deferred ones (each group in the client's order), then the function standing
        for its search tool; ``tool_choice`` as the client sent it. Nothing selected,
        scored or stored."""
        native = request.native
        assert native is not None and request.needs_translation
        deferral = _deferral(request, native, native)
        selection = Selection(
            tools=tuple(SelectedTool(tool.name, "whole" if tool.deferred else "client")
                        for tool in native.tools),
            admitted=(), evicted=(), left_out=(), state=ConversationState(),
        )
        search = request.search
        meta = search_meta_tools(search, native) if search and request.choice.offer_meta else None
        system, history = split_system(request.messages)
        reading = TurnReading(
            request, native, native, None, deferral,
            ToolChoice(offer_meta=request.choice.offer_meta), preload=False,
            offered=len(native), system=system, history=history,
            agent=prefix_key(request.body.get("model"), system, deferral.identity),
        )
        return Plan(reading, selection, None, meta, whole=True)

    async def plan(
        self, reading: TurnReading, *, state: ConversationState, conversation: str,
        load_agent: Callable[[], Awaitable[ConversationState]], upstream: Upstream,
        top_k: int | None = None,
    ) -> Plan:
        """The turn's :class:`~selection.plan.Plan`: its block start (its own block or its
        agent's, :func:`selection.choosing.blocks.start_block`), its ranking and the choice.
        ``state``: the conversation's stored state (empty when new); ``conversation``: its
        key (what the agent's record says holds the block); ``load_agent``: reads the
        agent's record. Raises: SelectionError (EmbedderError, EmbedderTimeout,
        StateStoreError from ``load_agent``)."""
        start = await start_block(state, conversation, shared=upstream.shares_agent_block,
                                  load_agent=load_agent)
        told = read_history(reading.request.messages, reading.request.raw_messages,
                            HistoryMark.from_json(start.state.seen))
        delivery = read_delivery(reading, start, upstream, told)
        ranking = None if self.needs_no_ranking(reading, delivery) else await self.rank(reading)
        return self.choose(reading, ranking, start, upstream, told, delivery,
                           conversation=conversation, top_k=top_k)

    def needs_no_ranking(self, reading: TurnReading, delivery: Delivery) -> bool:
        """Whether the turn's query need not be embedded: its block stays as the upstream's
        cache holds it (``frozen``), the request goes on with a user turn rather than
        starting one (nothing is delivered before the model asks but on a new user turn:
        :func:`selection.delivery.proactive_names`), ``tool_choice`` names no tool (which
        could unfreeze the block) and no usage log keeps the turn's ranking for learning
        (:attr:`SelectorSettings.rankings_logged`). Most requests of an agent's session
        are such continuations (a tool's result sent back): they cost no embedding."""
        return (delivery.frozen and not self.settings.rankings_logged
                and reading.choice.pinned is None
                and not starts_user_turn(reading.request.messages))

    async def rank(self, reading: TurnReading) -> Ranking | None:
        """The turn's ranking: the conversation's last user messages and tool results as
        the query's parts, scored by the engine's signals; None when there is no query or
        the turn does not rank (the client defers and ``preload_deferred`` is off).
        Raises: EmbedderError, EmbedderTimeout."""
        settings = self.settings
        parts = query_parts(reading.request.messages, settings.query_user_messages,
                            settings.query_chars, settings.query_parts)
        if not parts or not reading.preload:
            return None
        groups = catalog_layout(reading.catalog, self.policy).groups
        return await self.engine.score(reading.catalog, self.policy.examples, parts, groups)

    def choose(
        self, reading: TurnReading, ranking: Ranking | None, start: BlockStart,
        upstream: Upstream, told: HistoryFacts, delivery: Delivery, *, conversation: str,
        top_k: int | None = None,
    ) -> Plan:
        """The turn's plan from its ranking, on the block it starts from (pure); ``told``:
        what its history says against the mark ``start``'s state holds, ``delivery``: how
        tools reach the model (:func:`selection.delivery.read_delivery`). Where tools are
        delivered in the conversation (:attr:`Upstream.delivery`) and the request
        continues its conversation's history on its own block, the block stays as it is
        (``frozen``), unless ``tool_choice`` names a tool outside it."""
        catalog, messages = reading.catalog, reading.request.messages
        pinned = tuple(dict.fromkeys([
            *([reading.choice.pinned] if reading.choice.pinned else []),
            *told.called, *told.text_called(catalog.name_set),
        ]))
        history = told.history_tokens
        reuse = upstream.cache_reuse if reading.request.llama_fields else 0
        first_block = None
        if (upstream.speed is not None and top_k is None and not self.policy.top_k_configured
                and ranking is not None and not ranking.lexical_only
                and not (delivery.frozen or (start.state.turn and delivery.continued))):
            first_block = first_block_count(upstream.speed, best_ranked(
                catalog, ranking.values, upstream.exact, FIRST_BLOCK_SCAN), self.policy.top_k)
        facts = TurnFacts(
            now=self.clock(), pinned=pinned, exact=upstream.exact,
            top_k=first_block if first_block is not None else top_k,
            token_cap=token_cap(catalog, self.policy, self.settings.tool_budget_share,
                                upstream.context_tokens, history, bridge=delivery.delivers,
                                search=discovers_by_search(
                                    reading, self.settings.search_tools_min_catalog)),
            history_tokens=history, found=reading.deferral.found, preload=reading.preload,
            client_core=delivery.client_core, count_evicts=reuse > 0 or not upstream.caches_prefix,
            frozen=delivery.frozen,
        )
        selection = self._select(reading, ranking, start.state, facts)
        state = selection.state
        state.turn = start.state.turn + 1
        state.history_tokens = history
        state.seen = told.mark.to_json()
        if not delivery.continued:  # what the proxy delivered stood in a history that is gone
            state.exchanges, state.delivered = [], []
        meta = meta_tools(reading, selection, self.policy, self.settings.search_tools_min_catalog,
                          bridge=delivery.delivers)
        if meta is None:
            state.meta_at = None  # a meta-tool forwarded later starts at the end
        expected = expectation(reading, selection, meta, start, self.policy, upstream.exact,
                               reuse=reuse > 0, history_tokens=history)
        proactive = proactive_delivery(
            proactive_names(selection.missing, state.delivered, meta, messages),
            self.settings.proactive_loads, catalog, ranking, upstream.speed, upstream.exact,
            held=[*selection.names, *state.delivered],
        ) if facts.frozen else ()
        return Plan(
            reading, selection, agent_block(state, conversation), meta, ranking,
            pinned, expected, start.kind, top_k, reuse, count_evicts=facts.count_evicts,
            delivers=delivery.delivers, continued=delivery.continued, proactive=proactive,
            speed=upstream.speed, first_block=first_block,
        )

    def _select(
        self, reading: TurnReading, ranking: Ranking | None, state: ConversationState,
        facts: TurnFacts,
    ) -> Selection:
        """:func:`~selection.choosing.selector.select` on ``state``; a frozen block that
        lacks the tool ``tool_choice`` names is unfrozen (the client forces that call)."""
        expansions = self.engine.signals.expansions
        selection = select(reading.catalog, ranking, self.policy, state, facts, expansions)
        if facts.frozen and reading.choice.pinned in selection.outside:
            facts = replace(facts, frozen=False)
            selection = select(reading.catalog, ranking, self.policy, state, facts, expansions)
        return selection

    async def run_meta_calls(
        self, plan: Plan, calls: Sequence[MetaCallLike], state: ConversationState,
        conversation: str,
    ) -> MetaOutcome:
        """Answer ``calls`` and re-select the turn on ``state`` (the conversation's latest
        stored state: another request of it may have changed it since ``plan``, and its
        loads are kept), what they loaded admitted first. With deferral, what they found is
        kept for the conversation (``ConversationState.found``). A translate-only plan
        only answers its searches: nothing to select, no state."""
        searches = Searches(self.engine, self.policy, plan.catalog, plan.speed)
        forwarded = set(plan.selection.names)
        answers = [await answer_meta_call(plan, searches, call, forwarded) for call in calls]
        results = tuple(answer.outcome.content for answer in answers)
        events = tuple(answer.event for answer in answers)
        labels = tuple(answer.label for answer in answers)
        found = {call.id: answer.search for call, answer in zip(calls, answers, strict=True)
                 if answer.search is not None}
        if plan.whole:
            return MetaOutcome(plan, results, labels, events, found, tuple(searches.late))
        admit = [name for answer in answers for name in answer.outcome.admit]
        searched = [name for answer in answers for name in answer.found]
        state.meta_calls += len(calls)
        deferral = plan.reading.deferral
        facts = TurnFacts(
            now=self.clock(), pinned=plan.pinned, requested=admit, top_k=plan.top_k,
            found=[*plan.state.found, *(searched if deferral.active else ())],
            preload=plan.reading.preload, client_core=client_core(deferral, plan.delivers),
            count_evicts=plan.count_evicts, frozen=plan.delivers,
        )
        selection = select(plan.catalog, plan.ranking, self.policy, state, facts,
                           self.engine.signals.expansions).keeping_reasons(plan.selection)
        if plan.delivers:  # the block of the first round stays: loads reach the model here
            results = tuple(delivered_results(
                results, [answer.found for answer in answers], set(plan.selection.names),
                selection.state.delivered, plan.catalog, bridge=plan.bridge or CALL_TOOL,
            ))
        replanned = replace(plan, selection=selection,
                            agent_state=agent_block(selection.state, conversation))
        return MetaOutcome(replanned, results, labels, events, found, tuple(searches.late))

def _deferral(request: TurnInput, catalog: Catalog, native: Catalog | None) -> Deferral:
    """What ``request`` defers, read from its messages (:func:`selection.clients.deferral.read_deferral`)."""
    return read_deferral(
        catalog, native, request.messages, found=request.found,
        emulated_search=request.search is not None,
        client_runs_search=request.client_runs_search,
    )
