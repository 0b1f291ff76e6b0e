"""Planning an acting request of any API from what its adapter read of it
(:class:`PlanInput`: the catalogue of native tools and of a system-prompt tool block, the
conversation in Chat Completions shape): score the catalogue against the conversation,
select, and build the meta-tools; and executing meta-tool calls. No HTTP: the proxy and
``toolprune explain`` share this code path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from config.settings import Settings
from proxy.http.headers import Headers, state_key
from proxy.metrics import Metrics
from proxy.turn.blocks import agent_block, start_block
from proxy.turn.deferral import read_deferral
from proxy.turn.identity import request_conversation
from proxy.turn.searches import client_search, search_tools, whole_searches
from proxy.turn.text_plan import TextPlan, selection_catalog
from proxy.turn.turn import MetaCall, Turn, with_problem
from proxy.turn.upstream_info import UpstreamInfo
from selection.catalog import Catalog
from selection.engine import SelectionEngine
from selection.errors import SelectionError, StateStoreError
from selection.history import ToolChoice, called_tools
from selection.meta_tools import (
    LoadOutcome,
    build_meta_tools,
    execute_load,
    requested_names,
)
from selection.policy import Policy, catalog_layout
from selection.prefix import (
    CacheExpectation,
    block_signature,
    estimated_text_tokens,
    expect_cache,
    is_meta_entry,
    meta_reserve_tokens,
    prefix_key,
    split_system,
    tool_token_cap,
)
from selection.query import query_parts
from selection.selector import select
from selection.state import ConversationState, StateStore
from selection.text_path import text_called_tools
from selection.tokens import tool_tokens
from selection.tool_search import ClientSearch, search_meta_tools


class SmallCatalog(Exception):
    """The catalogue is forwarded whole (:meth:`~selection.policy.Policy.forwards_whole`):
    ``reason`` ``tools`` (at most ``min_catalog_tools``) or ``saving`` (pruning would save
    less than ``min_saving`` of its schema tokens)."""

    def __init__(self, size: int, path: str, reason: str) -> None:
        self.size = size
        self.path = path
        self.reason = reason


class InvalidToolRequest(Exception):
    """The request breaks its API's deferral / tool-search contract (a deferred or unknown
    search tool, a reference to a tool it lacks…): a 400 in the API's error shape."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NothingToPrune(Exception):
    """No ``tools``/``functions`` and no tool block in a system message."""


@dataclass(frozen=True)
class PlanInput:
    """What the planner reads of one request, whatever its API.

    ``body``: the request as the client sent it (kept on the turn). ``native``: its
    function tools (None: none). ``messages``: the conversation in Chat Completions
    shape, from which the query and the tools called earlier are read. ``choice``: what
    its ``tool_choice`` means. ``text``: a system-prompt tool block (chat completions
    only). ``conversation``: an id the API itself gives the conversation (the Responses
    API's ``conversation`` / ``previous_response_id``); None derives one as for chat.
    ``llama_fields``: llama-server reads its own request fields (``n_cache_reuse``) on
    this API's route (not on Messages: its Anthropic conversion drops them, and the
    expectation is priced without chunk reuse).
    ``search``: the client's own search tool, which the proxy emulates (the upstream is
    offered a function for it instead of ``load_tools`` / ``search_tools``); None: none.
    ``client_runs_search``: the client runs a search tool of its own: no toolprune
    meta-tool, its tools are its CORE (:mod:`proxy.turn.deferral`).
    ``found``: tools earlier searches found, read from the conversation (Anthropic
    ``tool_reference`` blocks, OpenAI ``tool_search_output`` items): kept loaded.
    ``reshaped``: the adapter writes the request for a plain server in another shape than
    the client's beyond ``defer_loading`` (namespaces, search tools or search items), so
    even forwarded whole it is translated (:func:`proxy.turn.translation.whole_turn`).
    """

    body: dict[str, Any]
    native: Catalog | None
    messages: list[Any]
    choice: ToolChoice
    text: TextPlan | None = None
    conversation: str | None = None
    llama_fields: bool = True
    search: ClientSearch | None = None
    client_runs_search: bool = False
    found: tuple[str, ...] = ()
    reshaped: bool = False


class Planner:
    """Plans turns and runs meta-calls for one policy, embedder engine and state store.

    ``on_late_error``: called with a selection error that happens after the turn was
    planned (saving meta-tool loads, embedding a ``search_tools`` query): logged and
    counted, it must not fail the request.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        policy: Policy,
        engine: SelectionEngine,
        store: StateStore,
        metrics: Metrics,
        on_late_error: Callable[[SelectionError], None],
        clock: Callable[[], float] = time.time,
        upstream: UpstreamInfo | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.engine = engine
        self.store = store
        self.metrics = metrics
        self.on_late_error = on_late_error
        self.clock = clock
        self.upstream = upstream

    async def plan(
        self, request: PlanInput, headers: Headers, top_k: int | None = None, *,
        save: bool = True,
    ) -> Turn:
        """Select the tools for ``request`` (read by its API's adapter) and, when ``save``,
        record the turn in the state store: the conversation's state, its agent's block and
        the tools to count exactly. ``save`` False (a dry run) computes the same turn and
        changes nothing a later request sees.

        Raises: NothingToPrune, SmallCatalog, SelectionError (CatalogError,
        EmbedderError, EmbedderTimeout, StateStoreError): forward the request unchanged.

        Deferral (the client deferred tools, or brought its own search tool) is the
        client's contract: its catalogue is planned whatever its size (never forwarded
        whole), the tools it did not defer are forwarded every round, and toolprune
        admits from the deferred ones by its ranking only with ``preload_deferred``."""
        body, native, text, messages = request.body, request.native, request.text, request.messages
        if native is None and text is None:
            raise NothingToPrune()
        catalog = selection_catalog(native, text)
        path = "both" if native is not None and text is not None else "native" if native else "text"
        deferral = read_deferral(
            catalog, native, messages, found=request.found,
            emulated_search=request.search is not None,
            client_runs_search=request.client_runs_search,
        )
        if len(catalog) <= self.policy.min_catalog_tools and not deferral.active:
            raise SmallCatalog(len(catalog), path, "tools")
        # /props first: whether the upstream is llama-server decides what it caches.
        context = (
            await self.upstream.context_tokens() if self.upstream else self.settings.context_tokens
        )
        whole_cap = tool_token_cap(context, self.settings.tool_budget_share, 0)
        if not deferral.active and self.policy.forwards_whole(catalog, top_k, whole_cap):
            raise SmallCatalog(len(catalog), path, "saving")
        preload = self.policy.preload_deferred or not catalog.deferred
        offered = len(catalog)
        conversation = request_conversation(
            headers, body, messages, request.conversation, deferral.identity,
            shared=self.settings.state_shared_across_credentials,
        )
        choice = request.choice
        if deferral.client_searches:  # the client's search is the one discovery mechanism
            choice = replace(choice, offer_meta=False)
        if choice.allowed is not None:
            catalog = catalog.restricted_to(set(choice.allowed))
            if not len(catalog):  # nothing allowed is known: the upstream judges the request
                raise NothingToPrune()
            native = native.restricted_to(set(choice.allowed)) if native else None
        system, conversation_messages = split_system(messages)
        agent = state_key(
            prefix_key(body.get("model"), system, deferral.identity), headers,
            shared=self.settings.state_shared_across_credentials,
        )
        llama = self.upstream is not None and self.upstream.answers_props
        start = await start_block(
            await self._load_state(conversation), conversation, agent,
            shared=self._shares_agent_block(llama), load=self._load_state,
        )
        state = start.state
        settings = self.settings
        parts = query_parts(messages, settings.query_user_messages, settings.query_chars,
                            settings.query_parts)
        scores = named = boost = query_vector = group_match = None
        lexical_only = partial_index = False
        layout = catalog_layout(catalog, self.policy)
        if parts and preload:  # the whole query, then its parts: one embedding call
            scored = await self.engine.score(catalog, self.policy.examples, parts, layout.groups)
            self.metrics.embedding_seconds.observe(scored.embedding_s)
            scores, named, lexical_only = scored.values, scored.named, scored.lexical_only
            partial_index = scored.partial
            boost, query_vector, group_match = scored.boost, scored.query_vector, scored.groups
        pinned = [*([choice.pinned] if choice.pinned else []), *called_tools(messages),
                  *text_called_tools(messages, set(catalog.names))]
        history = estimated_text_tokens(conversation_messages)
        exact = self.upstream.exact_tokens if self.upstream else None
        reserve = meta_reserve_tokens(catalog, self.policy.ranking.tier_size)
        cap = tool_token_cap(context, self.settings.tool_budget_share, history + reserve)
        selection = select(
            catalog, scores, self.policy, state, now=self.clock(), pinned=pinned, top_k=top_k,
            named=named, token_cap=cap, exact=exact, history_tokens=history,
            found=deferral.found, preload=preload, boost=boost,
            client_core=deferral.client_core,
        )
        selection.state.turn = state.turn + 1
        selection.state.history_tokens = history
        meta = None
        forwarded = {tool.name for tool in selection.tools}
        if native is not None and choice.offer_meta and request.search is not None:
            meta = search_meta_tools(request.search, native)  # one discovery mechanism
        elif native is not None and choice.offer_meta and set(native.names) - forwarded:
            core = {t.name for t in selection.tools if t.reason in ("core", "client")}
            meta = build_meta_tools(
                native, core, catalog_layout(native, self.policy).groups.listed,
                search=len(native) > self.settings.search_tools_min_catalog,
                tier=[name for name in selection.tier if native.get(name) is not None],
            )
        core_tokens = sum(
            tool_tokens(tool, exact)
            for name in layout.core
            if (tool := catalog.get(name)) is not None
        )
        reuse = self.settings.cache_reuse_tokens if llama and request.llama_fields else 0
        if meta is None:
            selection.state.meta_at = None  # a meta-tool forwarded later starts at the end
        meta_tokens = estimated_text_tokens(list(meta.definitions)) if meta else 0

        def entry_tokens(entry: str) -> int:
            if is_meta_entry(entry):
                return meta_tokens
            return tool_tokens(tool, exact) if (tool := catalog.get(entry)) else 0

        expectation = expect_cache(
            start.cached,
            block_signature(selection.state.loaded, selection.tier, selection.state.meta_at),
            entry_tokens,
            head_tokens=estimated_text_tokens(system) + core_tokens,
            cached_history_tokens=start.cached_history,
            history_tokens=history,
            reuse=reuse > 0,
        )
        self._observe_cache(expectation, bool(selection.evicted))
        if save:
            if self.upstream is not None:
                self.upstream.count_later(
                    tool for name in selection.state.loaded
                    if (tool := catalog.get(name)) is not None
                )
            await self._save_state(conversation, selection.state)
            await self._save_state(agent, agent_block(selection.state, conversation))
        turn = Turn(
            body, catalog, native, text, conversation, selection, scores, pinned, meta, choice,
            offered, top_k, named, lexical_only=lexical_only,
        )
        turn.agent, turn.expectation = agent, expectation
        turn.block_start = start.kind
        turn.cache_reuse = reuse
        turn.search, turn.deferral, turn.preload = request.search, deferral.active, preload
        turn.client_core, turn.finder = deferral.client_core, deferral.finder
        turn.boost, turn.query_vector, turn.groups = boost, query_vector, group_match
        turn.partial_index = partial_index
        return turn

    def _shares_agent_block(self, llama: bool) -> bool:
        """Whether conversations of one agent share its block (``prefix_cache``; ``auto``:
        when the upstream is llama-server, ``llama``: it answered ``/props``)."""
        mode = self.settings.prefix_cache
        return llama if mode == "auto" else mode == "last_prompt"

    def _observe_cache(self, expectation: CacheExpectation, evicted: bool) -> None:
        self.metrics.expected_reused_tokens.observe(expectation.reused)
        self.metrics.expected_evaluated_tokens.observe(expectation.evaluated)
        if expectation.broken:
            self.metrics.cache_breaks.labels("evicted" if evicted else "appended").inc()

    async def _load_state(self, conversation: str) -> ConversationState:
        try:
            return await self.store.get(conversation) or ConversationState()
        except StateStoreError:
            self.metrics.state_errors.labels("get").inc()
            raise

    async def _save_state(self, conversation: str, state: ConversationState) -> None:
        try:
            await self.store.put(conversation, state)
        except StateStoreError:
            self.metrics.state_errors.labels("put").inc()
            raise

    # --- meta-tools -------------------------------------------------------------
    async def run_meta_calls(self, turn: Turn, calls: Sequence[MetaCall]) -> list[str]:
        """Execute meta-calls: update the conversation's loaded set and state, and return
        one result per call (JSON text), for every API. A call whose arguments could not
        be read (``MetaCall.problem``) gets a result that says so first. A call of the
        function standing for the client's search tool is also recorded in
        ``turn.searches`` (by call id), for its API adapter to show the client; with
        deferral, what the calls load is kept for the conversation
        (``ConversationState.found``). The turn's admissions so far are kept
        (``Turn.earlier_admitted``): the re-selection reports only its own. A
        translate-only turn (``turn.whole``) only runs its searches: nothing to select,
        no state."""
        if turn.whole is not None:
            results = await whole_searches(self.engine, self.policy, self.metrics, turn,
                                           calls, self.on_late_error)
        else:
            for name in turn.selection.admitted:
                if name not in turn.earlier_admitted:
                    turn.earlier_admitted.append(name)
            results = await self._run_planned(turn, calls)
        return [
            with_problem(result, call.problem) if call.problem else result
            for call, result in zip(calls, results, strict=True)
        ]

    async def _run_planned(self, turn: Turn, calls: Sequence[MetaCall]) -> list[str]:
        """:meth:`run_meta_calls` of a planned turn: loads and searches, then the turn's
        re-selection, saved."""
        forwarded = {tool.name for tool in turn.selection.tools}
        outcomes: list[LoadOutcome] = []
        found: list[str] = []  # what the model's searches and loads asked for
        late = self.on_late_error
        for call in calls:
            assert turn.meta is not None
            event: dict[str, Any] = {}
            if call.name == turn.meta.client_search:
                result = await client_search(self.engine, self.policy, turn, call.arguments, late)
                turn.searches[call.id] = result
                admit = tuple(name for name in result.found if name not in forwarded)
                outcome = LoadOutcome(admit, result.content(turn.catalog))
                label = "client_search"
                found += result.found
                event = {"found": list(result.found), "error": result.error}
            elif call.name == turn.meta.load_name:
                outcome = execute_load(requested_names(call.arguments), turn.catalog, forwarded)
                label = "load_tools"
            else:
                outcome = await search_tools(self.engine, self.policy, turn.catalog,
                                             call.arguments, forwarded, late)
                label = "search_tools"
            self.metrics.meta_calls.labels(label).inc()
            forwarded.update(outcome.admit)
            found += outcome.admit
            outcomes.append(outcome)
            turn.meta_events.append({"tool": label, "loaded": list(outcome.admit), **event})
        admit = [name for outcome in outcomes for name in outcome.admit]
        state = await self._latest_state(turn)
        state.meta_calls += len(calls)
        turn.selection = select(
            turn.catalog, turn.scores, self.policy, state, now=self.clock(),
            pinned=turn.pinned, requested=admit, top_k=turn.top_k, named=turn.named,
            found=[*turn.selection.state.found, *(found if turn.deferral else ())],
            preload=turn.preload, boost=turn.boost, client_core=turn.client_core,
        )
        try:
            await self._save_state(turn.conversation, turn.selection.state)
            if turn.agent is not None:
                await self._save_state(
                    turn.agent, agent_block(turn.selection.state, turn.conversation)
                )
        except StateStoreError as error:
            self.on_late_error(error)
        return [outcome.content for outcome in outcomes]

    async def _latest_state(self, turn: Turn) -> ConversationState:
        """The conversation's stored state, which another request of the conversation may
        have changed since this turn was planned (so its loads are kept, not overwritten),
        else this turn's own."""
        try:
            stored = await self.store.get(turn.conversation)
        except StateStoreError as error:
            self.metrics.state_errors.labels("get").inc()
            self.on_late_error(error)
            return turn.selection.state
        return stored if stored is not None else turn.selection.state
