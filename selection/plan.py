"""The front door's types (:mod:`selection.planning`): what a turn brings
(:class:`TurnInput`), what the upstream is known to be (:class:`Upstream`), selection's
reading of the request before any state is loaded (:class:`TurnReading`), and what it
decides (:class:`Plan`, frozen). Plain data and the pure views of it an API adapter writes
the upstream's request from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from selection.catalog.catalog import Catalog, canonical_json
from selection.catalog.text_plan import TextPlan
from selection.choosing.block_order import Selection
from selection.choosing.prefix import CacheExpectation
from selection.choosing.seconds import ServerSpeed
from selection.choosing.state import ConversationState
from selection.clients.bridge import CALL_TOOL, delivering
from selection.clients.bridge_calls import BridgedCall, bridge_targets, read_bridge_call
from selection.clients.client_deferral import compact_search_results
from selection.clients.deferral import Deferral
from selection.clients.meta_tools import MetaTools
from selection.clients.shown_names import shown_name
from selection.clients.tool_search import ClientSearch
from selection.conversation.continuity import RawHistory
from selection.conversation.history import ToolChoice
from selection.ranking.group_ranking import GroupMatch
from selection.ranking.pipeline import Ranking

#: Selection reasons of the block's head: the client's CORE, then toolprune's.
_CORE = ("client", "core")


@dataclass(frozen=True)
class TurnInput:
    """What a turn brings, whatever its API (read by its adapter).

    ``body``: the request as the client sent it. ``native``: its function tools (None:
    none). ``messages``: the conversation in Chat Completions shape, from which the query
    and the tools called earlier are read. ``choice``: what its ``tool_choice`` means.
    ``text_path``: a tool block in a system message may be pruned too (Chat Completions).
    ``conversation``: an id the API itself gives the conversation (the Responses API's
    ``conversation`` / ``previous_response_id``); None derives one from the messages.
    ``llama_fields``: llama-server reads its own request fields (``n_cache_reuse``) on
    this API's route (not on Messages: its Anthropic conversion drops them, and the
    expectation is priced without chunk reuse). ``search``: the client's own search tool,
    which the proxy emulates (the upstream is offered a function for it instead of
    ``load_tools`` / ``search_tools``); None: none. ``client_runs_search``: the client
    runs a search tool of its own: no toolprune meta-tool, its tools are its CORE
    (:mod:`selection.clients.deferral`). ``found``: tools earlier searches found, read from the
    conversation (Anthropic ``tool_reference`` blocks, OpenAI ``tool_search_output``
    items): kept loaded. ``reshaped``: the adapter writes the request for a plain server
    in another shape than the client's beyond ``defer_loading`` (namespaces, search tools
    or search items), so even forwarded whole it is translated. ``bridges``: the adapter
    writes the bridge (its views make a bridge call the client's call, its history writes
    the client's calls back), so tools may be delivered in the conversation.
    ``server_history``: the upstream holds the conversation's history (the Responses API's
    ``previous_response_id`` / ``conversation``) and ``messages`` are only what is new:
    the request continues its conversation whatever they hold. ``raw_messages``: the
    ``messages`` array's bytes as the client sent them, where the adapter keeps them
    (:class:`~selection.conversation.continuity.RawHistory`: the history is checked and
    read from them, :mod:`selection.catalog.history_facts`); None: read from ``messages``."""

    body: dict[str, Any]
    native: Catalog | None
    messages: list[Any]
    choice: ToolChoice
    text_path: bool = False
    conversation: str | None = None
    llama_fields: bool = True
    search: ClientSearch | None = None
    client_runs_search: bool = False
    found: tuple[str, ...] = ()
    reshaped: bool = False
    bridges: bool = False
    server_history: bool = False
    raw_messages: RawHistory | None = None

    @property
    def needs_translation(self) -> bool:
        """Whether the request, forwarded whole, must still be translated for a plain
        server: it has function tools and defers some, brings a search tool the proxy
        emulates, or its adapter reshapes it."""
        native = self.native
        return native is not None and (
            bool(native.deferred) or self.search is not None or self.reshaped
        )


@dataclass(frozen=True)
class Upstream:
    """What the proxy knows of the upstream for one turn: ``context_tokens`` (its context
    size, None: unknown), ``exact`` (exact prompt tokens per tool fingerprint, from its
    tokenizer; None: estimated), ``shares_agent_block`` (it keeps one prompt per agent, so
    conversations of one agent share its block: ``prefix_cache`` ``last_prompt``),
    ``cache_reuse`` (llama-server's ``n_cache_reuse`` the proxy sends; 0: none) and
    ``caches_prefix`` (it is known to cache the prompt's prefix, llama-server: a tool
    removed from the block costs every tool after it, unless chunks are reused).
    ``delivery``: where tools needed after a conversation's first request reach the model:
    ``conversation`` (the block stays as the upstream cached it; a meta-call's result
    carries their definitions and the model calls them through the bridge,
    :mod:`selection.clients.bridge`) or ``block`` (the block grows). ``speed``: the
    model's prefill and decode speeds (None: not known; the plan is then made in tokens,
    else in seconds: :mod:`selection.choosing.seconds`)."""

    context_tokens: int | None = None
    exact: Mapping[str, int] | None = None
    shares_agent_block: bool = False
    cache_reuse: int = 0
    caches_prefix: bool = False
    delivery: Literal["conversation", "block"] = "block"
    speed: ServerSpeed | None = None


@dataclass(frozen=True)
class TurnReading:
    """Selection's reading of a turn before any state: ``catalog`` (what it selects from:
    the native tools, then a text block's entries; restricted to ``allowed_tools``),
    ``native`` (restricted alike), ``text`` (the system-prompt tool block, or None),
    ``deferral`` (the client's contract), ``choice`` (meta-tools off where the client's
    search is the one discovery mechanism), ``preload`` (candidates are admitted by the
    ranking), ``offered`` (tools the client sent), ``system`` (the leading system text)
    and ``history`` (the messages after it). ``identity``: the fingerprint of the
    catalogue's part that names the conversation; ``agent``: the agent it belongs to
    (model, system prompt, that part), before the proxy scopes it by credential."""

    request: TurnInput
    catalog: Catalog
    native: Catalog | None
    text: TextPlan | None
    deferral: Deferral
    choice: ToolChoice
    preload: bool
    offered: int
    system: str
    history: list[Any]
    agent: str

    @property
    def identity(self) -> str:
        return self.deferral.identity

    @property
    def path(self) -> str:
        """Which prompt parts are pruned: ``native``, ``text`` or ``both``."""
        if self.native is not None and self.text is not None:
            return "both"
        return "native" if self.native is not None else "text"


@dataclass(frozen=True)
class Plan:
    """What selection decided for one turn (or, after meta-calls, one round of it).

    ``selection``: the forwarded tools in block order with their reasons, and the
    conversation's next state (:attr:`state`); ``agent_state``: what the agent's record
    becomes (the block its next conversation starts from); ``meta``: the meta-tools
    offered (None: none); ``ranking``: the turn's scores (None: not ranked);
    ``pinned``: the tools ``tool_choice`` and the history pin; ``expectation``: the
    prompt tokens the upstream is expected to reuse and evaluate; ``block_start``:
    ``adopted`` / ``shared`` when the block began as the agent's (None: its own);
    ``top_k``: the request's override; ``cache_reuse``: llama-server's ``n_cache_reuse``
    to send (0: none); ``whole``: a translate-only plan (every tool forwarded, nothing
    selected or stored); ``count_evicts``: ``max_tools`` evicts (False where an eviction
    costs the upstream every tool after it: :mod:`selection.choosing.admission`).
    ``delivers``: tools found after the block was forwarded reach the model in the
    conversation, through the bridge (:attr:`Upstream.delivery`); ``continued``: the
    request's history continues the one its conversation sent last
    (:mod:`selection.conversation.continuity`), so the proxy's hidden exchanges stand
    where they stood; ``proactive``: tools the proxy delivers before the first round, as
    the result of a meta-call it makes itself (a new user turn whose best tools the block
    the upstream's cache holds lacks: ``proactive_loads``); ``speed``: the upstream's
    speeds the plan was made in seconds for (None: in tokens); ``first_block``: the
    top-k a block chosen afresh took from the seconds it is expected to save (None: the
    policy's or the request's)."""

    reading: TurnReading
    selection: Selection
    agent_state: ConversationState | None
    meta: MetaTools | None
    ranking: Ranking | None = None
    pinned: tuple[str, ...] = ()
    expectation: CacheExpectation | None = None
    block_start: str | None = None
    top_k: int | None = None
    cache_reuse: int = 0
    whole: bool = False
    count_evicts: bool = True
    delivers: bool = False
    continued: bool = False
    proactive: tuple[str, ...] = ()
    speed: ServerSpeed | None = None
    first_block: int | None = None

    @property
    def catalog(self) -> Catalog:
        return self.reading.catalog

    @property
    def native(self) -> Catalog | None:
        return self.reading.native

    @property
    def text(self) -> TextPlan | None:
        return self.reading.text

    @property
    def state(self) -> ConversationState:
        """The conversation's state after this plan."""
        return self.selection.state

    @property
    def groups(self) -> GroupMatch | None:
        return None if self.ranking is None else self.ranking.groups

    def group_fields(self) -> dict[str, Any]:
        """The decision log's and ``toolprune explain``'s group fields
        (:meth:`selection.ranking.group_ranking.GroupMatch.report`): the groups that matched best
        and the tools that came in through their group; none when not ranked by groups."""
        groups = self.groups
        if groups is None:
            return {}
        return groups.report(self.catalog, [(t.name, t.reason) for t in self.selection.tools])

    def block_entries(self, meta: Sequence[Any]) -> list[Any]:
        """The forwarded native tools in block order, as the client defined them (in its
        API's shape, ``defer_loading`` removed): the client's CORE then toolprune's CORE
        tools in catalogue order, then the loaded tools in admission order with ``meta``
        (the meta-tools' entries, in that shape) after the first ``meta_at`` of them (the
        tools of the block's first request: tools admitted later follow the meta-tool, so
        its text stays in the upstream's cached prefix)."""
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

    def upstream_messages(self, messages: list[Any]) -> list[Any]:
        """``messages`` (Chat Completions shape) as the upstream gets them: a system-prompt
        tool block keeps only the selected entries, and the results of the client's own
        search function carry no definition of a tool the request forwards
        (:func:`selection.clients.client_deferral.compact_search_results`)."""
        if self.text is not None:
            messages = self.text.rewrite_messages(messages, set(self.selection.names))
        finder = self.reading.deferral.finder
        if finder is not None and self.native is not None:
            forwarded = {t.name: tool for t in self.selection.tools
                         if (tool := self.native.get(t.name)) is not None}
            messages = compact_search_results(messages, finder, forwarded)
        return messages

    @property
    def bridge(self) -> str | None:
        """The bridge function's name when offered (tools delivered in the conversation are
        called through it), else None."""
        return None if self.meta is None else self.meta.bridge

    def bridged(self, arguments: str) -> BridgedCall:
        """The call a bridge call stands for (``arguments``: its JSON text, as the model
        wrote it), repaired where one reading exists, or the answer the model gets
        (:func:`selection.clients.bridge_calls.read_bridge_call`): a tool of the catalogue,
        a meta-tool offered, or a tool the client defers by name only."""
        bridge = self.bridge or CALL_TOOL
        targets = bridge_targets(
            self.catalog, bridge, self.meta, self.selection.names, self.reading.deferral.menu,
            self.state.delivered,
        )
        return read_bridge_call(arguments, targets)

    def outside_block(self, name: str) -> bool:
        """Whether a call of tool ``name`` goes through the bridge in the history the
        upstream is sent: the bridge is offered and ``name`` is a tool the block does not
        hold, of the catalogue or of the client's deferred-tool menu."""
        return (
            self.bridge is not None and name not in self.selection.names
            and (self.catalog.get(name) is not None or name in self.reading.deferral.menu)
        )

    def bridged_name(self, name: str) -> str | None:
        """The name a call of tool ``name`` gives through the bridge in the history the
        upstream is sent (the name its delivery showed:
        :func:`selection.clients.shown_names.shown_name`); None when the call is not
        written through the bridge (:meth:`outside_block`)."""
        return shown_name(name, self.catalog) if self.outside_block(name) else None

    def deliver(self, content: str, found: Sequence[str]) -> str:
        """A search result's text (JSON) as the upstream reads it: with the definitions of
        its finds (``found``) outside the block, and how to call them through this plan's
        bridge (:func:`selection.clients.bridge.delivering`); as it is when the plan does
        not deliver in the conversation, or every find is in the block."""
        if not self.delivers or self.bridge is None:
            return content
        outside = [name for name in found if self.outside_block(name)]
        return delivering(content, outside, self.catalog, self.bridge)

    def schema_bytes_saved(self) -> int:
        """Bytes of tool definitions (JSON, or block text) not forwarded, less the
        meta-tools'."""
        forwarded = set(self.selection.names)
        dropped = sum(t.size_bytes for t in self.catalog.tools if t.name not in forwarded)
        meta = self.meta.definitions if self.meta else ()
        return dropped - sum(len(canonical_json(definition)) for definition in meta)
