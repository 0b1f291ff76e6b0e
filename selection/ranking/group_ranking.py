"""Ranking with groups: a grouped tool's score draws on its group's match.

Tool-to-Agent Retrieval (Lumer et al., arXiv 2511.01854) ranks tools and the servers
they belong to in one space and reaches a server through its best tools; here a group's
match is, per turn,

    G(g) = max_{t ∈ g} s(t) + lexical_weight × BM25(g) + vector_weight × cos(g)

— the best fused score of its tools (:mod:`selection.ranking.pipeline`), plus the BM25 score of the
whole query over the group's text (its name, description and every member's name words,
description and parameter names: a tool whose own description is "Get the API's health"
is found through the words of its toolkit), normalised by the turn's best group, plus the
cosine of the query's best part against the group's vector (the normalised mean of its
members' text vectors, and of its declared description's). A grouped tool then scores

    s'(t) = (1 − w) × s(t) + w × max_{u ∈ g} s(u) + lexical_weight × BM25(g) + vector_weight × cos(g)

with w = ``weight`` × min(1, ``size_scale`` / |g|), so the tools of a group that matches
as a whole rise together, in their own order. An ungrouped tool is a unit of its own (its
max is itself, its BM25 text its own), so a lone tool and a group are matched by the same
terms; a catalogue whose groups do not shape the ranking ranks exactly as before.
The weights were chosen on the shared development sets (docs/measuring-selection.md).
Pure functions over arrays; the group index is built once per catalogue and grouping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.groups import CatalogGroups, group_label
from selection.indexes.lexical import bm25_tokens, lexical_text, normalised_bm25
from selection.indexes.tool_index import LRUCache, ToolIndex

#: Groups reported as matched (decision log, explain).
REPORTED_GROUPS = 3
#: Selection reasons of tools admitted by their score (:mod:`selection.choosing.selector`).
RANKED_REASONS = ("semantic", "named", "learned")


@dataclass(frozen=True)
class GroupRanking:
    """Knobs of :func:`rank_with_groups` (see the module docstring). ``weight`` 0 turns
    group ranking off."""

    weight: float = 0.3
    lexical_weight: float = 0.2
    vector_weight: float = 0.0
    size_scale: float = 4.0

    @property
    def active(self) -> bool:
        """Whether groups change the ranking at all (any weight set)."""
        return bool(self.weight or self.lexical_weight or self.vector_weight)


def group_text(group_index: int, catalog: Catalog, groups: CatalogGroups) -> str:
    """The text a group is matched by lexically: its name as words, its description, and
    each member's :func:`~selection.indexes.lexical.lexical_text`."""
    group = groups.groups[group_index]
    members = (catalog.get(name) for name in group.members)
    return " ".join([group_label(group), group.description,
                     *(lexical_text(tool) for tool in members if tool is not None)])


class GroupIndex:
    """One catalogue's groups as ranking needs them. Ranking units: the groups, then each
    ungrouped tool as a unit of its own (so a lone tool is matched by the same terms as a
    group and neither is favoured); ``unit``: int ``(len(catalog),)``, each tool's unit.
    BM25 over the units' texts (library ``bm25s``, as
    :class:`~selection.indexes.lexical.LexicalIndex`) and the groups' vectors (float32
    ``(n_groups, d)``, rows L2-normalised; None until :meth:`with_vectors`)."""

    def __init__(self, catalog: Catalog, groups: CatalogGroups) -> None:
        import bm25s

        self.groups = groups
        n_groups = len(groups)
        alone = np.flatnonzero(groups.of < 0)
        self.unit = groups.of.astype(np.int64)
        self.unit[alone] = n_groups + np.arange(len(alone))
        self.units = n_groups + len(alone)
        self.vectors: np.ndarray | None = None
        self._retriever = bm25s.BM25()
        texts = [group_text(i, catalog, groups) for i in range(n_groups)]
        texts += [lexical_text(catalog.tools[position]) for position in alone]
        if texts:
            self._retriever.index(bm25_tokens(texts), show_progress=False)

    def with_vectors(self, vectors: np.ndarray) -> GroupIndex:
        """Set the groups' vectors (float32 ``(n_groups, d)``, rows L2-normalised)."""
        self.vectors = vectors
        return self

    def lexical(self, query: str) -> np.ndarray:
        """BM25 of ``query`` per unit, float32 ``(units,)`` normalised to [0, 1] by the
        best (zeros when no query word is in any unit's text)."""
        return normalised_bm25(self._retriever, query, self.units)


async def build_group_index(
    catalog: Catalog, groups: CatalogGroups, index: ToolIndex,
    embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
) -> GroupIndex:
    """``catalog``'s :class:`GroupIndex` under ``groups``: BM25 over the units' texts
    (built in a worker thread: ~0.1 s at 2,470 tools) and each unit's vector, the mean of
    its tools' text vectors in ``index`` and, for a group with a declared description,
    of ``"name: description"`` embedded by ``embed`` (float32 ``(n, d)`` for ``n``
    texts). Raises: what ``embed`` raises."""
    group_index = await asyncio.to_thread(GroupIndex, catalog, groups)
    vectors = index.text_vectors()
    unit_of_text = group_index.unit[index.owners]
    described = [i for i, group in enumerate(groups.groups) if group.description]
    if described:  # the declared description counts as one more text of the group
        texts = [f"{group_label(groups.groups[i])}: {groups.groups[i].description}"
                 for i in described]
        vectors = np.vstack([vectors, await embed(texts)])
        unit_of_text = np.concatenate([unit_of_text, np.asarray(described, dtype=np.int64)])
    return group_index.with_vectors(centroids(unit_of_text, vectors, group_index.units))


def centroids(unit_of_text: np.ndarray, text_vectors: np.ndarray, units: int) -> np.ndarray:
    """Each unit's normalised mean text vector: float32 ``(units, d)``. ``unit_of_text``:
    int ``(n_texts,)``, the unit of each text (:attr:`GroupIndex.unit` of its tool);
    ``text_vectors``: float32 ``(n_texts, d)``, rows L2-normalised."""
    sums = np.zeros((units, text_vectors.shape[1]), dtype=np.float32)
    np.add.at(sums, unit_of_text, text_vectors)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return sums / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class GroupMatch:
    """The groups' part of one turn's ranking. ``groups``: the catalogue's groups;
    ``scores``: float32 ``(n_groups,)``, each group's match G(g); ``own``: float32
    ``(len(catalog),)``, the tools' scores before their groups' share; ``values``: with
    it (see the module docstring); ``best``: the best-matched groups' indexes, best first
    (at most :data:`REPORTED_GROUPS`)."""

    groups: CatalogGroups
    scores: np.ndarray
    own: np.ndarray
    values: np.ndarray
    best: tuple[int, ...]

    def matched(self) -> list[tuple[str, float]]:
        """The best-matched groups: ``(name, G(g))``, best first."""
        return [(self.groups.groups[g].name, float(self.scores[g])) for g in self.best]

    def report(self, catalog: Catalog, tools: Sequence[tuple[str, str]]) -> dict[str, object]:
        """The decision log's and ``toolprune explain``'s group fields for the forwarded
        ``tools`` (``(name, reason)``): ``groups``, the best-matched groups as ``[name,
        G(g)]``; ``through_group``, tool → group for the tools ranked in
        (:data:`RANKED_REASONS`) that came in through their group (:meth:`through_group`)."""
        admitted = [name for name, reason in tools if reason in RANKED_REASONS]
        return {
            "groups": [[name, round(score, 3)] for name, score in self.matched()],
            "through_group": self.through_group(catalog, admitted),
        }

    def through_group(self, catalog: Catalog, admitted: Sequence[str]) -> dict[str, str]:
        """Of ``admitted`` (tools a turn admitted by score), those that came in through
        their group: grouped tools whose own score is below the best own score of a
        tool left out (by its own score alone, that one would have come first) → their
        group's name."""
        chosen = {catalog.index_of(name) for name in admitted} - {None}
        rest = np.ones(len(catalog), dtype=bool)
        rest[list(chosen)] = False
        if not rest.any():
            return {}
        bar = float(self.own[rest].max())
        through = {}
        for name in admitted:
            position = catalog.index_of(name)
            group = None if position is None else self.groups.group_of(position)
            if group is not None and self.own[position] < bar:
                through[name] = group.name
        return through


class GroupIndexes:
    """Each catalogue's :class:`GroupIndex` under its grouping (an LRU of ``cache_size``,
    as the engine's indexes)."""

    def __init__(self, cache_size: int = 16) -> None:
        self._indexes: LRUCache[tuple[str, str, bool], GroupIndex] = LRUCache(cache_size)

    async def get(
        self, key: str, catalog: Catalog, groups: CatalogGroups, index: ToolIndex,
        embed: Callable[[Sequence[str]], Awaitable[np.ndarray]], *, vectors: bool,
    ) -> GroupIndex:
        """The :class:`GroupIndex` of ``catalog`` under ``groups``, built once by
        :func:`build_group_index` from ``index`` and ``embed`` (``vectors`` False: without
        the groups' vectors, so nothing is embedded). ``key``: the catalogue's index key.
        Raises: what ``embed`` raises."""
        cache_key = (key, groups.fingerprint, vectors)
        group_index = self._indexes.get(cache_key)
        if group_index is None:
            group_index = (await build_group_index(catalog, groups, index, embed) if vectors
                           else await asyncio.to_thread(GroupIndex, catalog, groups))
            self._indexes.put(cache_key, group_index)
        return group_index


def rank_with_groups(
    values: np.ndarray,
    index: GroupIndex,
    query: str,
    part_vectors: np.ndarray | None,
    ranking: GroupRanking,
) -> GroupMatch:
    """Blend each grouped tool's fused score with its group's match (module docstring).

    ``values``: float32 ``(len(catalog),)``, the fused scores; ``query``: the whole query
    (BM25); ``part_vectors``: float32 ``(p, d)``, the query's parts (None: no vector term).
    """
    n_groups = len(index.groups)
    best = np.full(index.units, -np.inf, dtype=np.float32)
    np.maximum.at(best, index.unit, values)
    bonus = np.zeros(index.units, dtype=np.float32)
    if ranking.lexical_weight:
        bonus += np.float32(ranking.lexical_weight) * index.lexical(query)
    if ranking.vector_weight and index.vectors is not None and part_vectors is not None:
        cosine = (np.asarray(part_vectors, dtype=np.float32) @ index.vectors.T).max(axis=0)
        bonus += np.float32(ranking.vector_weight) * cosine
    pull = np.full(index.units, ranking.weight, dtype=np.float32)
    if ranking.size_scale:
        sizes = np.bincount(index.unit, minlength=index.units)
        pull *= np.minimum(1.0, ranking.size_scale / sizes).astype(np.float32)
    unit = index.unit
    blended = (values + pull[unit] * (best[unit] - values) + bonus[unit]).astype(np.float32)
    group_scores = (best + bonus)[:n_groups]
    best = tuple(int(g) for g in np.argsort(-group_scores, kind="stable")[:REPORTED_GROUPS])
    return GroupMatch(index.groups, group_scores, values, blended, best)

