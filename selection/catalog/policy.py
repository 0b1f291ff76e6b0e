"""The selection policy: which tools are CORE, which travel together, and the knobs.

Pure data and pure functions. ``config.policy.load_policy`` builds it from settings and
the TOML policy file.
"""

from __future__ import annotations

import fnmatch
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from selection.catalog.catalog import Catalog
from selection.catalog.groups import CatalogGroups, Group, find_groups, namespace_prefix
from selection.catalog.text_path import PRESETS, TextFormat
from selection.catalog.tokens import catalog_tokens, expected_saving


@dataclass(frozen=True)
class CandidatePolicy:
    """Knobs of candidate choice (see the module docstring).

    ``budget``: ``tokens`` (candidates fill a token budget) or ``count`` (classic top-k:
    ``top_k`` candidates whatever their cost). ``token_budget``: schema tokens the semantic
    candidates may cost per turn (0: :func:`token_budget`). ``dominance_margin``: candidates
    scoring below the best minus this are not admitted (None: off). ``tier_size``: tools
    listed by name in the meta-tool beyond the
    forwarded ones. ``named_only``: when a one-intent request names the best candidate,
    only the tools it names are candidates (:mod:`selection.indexes.name_match`).
    """

    budget: Literal["tokens", "count"] = "tokens"
    token_budget: int = 0
    dominance_margin: float | None = None
    tier_size: int = 8
    named_only: bool = True


@dataclass(frozen=True)
class Bundle:
    """A cohesion group: when one member is admitted, the others come too."""

    name: str
    members: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Policy:
    """Selection knobs.

    ``core``: names or ``fnmatch`` glob patterns, always forwarded.
    ``top_k``: semantic candidates per turn; ``threshold``: τ, least cosine score
    (inclusive) to be admitted; ``max_tools``: cap on forwarded tools that are not CORE or
    pinned; ``min_catalog_tools``: catalogues of at most this many tools are not pruned;
    ``min_saving``: nor are catalogues whose pruned first turn is expected to save less than
    this share of their schema tokens (:meth:`forwards_whole`; 0: those pruning would
    enlarge; ``-inf``: none).
    ``bundles``: configured cohesion groups; ``derive_bundles``: also group tools by
    namespace prefix (``server__tool``) when a catalogue has several namespaces;
    ``max_bundle_size``: larger groups do not travel together (they still group the menu).
    ``examples``: tool name → example utterances, indexed as extra texts for that tool.
    ``text_formats``: formats tried, in order, to find a tool block in a system prompt.
    ``candidates``: token budget, adaptive k, the dependency expansion's parents, tier
    (:class:`~selection.choosing.candidates.CandidatePolicy`).
    ``refresh_rank``: a turn on a block (a later turn, or a new conversation on its
    agent's block) admits semantic candidates only when one of its ``refresh_rank``
    best-scored tools is not forwarded yet, or a tool called in the history is new (a turn
    the forwarded block already serves changes nothing, so the upstream's KV cache of the
    block and of the history after it stays valid); it then admits those best tools (and
    their dependencies). 0: such turns admit only pinned and loaded tools.
    ``refresh_top_k`` / ``refresh_share``: such a turn also admits candidates up to
    ``refresh_top_k`` as insurance against another change (which would make the upstream
    evaluate that history again), their schemas costing at most ``refresh_share`` × the
    history's tokens; those within top-k may evict, the others fill free room only.
    ``preload_deferred``: when the client defers tools (``defer_loading``), whether
    selection also admits the best of them by its ranking; False: only what a search
    finds (or the history calls) loads from the client's deferred tools.
    ``top_k_configured``: the operator set ``top_k`` (a setting or the policy file), so a
    block chosen afresh keeps it where the server's speeds would size it otherwise
    (:mod:`selection.choosing.seconds`).
    """

    core: tuple[str, ...] = ()
    top_k: int = 8
    threshold: float = 0.0
    max_tools: int = 16
    min_catalog_tools: int = 8
    min_saving: float = 0.0
    bundles: tuple[Bundle, ...] = ()
    derive_bundles: bool = True
    max_bundle_size: int = 4
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    text_formats: tuple[TextFormat, ...] = PRESETS
    candidates: CandidatePolicy = field(default_factory=CandidatePolicy)
    refresh_rank: int = 4
    refresh_top_k: int = 16
    refresh_share: float = 4.0
    preload_deferred: bool = True
    top_k_configured: bool = False

    def is_core(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.core)

    def forwards_whole(
        self, catalog: Catalog, top_k: int | None = None, token_cap: int | None = None
    ) -> bool:
        """Whether ``catalog`` is forwarded unpruned: it has at most ``min_catalog_tools``
        tools, or a pruned first turn of ``top_k`` (default: the policy's) candidates is
        expected to save less than ``min_saving`` of its schema tokens
        (:func:`selection.catalog.tokens.expected_saving`) and its tools fit ``token_cap`` (prompt
        tokens, estimated; None: no cap known). At ``min_saving`` 0 these are the
        catalogues pruning would enlarge (the meta-tool's menu outweighing the tools left
        out): sent whole they cost less on the first turn, and on later ones they are a
        prefix the upstream keeps (a higher bar measured: benchmarks/README.md,
        "Sessions")."""
        if len(catalog) <= self.min_catalog_tools:
            return True
        k = self.top_k if top_k is None else top_k
        if expected_saving(catalog, k, self.candidates.tier_size) >= self.min_saving:
            return False
        return token_cap is None or catalog_tokens(catalog) <= token_cap


def catalog_bundles(catalog: Catalog, policy: Policy) -> list[Bundle]:
    """The bundles that apply to ``catalog``: configured bundles (members restricted to the
    catalogue, at least two left), then, if enabled and the catalogue spans several
    namespaces, one bundle per namespace. Order: configured first, then by first member."""
    names = set(catalog.names)
    bundles = []
    for bundle in policy.bundles:
        members = tuple(member for member in bundle.members if member in names)
        if len(members) >= 2:
            bundles.append(Bundle(bundle.name, members, bundle.description))
    if policy.derive_bundles:
        groups: dict[str, list[str]] = defaultdict(list)
        for name in catalog.names:
            namespace = namespace_prefix(name, ("__",))  # server__tool, mcp__server__tool
            if namespace is not None:
                groups[namespace].append(name)
        if len(groups) >= 2:
            bundles.extend(
                Bundle(namespace, tuple(members))
                for namespace, members in groups.items()
                if len(members) >= 2
            )
    return bundles


def bundle_mates(bundles: Sequence[Bundle], max_size: int) -> dict[str, tuple[str, ...]]:
    """Tool name → the other members of its bundles of at most ``max_size`` members."""
    mates: dict[str, list[str]] = defaultdict(list)
    for bundle in bundles:
        if len(bundle.members) > max_size:
            continue
        for member in bundle.members:
            mates[member].extend(other for other in bundle.members if other != member)
    return {name: tuple(dict.fromkeys(others)) for name, others in mates.items()}


@dataclass(frozen=True)
class CatalogLayout:
    """What selection needs of a catalogue under a policy that depends on nothing else:
    ``core`` (CORE tool names, catalogue order), ``bundles`` (:func:`catalog_bundles`),
    ``mates`` (:func:`bundle_mates` of those, by ``max_bundle_size``) and ``groups`` (the
    catalogue's servers, namespaces and toolkits: :func:`layout_groups`)."""

    core: tuple[str, ...]
    bundles: tuple[Bundle, ...]
    mates: Mapping[str, tuple[str, ...]]
    groups: CatalogGroups


def layout_groups(catalog: Catalog, policy: Policy) -> CatalogGroups:
    """The catalogue's groups (:func:`selection.catalog.groups.find_groups`): those the request
    declares, the policy's configured bundles, then those found from names. Kept in the
    catalogue's layout (:func:`catalog_layout`), so found once per catalogue and policy."""
    bundles = [Group(b.name, b.members, b.description, "bundle") for b in policy.bundles]
    return find_groups(catalog, bundles)


#: Layouts kept, most recently used last (one per catalogue and policy).
LAYOUT_CACHE_SIZE = 64
_layouts: OrderedDict[tuple[str, int], tuple[Policy, CatalogLayout]] = OrderedDict()
_layouts_lock = threading.Lock()


def catalog_layout(catalog: Catalog, policy: Policy) -> CatalogLayout:
    """The :class:`CatalogLayout` of ``catalog`` under ``policy``, computed once per
    catalogue fingerprint and policy object (an LRU of ``LAYOUT_CACHE_SIZE``; thread-safe).
    At 10,000 tools it costs ~40 ms to compute (the CORE globs over every name, the
    namespace grouping), which every request of that catalogue would otherwise pay. A
    catalogue without a fingerprint is computed every time. Shared: never mutate it."""
    key = (catalog.fingerprint, id(policy))
    if catalog.fingerprint:
        with _layouts_lock:
            cached = _layouts.get(key)
            if cached is not None and cached[0] is policy:
                _layouts.move_to_end(key)
                return cached[1]
    bundles = tuple(catalog_bundles(catalog, policy))
    layout = CatalogLayout(
        core=tuple(tool.name for tool in catalog.tools if policy.is_core(tool.name)),
        bundles=bundles,
        mates=bundle_mates(bundles, policy.max_bundle_size),
        groups=layout_groups(catalog, policy),
    )
    if catalog.fingerprint:
        with _layouts_lock:
            _layouts[key] = (policy, layout)  # the policy is held: its id stays its own
            _layouts.move_to_end(key)
            while len(_layouts) > LAYOUT_CACHE_SIZE:
                _layouts.popitem(last=False)
    return layout
