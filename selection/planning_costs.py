"""What a turn's plan costs the upstream's prompt, and the meta-tools it offers: the token
cap of the forwarded tools, the meta-tools (the client's search function, ``load_tools``
or ``search_tools``), and the prompt tokens the upstream is expected to reuse from its
cache and evaluate (:mod:`selection.choosing.prefix`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from selection.catalog.catalog import Catalog
from selection.catalog.policy import Policy, catalog_layout
from selection.catalog.tokens import meta_reserve_tokens, tool_tokens
from selection.choosing.block_order import Selection
from selection.choosing.blocks import BlockStart
from selection.choosing.prefix import (
    CacheExpectation,
    block_signature,
    estimated_text_tokens,
    expect_cache,
    is_meta_entry,
    tool_token_cap,
)
from selection.clients.bridge import CALL_TOOL, bridge_definition, with_bridge
from selection.clients.meta_tools import MAX_LISTED_GROUPS, MetaTools, build_meta_tools
from selection.clients.tool_search import search_meta_tools
from selection.plan import TurnReading


def token_cap(
    catalog: Catalog, policy: Policy, share: float, context_tokens: int | None,
    history_tokens: int, *, bridge: bool = False, search: bool = False,
) -> int | None:
    """Prompt tokens the forwarded tools may take: ``share`` of the upstream's context,
    leaving room for the messages, the meta-tool's bound (``search``: a search function,
    which lists the catalogue's groups, not every tool name as ``load_tools`` does) and,
    with ``bridge``, the bridge's definition (None: the context is unknown)."""
    named_groups = None
    if search:
        groups = catalog_layout(catalog, policy).groups.listed
        named_groups = [group.name for group in groups] if len(groups) <= MAX_LISTED_GROUPS else []
    reserve = meta_reserve_tokens(catalog, policy.candidates.tier_size, named_groups)
    if bridge:
        reserve += estimated_text_tokens([bridge_definition(CALL_TOOL, catalog.legacy)])
    return tool_token_cap(context_tokens, share, history_tokens + reserve)


def meta_tools(
    reading: TurnReading, selection: Selection, policy: Policy, search_tools_min_catalog: int,
    *, bridge: bool = False,
) -> MetaTools | None:
    """The meta-tools offered with the turn: the function standing for the client's own
    search tool (one discovery mechanism), else ``load_tools`` (``search_tools`` above
    ``search_tools_min_catalog`` tools) when a native tool is left out and ``tool_choice``
    allows them; None otherwise. With ``bridge`` (tools found later are delivered in the
    conversation), the bridge they are called through follows them, and is offered alone
    to a client that searches its own deferred tools."""
    native, choice = reading.native, reading.choice
    if native is None:
        return None
    meta = _discovery(reading, selection, policy, search_tools_min_catalog) if (
        choice.offer_meta) else None
    if bridge and (meta is not None or reading.deferral.active):
        return with_bridge(meta, native)
    return meta


def discovers_by_search(reading: TurnReading, search_tools_min_catalog: int) -> bool:
    """Whether the turn's discovery is a search function — the client's own, or
    ``search_tools`` above ``search_tools_min_catalog`` native tools — rather than
    ``load_tools``, whose enum names every tool (what :func:`meta_tools` offers)."""
    native = reading.native
    return reading.request.search is not None or (
        native is not None and len(native) > search_tools_min_catalog)


def _discovery(
    reading: TurnReading, selection: Selection, policy: Policy, search_tools_min_catalog: int
) -> MetaTools | None:
    """The function standing for the client's search, else toolprune's meta-tool when a
    native tool is left out (see :func:`meta_tools`)."""
    native = reading.native
    assert native is not None
    if reading.request.search is not None:
        return search_meta_tools(reading.request.search, native)
    forwarded = set(selection.names)
    if len(native) <= len(forwarded) and native.name_set <= forwarded:
        return None  # every native tool forwarded
    core = {t.name for t in selection.tools if t.reason in ("core", "client")}
    return build_meta_tools(
        native, core, catalog_layout(native, policy).groups.listed,
        search=discovers_by_search(reading, search_tools_min_catalog),
        tier=[name for name in selection.tier if native.get(name) is not None],
    )


def expectation(
    reading: TurnReading, selection: Selection, meta: MetaTools | None, start: BlockStart,
    policy: Policy, exact: Mapping[str, int] | None, *, reuse: bool, history_tokens: int,
) -> CacheExpectation:
    """The prompt tokens the upstream is expected to reuse and evaluate for the turn's
    first round (:func:`selection.choosing.prefix.expect_cache`): the system prompt and CORE, the
    block as the upstream last held it for this conversation or its agent, then the
    history."""
    catalog = reading.catalog
    core_tokens = sum(
        tool_tokens(tool, exact)
        for name in catalog_layout(catalog, policy).core
        if (tool := catalog.get(name)) is not None
    )
    meta_tokens = estimated_text_tokens(list(meta.definitions)) if meta else 0

    def entry_tokens(entry: str) -> int:
        if is_meta_entry(entry):
            return meta_tokens
        return tool_tokens(tool, exact) if (tool := catalog.get(entry)) else 0

    state = selection.state
    return expect_cache(
        start.cached,
        block_signature(state.loaded, selection.tier, state.meta_at),
        entry_tokens,
        head_tokens=estimated_text_tokens(reading.system) + core_tokens,
        cached_history_tokens=start.cached_history,
        history_tokens=history_tokens,
        reuse=reuse,
    )
