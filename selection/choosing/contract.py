"""What a turn must forward whatever its ranking: the client's CORE (the tools it did not
defer, first, in its order), toolprune's CORE (the policy's patterns), the tools the
conversation's searches found, the tools ``tool_choice`` or the history pins, and the tools
a meta-tool loaded this turn. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from selection.catalog.catalog import Catalog
from selection.catalog.policy import CatalogLayout
from selection.choosing.state import ConversationState


@dataclass(frozen=True)
class Contract:
    """One turn's contract. ``client``: the client's CORE in forwarding order; ``core``:
    it, then toolprune's CORE in catalogue order (forwarded first, outside every cap);
    ``found``: tools a search found (kept loaded like pins); ``pinned``: those and the
    pinned tools (no semantic slot, no cap); ``requested``: what a meta-tool loaded this
    turn (admitted before semantic candidates). Each known to the catalogue, without
    repeats, and none in an earlier group."""

    client: tuple[str, ...]
    core: tuple[str, ...]
    found: tuple[str, ...]
    pinned: tuple[str, ...]
    requested: tuple[str, ...]

    @property
    def core_set(self) -> frozenset[str]:
        return frozenset(self.core)

    @property
    def pinned_set(self) -> frozenset[str]:
        return frozenset(self.pinned)


def _unique_known(names: Sequence[str], catalog: Catalog, exclude: set[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for name in names:
        if catalog.index_of(name) is not None and name not in exclude:
            seen.setdefault(name, None)
    return tuple(seen)


def read_contract(
    catalog: Catalog, layout: CatalogLayout, state: ConversationState, *,
    client_core: Sequence[str] | None, found: Sequence[str], pinned: Sequence[str],
    requested: Sequence[str],
) -> Contract:
    """The contract of a turn on ``state``. ``client_core``: the client's CORE in
    forwarding order when it runs its own deferral (None: ``catalog.kept``, the tools it
    did not defer when it deferred any); ``found``: what searches found this turn (with
    ``state.found``); ``pinned``: ``tool_choice`` and the history's calls; ``requested``:
    what a meta-tool loaded this turn."""
    client = catalog.kept if client_core is None else tuple(
        name for name in client_core if catalog.get(name) is not None
    )
    client_set = set(client)
    core = (*client, *(name for name in layout.core if name not in client_set))
    core_set = set(core)
    found_names = _unique_known([*state.found, *found], catalog, core_set)
    pinned_names = _unique_known([*found_names, *pinned], catalog, core_set)
    requested_names = _unique_known(requested, catalog, core_set | set(pinned_names))
    return Contract(client, core, found_names, pinned_names, requested_names)
