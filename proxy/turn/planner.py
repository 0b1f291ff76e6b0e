"""Planning an acting request of any API, the proxy's side of it: the keys its state lives
under (headers, credentials), what the upstream is known to be (its kind and the
requested model's facts: :class:`proxy.servers.probe.ServerProbe`; exact token counts),
the metrics, and every state read and write. Every selection decision is the front
door's (:class:`selection.planning.Selector`); the proxy and ``toolprune explain`` share
this code path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from config.settings import Settings
from proxy.http.headers import Headers, state_key
from proxy.metrics import Metrics
from proxy.servers.facts import ModelFacts, PrefixCache, ServerFacts
from proxy.servers.fit import shortfall
from proxy.servers.probe import ServerProbe
from proxy.servers.tokens import tokenizer
from proxy.state.store import StateStore
from proxy.turn.identity import request_conversation
from proxy.turn.turn import MetaCall, Turn, with_problem
from selection.planning import Selector
from selection.types import (
    CacheExpectation,
    ConversationState,
    Plan,
    SelectionError,
    ServerSpeed,
    StateStoreError,
    TurnInput,
    Upstream,
)

#: Hidden exchanges kept per conversation (each a meta-call and its result): past it the
#: oldest goes, and the upstream evaluates what followed it again once.
MAX_EXCHANGES = 200


class InvalidToolRequest(Exception):
    """The request breaks its API's deferral / tool-search contract (a deferred or unknown
    search tool, a reference to a tool it lacks…): a 400 in the API's error shape."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Planner:
    """Plans turns and runs meta-calls through ``selector``, with ``store`` for state.

    ``on_late_error``: called with a selection error that happens after the turn was
    planned (saving meta-tool loads, embedding a ``search_tools`` query): logged and
    counted, it must not fail the request.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        selector: Selector,
        store: StateStore,
        metrics: Metrics,
        on_late_error: Callable[[SelectionError], None],
        upstream: ServerProbe | None = None,
    ) -> None:
        self.settings = settings
        self.selector = selector
        self.store = store
        self.metrics = metrics
        self.on_late_error = on_late_error
        self.upstream = upstream

    async def plan(
        self, request: TurnInput, headers: Headers, top_k: int | None = None, *,
        save: bool = True,
    ) -> Turn:
        """Plan ``request`` (read by its API's adapter) and, when ``save``, record the turn
        in the state store: the conversation's state, its agent's block and the tools to
        count exactly. ``save`` False (a dry run) computes the same turn and changes
        nothing a later request sees.

        Raises: NothingToPrune, SmallCatalog, SelectionError (CatalogError,
        EmbedderError, EmbedderTimeout, StateStoreError): forward the request unchanged."""
        model = request.body.get("model")
        model = model if isinstance(model, str) else None

        async def context() -> int | None:
            return (await self._facts(model))[1].context_tokens

        reading = await self.selector.read(request, top_k=top_k, context_tokens=context)
        # The server's facts before planning: what it is decides what it caches.
        server, facts = await self._facts(model)
        shared = self.settings.state_shared_across_credentials
        conversation = request_conversation(
            headers, request.body, request.messages, request.conversation, reading.identity,
            shared=shared,
        )
        agent = state_key(reading.agent, headers, shared=shared)
        plan = await self.selector.plan(
            reading, state=await self._load_state(conversation), conversation=conversation,
            load_agent=lambda: self._load_state(agent),
            upstream=self._upstream(server, facts, await self._speed(model)), top_k=top_k,
        )
        if plan.ranking is not None:
            self.metrics.embedding_seconds.observe(plan.ranking.embedding_s)
        if plan.expectation is not None:
            self._observe_cache(plan.expectation, bool(plan.selection.evicted),
                                rewritten=plan.delivers and not plan.continued)
        if save:
            await self._save(plan, conversation, agent, tokenizer(facts))
        return Turn(plan, conversation, agent, server=server.kind,
                    shortfall=shortfall(plan.expectation, facts, server))

    async def _facts(self, model: str | None) -> tuple[ServerFacts, ModelFacts]:
        """What the server is and says of ``model``; without a probe, the settings."""
        if self.upstream is None:
            context = self.settings.context_tokens
            source = "TOOLPRUNE_CONTEXT_TOKENS" if context is not None else None
            return ServerFacts(), ModelFacts(context, source)
        return await self.upstream.facts(), await self.upstream.model(model)

    def _upstream(self, server: ServerFacts, facts: ModelFacts,
                  speed: ServerSpeed | None) -> Upstream:
        """What selection reads of the upstream: the model's context, exact token counts
        (its tokenizer's), whether conversations of one agent share its block
        (``prefix_cache``; ``auto``: a server that keeps one prompt per slot), the
        ``n_cache_reuse`` to send (a model llama.cpp serves), whether it caches the
        prompt's prefix (any kind known), where tools needed later reach the model
        (``late_tools``; ``auto``: in the conversation where the prefix is cached), and
        the model's ``speed`` (:meth:`_speed`)."""
        settings, mode = self.settings, self.settings.prefix_cache
        one_prompt = server.prefix_cache is PrefixCache.ONE_PROMPT
        exact = self.upstream.tokens.exact(tokenizer(facts)) if self.upstream else None
        caches = server.prefix_cache is not PrefixCache.UNKNOWN
        late = settings.late_tools
        return Upstream(
            context_tokens=facts.context_tokens, exact=exact,
            shares_agent_block=one_prompt if mode == "auto" else mode == "last_prompt",
            cache_reuse=settings.cache_reuse_tokens if facts.llama_cpp else 0,
            caches_prefix=caches,
            delivery="conversation" if late == "conversation" or (late == "auto" and caches)
            else "block",
            speed=speed,
        )

    async def _speed(self, model: str | None) -> ServerSpeed | None:
        """``model``'s speeds when both are known: learned from the server's answers, by
        this replica or another (:class:`proxy.servers.speeds.SpeedBook`), else the
        settings'; with the tokens its search rounds were seen to take, where they were."""
        if self.upstream is None:
            prefill, decode = self.settings.prefill_tokens_per_s, self.settings.decode_tokens_per_s
            return ServerSpeed(prefill, decode) if prefill and decode else None
        speed = await self.upstream.speeds.known(model)
        prefill, decode = speed.prefill_tps, speed.decode_tps
        if not (prefill and decode):
            return None
        if speed.search_call_tokens is None:
            return ServerSpeed(prefill, decode)
        return ServerSpeed(prefill, decode, speed.search_call_tokens)

    async def _save(self, plan: Plan, conversation: str, agent: str | None,
                    counts: tuple[str, str] | None) -> None:
        """Queue the block's tools to be counted exactly (by ``counts``, the model's
        tokenizer), then :meth:`_save_states`."""
        if self.upstream is not None:
            self.upstream.tokens.count_later(counts, (
                tool for name in plan.state.loaded if (tool := plan.catalog.get(name)) is not None
            ))
        await self._save_states(plan, conversation, agent)

    async def _save_states(self, plan: Plan, conversation: str, agent: str | None) -> None:
        """Save the plan's states: the conversation's and its agent's block. Raises
        StateStoreError."""
        await self._save_state(conversation, plan.state)
        if agent is not None and plan.agent_state is not None:
            await self._save_state(agent, plan.agent_state)

    def _observe_cache(self, expectation: CacheExpectation, evicted: bool, *, rewritten: bool) -> None:
        self.metrics.expected_reused_tokens.observe(expectation.reused)
        self.metrics.expected_evaluated_tokens.observe(expectation.evaluated)
        if expectation.broken:
            reason = "rewritten" if rewritten else "evicted" if evicted else "appended"
            self.metrics.cache_breaks.labels(reason).inc()

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
        """Execute meta-calls (:meth:`selection.planning.Selector.run_meta_calls`): answer
        them, re-select the turn on the conversation's latest state and save it; one result
        per call (JSON text), for every API. A call whose arguments could not be read
        (``MetaCall.problem``) gets a result that says so first. A call of the function
        standing for the client's search tool is also recorded in ``turn.searches`` (by
        call id), for its API adapter to show the client. The turn's admissions so far are
        kept (``Turn.earlier_admitted``): the re-selection reports only its own. A
        translate-only turn (``turn.whole``) only runs its searches: no state."""
        if turn.whole is None:
            for name in turn.plan.selection.admitted:
                if name not in turn.earlier_admitted:
                    turn.earlier_admitted.append(name)
        state = turn.plan.state if turn.whole is not None else await self._latest_state(turn)
        outcome = await self.selector.run_meta_calls(turn.plan, calls, state, turn.conversation)
        for label in outcome.labels:
            self.metrics.meta_calls.labels(label).inc()
        for error in outcome.late:
            self.on_late_error(error)
        turn.plan = outcome.plan
        turn.searches.update(outcome.searches)
        turn.meta_events.extend(outcome.events)
        if turn.whole is None:
            try:
                await self._save_states(outcome.plan, turn.conversation, turn.agent)
            except StateStoreError as error:
                self.on_late_error(error)
        return [
            with_problem(result, call.problem) if call.problem else result
            for call, result in zip(calls, outcome.results, strict=True)
        ]

    async def record_exchange(self, turn: Turn, at: int, items: Sequence[Any]) -> None:
        """Keep a hidden exchange of ``turn`` (``items``: the API's messages or items the
        re-issued round appended) for the conversation's later requests, standing after
        the first ``at`` items of the client's history. Exchanges of an abandoned request
        (a retry, an edited continuation: at or after ``at``, from another turn) are
        dropped; at most :data:`MAX_EXCHANGES` are kept, the oldest going first. A state
        store failure is a late error: the request goes on."""
        number = turn.plan.state.turn
        state = await self._latest_state(turn)
        kept = [
            exchange for exchange in state.exchanges
            if exchange.get("at", 0) < at or (exchange.get("at") == at and exchange.get("turn") == number)
        ]
        kept.append({"at": at, "turn": number, "items": list(items)})
        state.exchanges = kept[-MAX_EXCHANGES:]
        try:
            await self._save_state(turn.conversation, state)
        except StateStoreError as error:
            self.on_late_error(error)

    async def _latest_state(self, turn: Turn) -> ConversationState:
        """The conversation's stored state, which another request of the conversation may
        have changed since this turn was planned (so its loads are kept, not overwritten),
        else this turn's own."""
        try:
            stored = await self.store.get(turn.conversation)
        except StateStoreError as error:
            self.metrics.state_errors.labels("get").inc()
            self.on_late_error(error)
            return turn.plan.selection.state
        return stored if stored is not None else turn.plan.selection.state
