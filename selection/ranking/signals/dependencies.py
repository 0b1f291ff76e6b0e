"""The dependency expansion: a tool that takes an identifier brings the tool that produces
it (:func:`selection.ranking.dependencies.expand`: ``user_id`` → the tool returning the current
user; a grouped tool's producers from its own group), then the group mates that produce
its required inputs (:func:`selection.ranking.group_inputs.input_producers`). Budgeted: its tools
share the candidates' token budget, at most ``max_dependencies`` a turn."""

from __future__ import annotations

from dataclasses import dataclass

from selection.ranking.dependencies import expand
from selection.ranking.group_inputs import input_producers
from selection.ranking.signals.expansion import Expansion, ExpansionInputs


class Dependencies(Expansion):
    """Identifier producers, then input producers among group mates."""

    name = "dependencies"
    budgeted = True

    @dataclass(frozen=True)
    class Params:
        #: Producers added per turn at most (0: off).
        max_dependencies: int = 4
        #: For how many of a turn's first admitted tools producers are looked for.
        dependency_parents: int = 8

    def expand(
        self, inputs: ExpansionInputs, parent: str, present: set[str], room: int
    ) -> list[str]:
        group_of = inputs.groups.of if inputs.groups is not None else None
        found = expand(inputs.catalog, inputs.scores, [parent], present, max_added=room,
                       min_score=inputs.threshold, group_of=group_of)
        if group_of is not None and len(found) < room:
            present = present | {dependency.name for dependency in found}
            found += input_producers(inputs.catalog, group_of, inputs.scores, [parent], present,
                                     max_added=room - len(found), min_score=inputs.threshold)
        return [dependency.name for dependency in found]
