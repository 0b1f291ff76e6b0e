"""Within a server, the tools that produce another tool's inputs.

A server's tools are made to be used together: OpenStreetMap's ``get_route_directions``
takes coordinates that its ``geocode_address`` returns, 12306's ``get-tickets`` takes
station codes that its ``get-station-code-of-citys`` looks up, a KOSPI server's stock
queries take tickers that its ``load_all_tickers`` lists. :mod:`selection.ranking.dependencies`
follows identifiers (``*_id``) across the whole catalogue; here any required input is
followed, but only to the tool's own group (:mod:`selection.catalog.groups`), where a word shared
by a parameter and a mate's name or description is evidence enough.

A *key* of a required parameter is a word of its name (:func:`selection.indexes.name_match.words`:
lower-case, plural folded) that is not a position or bound (``from``, ``min``, ``start``…)
nor a free-text input the user gives (``query``, ``text``, ``content``…). A group mate
*produces* the parameter when it names a key in its name or in the first
:data:`DESCRIPTION_CHARS` characters of its description (a docstring's ``Args:`` section
left out: that is what it takes) and needs no parameter with that key itself. The best
producer of a tool covers most of its keys, then has fewer required parameters, then
scores higher for the query. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from selection.catalog.catalog import Catalog, name_words
from selection.indexes.name_match import words
from selection.indexes.tool_index import LRUCache
from selection.ranking.dependencies import Dependency, Need

#: Parameter-name words that say where or how much, not what.
_BOUND_WORDS = frozenset({
    "from", "to", "min", "max", "start", "end", "begin", "first", "last", "new", "old",
    "source", "target", "home", "work", "before", "after", "since", "until", "lower", "upper",
})
#: Inputs the user gives in words, which no tool produces.
_FREE_WORDS = frozenset({
    "query", "text", "content", "message", "prompt", "question", "keyword", "term", "input",
    "body", "title", "description", "note", "comment", "limit", "page", "offset", "count",
    "size", "format", "type", "mode", "language", "lang", "sort", "order", "option",
    "value", "data", "detail", "flag", "filter",
})
#: Producers added for one tool at most (the best, then the best for what it left open).
PRODUCERS_PER_TOOL = 2
#: Characters of a mate's description searched for a key.
DESCRIPTION_CHARS = 1000
#: A docstring's section of inputs (``Args:`` … up to ``Returns:`` or the end): what a
#: tool takes, not what it gives.
_INPUT_SECTION = re.compile(
    r"^\s*(?:args|arguments|parameters|params)\s*:.*?(?=^\s*(?:returns?|yields|raises)\s*:|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)


def _keys(parameter: str) -> frozenset[str]:
    return frozenset(w for w in words(name_words(parameter)) if w not in _BOUND_WORDS | _FREE_WORDS)


class GroupInputs:
    """For one catalogue: each tool's input keys (those of its required parameters), the
    words each tool names (name and description head) and what it needs."""

    def __init__(self, catalog: Catalog) -> None:
        self.needs: list[tuple[tuple[str, frozenset[str]], ...]] = []
        self.needed: list[frozenset[str]] = []
        self.named: list[frozenset[str]] = []
        self.required: list[int] = []
        for tool in catalog.tools:
            required = tool.required_parameters()
            needs = tuple((p, keys) for p in required if (keys := _keys(p)))
            self.needs.append(needs)
            self.needed.append(frozenset().union(*(keys for _, keys in needs)))
            described = _INPUT_SECTION.sub(" ", tool.description[:DESCRIPTION_CHARS])
            self.named.append(frozenset(words(f"{name_words(tool.name)} {described}")))
            self.required.append(len(required))
        #: Word → the tools that name it (int64 positions, ascending): a tool's producers
        #: are found among the tools naming its keys, not by walking its whole group.
        naming: dict[str, list[int]] = {}
        for position, named in enumerate(self.named):
            for word in named:
                naming.setdefault(word, []).append(position)
        self.naming = {word: np.asarray(found, dtype=np.int64) for word, found in naming.items()}

    def naming_any(self, needs: Sequence[tuple[str, frozenset[str]]]) -> np.ndarray:
        """The tools that name a key of ``needs`` (int64 positions, ascending): the only
        ones that can produce one of them."""
        found = [self.naming[key] for _, keys in needs for key in keys if key in self.naming]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


_INDEXES: LRUCache[str, GroupInputs] = LRUCache(64)


def group_inputs(catalog: Catalog) -> GroupInputs:
    """The catalogue's :class:`GroupInputs`, cached by catalogue fingerprint."""
    return _INDEXES.get_or_build(catalog.fingerprint, lambda: GroupInputs(catalog))


def input_producers(
    catalog: Catalog,
    group_of: np.ndarray,
    scores: np.ndarray,
    parents: Sequence[str],
    exclude: set[str],
    *,
    max_added: int,
    min_score: float = -np.inf,
) -> list[Dependency]:
    """For each grouped parent (in order) the best group mate that produces its inputs
    (see the module docstring), scoring at least ``min_score`` (τ); ``max_added`` in all.
    ``group_of``: int ``(len(catalog),)``, each tool's group (−1: none); ``scores``:
    float32 ``(len(catalog),)``, the turn's score per tool. A parent whose best producer
    is in ``exclude``, ``parents`` or added already adds nothing."""
    index = group_inputs(catalog)
    present = set(exclude) | set(parents)
    added: list[Dependency] = []
    for parent in parents:
        position = catalog.index_of(parent)
        if position is None or len(added) >= max_added or group_of[position] < 0:
            continue
        needs = index.needs[position]
        if not needs:
            continue
        naming = index.naming_any(needs)
        mates = naming[(group_of[naming] == group_of[position]) & (naming != position)
                       & (scores[naming] >= min_score)].tolist()
        open_needs = list(needs)
        for _ in range(PRODUCERS_PER_TOOL):
            best = _best_producer(index, mates, open_needs, scores)
            if best is None:
                break
            open_needs = [(p, keys) for p, keys in open_needs if not _produces(index, best, keys)]
            name = catalog.tools[best].name
            if name in present or len(added) >= max_added:
                continue
            present.add(name)
            parameter = next(p for p, keys in needs if _produces(index, best, keys))
            added.append(Dependency(name, parent, Need(parameter, parameter)))
    return added


def _produces(index: GroupInputs, mate: int, keys: frozenset[str]) -> bool:
    return bool(keys & index.named[mate]) and not keys & index.needed[mate]


def _best_producer(
    index: GroupInputs, mates: Sequence[int], needs: Sequence[tuple[str, frozenset[str]]],
    scores: np.ndarray,
) -> int | None:
    """The mate producing most of ``needs``, then with fewer required parameters, then
    scoring higher; None when none produces any."""
    best: tuple[int, int, float, int] | None = None
    for mate in mates:
        covered = sum(_produces(index, mate, keys) for _, keys in needs)
        if covered:
            rank = (covered, -index.required[mate], float(scores[mate]), mate)
            best = rank if best is None or rank > best else best
    return None if best is None else best[3]
