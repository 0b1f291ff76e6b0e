"""The bundle expansion: a tool admitted by the ranking or loaded by a meta-tool brings the
other members of its bundles (configured cohesion groups, and the namespaces of
``server__tool`` names; :attr:`selection.catalog.policy.CatalogLayout.mates`, bundles of at most
``max_bundle_size``). Not budgeted: mates come last, into the room the caps leave."""

from __future__ import annotations

from dataclasses import dataclass

from selection.ranking.signals.expansion import Expansion, ExpansionInputs


class BundleMates(Expansion):
    """The other members of the parent's bundles."""

    name = "bundles"
    budgeted = False

    @dataclass(frozen=True)
    class Params:
        #: Admit the other members of a selected tool's bundles (off: bundles still group
        #: the meta-tool's menu).
        bundle_mates: bool = True

    def expand(
        self, inputs: ExpansionInputs, parent: str, present: set[str], room: int
    ) -> list[str]:
        mates = [mate for mate in inputs.mates.get(parent, ()) if mate not in present]
        return mates[:room]
