"""Issue 14's fourth round: the order in which :func:`selection.ranking.choose` admits
candidates, as patches over the product's code (``benchmarks/selection_levers.py``).

Every variant keeps the product's scores, τ, token budget, dependency expansion and tier;
it changes only which candidate of the window is tried next:

* ``mmr-λ``: maximal marginal relevance (Carbonell & Goldstein, "The Use of MMR,
  Diversity-Based Reranking for Reordering Documents and Producing Summaries", SIGIR
  1998): the next is the candidate with the best ``λ × score − (1 − λ) × max cosine to
  the tools admitted so far`` (a tool's vector: its first text's, name words and
  description; ``-mean``: the mean of its texts' vectors, renormalised);
* ``ns-m``: at most ``m`` admitted tools per namespace (``server__tool``; ToolBench's
  ``tool_for_api``: the API after the first ``_for_``) while a candidate of another
  namespace is left in the window; tools without a namespace are uncapped;
* ``parts-q``: each query part (:func:`selection.query.query_parts` after the whole
  query: the request's sentences and trailing tool results) gets its ``q`` best tools of
  the window not already in front, by its own cosine, admitted first, in turns (the best
  by fused score first of all); then the rest by fused score. ``-fused``: a part ranks
  by its cosine plus the fused score's BM25 and name terms; ``-user``: sentences of the
  request only (no tool results); ``-16``: a part's tools from the fused top 16 (2k)
  only; ``+mmr-λ``: the rest by MMR;
* ``greedy``: the same loop in fused-score order, which must reproduce ``defaults``.

The patched scorer records, per scored case, the dense cosine of every part (float32
``(p, n_tools)``) and the tool vectors (float32 ``(n_tools, d)``, rows L2-normalised),
keyed by the identity of the fused score array that ``select`` then receives (the
product's ``choose`` sees neither). Benchmark code only: none of this is the product's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np

import selection.evaluation.scoring
import selection.selector
from selection.catalog import Catalog
from selection.dependencies import expand
from selection.engine import Scores, SelectionEngine
from selection.index import ToolIndex
from selection.policy import namespace_of
from selection.query import _query_texts, query_parts
from selection.ranking import (
    CONTENDER_FACTOR,
    SCAN_EXTRA,
    SCAN_FACTOR,
    Candidate,
    CandidateReason,
    Choice,
    RankingPolicy,
    choose,
    token_budget,
)
from selection.tokens import tool_tokens


@dataclass(frozen=True)
class Side:
    """What a variant reads beyond the fused scores: ``parts`` cosine per query part and
    tool ``(p, n_tools)``; ``vectors`` first-text vector per tool ``(n_tools, d)``;
    ``mean_vectors`` the mean of a tool's text vectors, renormalised."""

    parts: np.ndarray
    vectors: np.ndarray
    mean_vectors: np.ndarray
    fused: np.ndarray
    results: tuple[bool, ...] = ()


#: id(fused score array) → its side information (the arrays live as long as the run).
SIDE: dict[int, Side] = {}
#: A query's parts → which of them are tool results (not sentences of the request).
RESULT_PARTS: dict[tuple[str, ...], tuple[bool, ...]] = {}


def _marking_parts(messages: Sequence[Any], *args: Any, **kwargs: Any) -> list[str]:
    """:func:`selection.query.query_parts`, recording which parts are tool results."""
    parts = query_parts(messages, *args, **kwargs)
    results = {text.strip() for is_user, text in _query_texts(messages, args[0] if args else 2)
               if not is_user}
    RESULT_PARTS[tuple(parts)] = tuple(part.strip() in results for part in parts)
    return parts


#: id(index) → (the index, its first-text vectors, its mean vectors).
_TOOL_VECTORS: dict[int, tuple[ToolIndex, np.ndarray, np.ndarray]] = {}


def _index_vectors(index: ToolIndex) -> tuple[np.ndarray, np.ndarray]:
    """Per tool of ``index``: its first text's vector and its texts' mean vector
    (renormalised), float32 ``(n_tools, d)`` each."""
    cached = _TOOL_VECTORS.get(id(index))
    if cached is not None and cached[0] is index:
        return cached[1], cached[2]
    import faiss

    flat = faiss.rev_swig_ptr(index.index.get_xb(), index.index.ntotal * index.index.d)
    texts = np.array(flat, dtype=np.float32).reshape(index.index.ntotal, index.index.d)
    first = np.zeros((index.n_tools, index.index.d), dtype=np.float32)
    owners, where = np.unique(index.owners, return_index=True)  # each tool's first text
    first[owners] = texts[where]
    total = np.zeros_like(first)
    np.add.at(total, index.owners, texts)
    norms = np.linalg.norm(total, axis=1, keepdims=True)
    mean = np.divide(total, norms, out=np.zeros_like(total), where=norms > 0)
    _TOOL_VECTORS[id(index)] = (index, first, mean)
    return first, mean


def _part_cosines(index: ToolIndex, queries: np.ndarray) -> np.ndarray:
    """Per query part and tool, the best cosine of the tool's texts: ``queries``
    ``(p, d)`` → float32 ``(p, n_tools)`` (-1 for a tool without texts)."""
    import faiss

    flat = faiss.rev_swig_ptr(index.index.get_xb(), index.index.ntotal * index.index.d)
    texts = flat.reshape(index.index.ntotal, index.index.d)
    similarities = queries @ texts.T  # (p, n_texts)
    best = np.full((len(queries), index.n_tools), -1.0, dtype=np.float32)
    for row in range(len(queries)):
        np.maximum.at(best[row], index.owners, similarities[row])
    return best


def _recording_score() -> Callable[..., Any]:
    """``SelectionEngine.score`` that also records the case's :class:`Side` in ``SIDE``."""
    original = SelectionEngine.score

    async def score(self: SelectionEngine, catalog: Catalog, examples: Mapping[str, Sequence[str]],
                    query: str | Sequence[str]) -> Scores:
        result = await original(self, catalog, examples, query)
        parts = [query] if isinstance(query, str) else list(query)
        index = self._indexes.get(self._index_key(catalog, examples))
        if index is not None and parts and not result.lexical_only:
            first, mean = _index_vectors(index)
            vectors = await self.embed_parts(parts)
            SIDE[id(result.values)] = Side(
                _part_cosines(index, vectors), first, mean, result.values,
                RESULT_PARTS.get(tuple(parts), ()),
            )
        return result

    return score


class Picker:
    """Which candidate of ``remaining`` (window positions, fused-score order) comes next,
    given the catalogue positions admitted so far."""

    def pick(self, remaining: list[int], chosen: list[int]) -> int:
        return remaining[0]


class Mmr(Picker):
    """The candidate with the best ``lam × score − (1 − lam) × max cosine`` to the admitted
    tools (the best scored first)."""

    def __init__(self, lam: float, side: Side, scores: np.ndarray, mean: bool) -> None:
        self.lam, self.scores = lam, scores
        self.vectors = side.mean_vectors if mean else side.vectors

    def pick(self, remaining: list[int], chosen: list[int]) -> int:
        if not chosen:
            return remaining[0]
        rest = np.asarray(remaining)
        redundancy = (self.vectors[rest] @ self.vectors[chosen].T).max(axis=1)
        value = self.lam * self.scores[rest] - (1 - self.lam) * redundancy
        return int(rest[int(np.argmax(value))])  # ties: the first, i.e. the better scored


def namespace(name: str) -> str | None:
    """``server__tool`` → ``server``; ToolBench's ``tool_for_api`` → ``api``; else None."""
    space = namespace_of(name)
    if space is None and "_for_" in name:
        space = name.split("_for_", 1)[1]
    return space


class NamespaceCap(Picker):
    """The best scored candidate whose namespace (:func:`namespace`) has fewer than ``m``
    admitted tools; when every one's has, the best scored."""

    def __init__(self, m: int, catalog: Catalog) -> None:
        self.m, self.catalog = m, catalog

    def pick(self, remaining: list[int], chosen: list[int]) -> int:
        counts: dict[str, int] = {}
        for position in chosen:
            space = namespace(self.catalog.tools[position].name)
            if space is not None:
                counts[space] = counts.get(space, 0) + 1
        for position in remaining:
            space = namespace(self.catalog.tools[position].name)
            if space is None or counts.get(space, 0) < self.m:
                return position
        return remaining[0]


class PartQuota(Picker):
    """``front`` first (the best by fused score, then each sub-part's ``q`` best of the
    window, in turns), then ``then`` (fused-score order by default)."""

    def __init__(self, q: int, side: Side, scores: np.ndarray, ranked: list[int], fused: bool,
                 then: Picker | None = None, users_only: bool = False,
                 window: int | None = None) -> None:
        self.then = then or Picker()
        first = ranked[:1]
        ranked = ranked[:window] if window else ranked
        sub = side.parts[1:]
        if users_only and side.results:
            sub = sub[[not result for result in side.results[1:]]]
        if fused and len(sub):
            dense = side.parts.max(axis=0)
            sub = sub + (scores - dense)[None, :]
        allowed = np.zeros(len(scores), dtype=bool)
        allowed[ranked] = True
        front = list(first)
        orders = [
            np.argsort(-np.where(allowed, row, -np.inf), kind="stable")[: len(ranked)].tolist()
            for row in sub
        ]
        for _ in range(q):  # each part its next best not yet in front, in turns
            for order in orders:
                mine = next((p for p in order if p not in front), None)
                if mine is not None:
                    front.append(mine)
        self.front = front

    def pick(self, remaining: list[int], chosen: list[int]) -> int:
        for position in self.front:
            if position in remaining:
                return position
        return self.then.pick(remaining, chosen)


PickerFactory = Callable[[Catalog, np.ndarray, Side, list[int]], Picker]


def choose_by(factory: PickerFactory) -> Callable[..., Choice]:
    """:func:`selection.ranking.choose` with the admission order of ``factory``'s picker
    (the product's own ``choose`` for count top-k and where no side information exists)."""

    def variant_choose(
        catalog: Catalog, scores: np.ndarray, *, top_k: int, threshold: float,
        exclude: set[str], policy: RankingPolicy, max_count: int | None = None,
        exact: Mapping[str, int] | None = None, named: np.ndarray | None = None,
    ) -> Choice:
        side = SIDE.get(id(scores))
        if policy.budget == "count" or side is None or side.fused is not scores:
            return choose(catalog, scores, top_k=top_k, threshold=threshold, exclude=exclude,
                          policy=policy, max_count=max_count, exact=exact, named=named)
        if top_k <= 0 or len(catalog) == 0:
            return Choice((), ())
        limit = max_count if max_count is not None else len(catalog)
        order = np.argsort(-scores, kind="stable")
        window = [int(p) for p in order[: SCAN_FACTOR * top_k + len(exclude) + SCAN_EXTRA]]
        ranked = [p for p in window if catalog.tools[p].name not in exclude]
        contenders = [catalog.tools[p] for p in ranked[: CONTENDER_FACTOR * top_k]]
        budget = token_budget(catalog, top_k, policy, exact, contenders)
        floor = threshold
        if policy.dominance_margin is not None:
            floor = max(floor, float(scores[order[0]]) - policy.dominance_margin)
        named_turn = bool(policy.named_only and named is not None and ranked and named[ranked[0]])
        admissible = [p for p in ranked if named[p]] if named_turn else ranked
        reason: CandidateReason = "named" if named_turn else "semantic"
        picker = Picker() if named_turn else factory(catalog, scores, side, admissible)
        chosen: list[Candidate] = []
        positions: list[int] = []
        refused: list[str] = []
        taken: set[str] = set()
        spent = 0
        parents = 0

        def admit(candidate: Candidate, cost: int, position: int) -> bool:
            nonlocal spent
            if len(chosen) >= limit or (chosen and spent + cost > budget):
                return False
            chosen.append(candidate)
            positions.append(position)
            taken.add(candidate.name)
            spent += cost
            return True

        remaining = [p for p in admissible if float(scores[p]) >= floor]
        while remaining and len(chosen) < limit and spent < budget:
            position = picker.pick(remaining, positions)
            remaining.remove(position)
            tool = catalog.tools[position]
            if tool.name in taken:
                continue
            if not admit(Candidate(tool.name, float(scores[position]), reason),
                         tool_tokens(tool, exact), position):
                continue
            if parents < policy.dependency_parents:
                parents += 1
                room = policy.max_dependencies - sum(c.reason == "dependency" for c in chosen)
                for dependency in expand(
                    catalog, scores, [tool.name], exclude | taken, max_added=room,
                    min_score=threshold,
                ):
                    producer = catalog.get(dependency.name)
                    at = catalog.index_of(dependency.name)
                    assert producer is not None and at is not None
                    produced = Candidate(dependency.name, float(scores[at]), "dependency", tool.name)
                    if not admit(produced, tool_tokens(producer, exact), at):
                        refused.append(dependency.name)
        rest = (catalog.tools[p].name for p in ranked)
        tier = [name for name in dict.fromkeys([*refused, *rest]) if name not in taken]
        return Choice(tuple(chosen), tuple(tier[: policy.tier_size]))

    return variant_choose


def _patch(factory: PickerFactory) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        with mock.patch.object(SelectionEngine, "score", _recording_score()), \
                mock.patch.object(selection.evaluation.scoring, "query_parts", _marking_parts), \
                mock.patch.object(selection.selector, "choose", choose_by(factory)):
            yield

    return patched


def _mmr(lam: float, mean: bool = False) -> PickerFactory:
    return lambda catalog, scores, side, ranked: Mmr(lam, side, scores, mean)


def _cap(m: int) -> PickerFactory:
    return lambda catalog, scores, side, ranked: NamespaceCap(m, catalog)


def _parts(q: int, fused: bool = False, then: PickerFactory | None = None,
           users_only: bool = False, window: int | None = None) -> PickerFactory:
    return lambda catalog, scores, side, ranked: PartQuota(
        q, side, scores, ranked, fused, then(catalog, scores, side, ranked) if then else None,
        users_only, window,
    )


VARIANTS = {
    "greedy": (_patch(lambda catalog, scores, side, ranked: Picker()),),
    **{f"mmr-{lam}": (_patch(_mmr(lam)),) for lam in (0.6, 0.7, 0.8, 0.9)},
    **{f"mmr-{lam}-mean": (_patch(_mmr(lam, True)),) for lam in (0.7, 0.8, 0.9)},
    **{f"ns-{m}": (_patch(_cap(m)),) for m in (1, 2, 3)},
    **{f"parts-{q}": (_patch(_parts(q)),) for q in (1, 2)},
    **{f"parts-{q}-fused": (_patch(_parts(q, True)),) for q in (1, 2, 3)},
    **{f"parts-{q}-fused+mmr-{lam}": (_patch(_parts(q, True, _mmr(lam))),)
       for q in (1, 2) for lam in (0.8, 0.9)},
    **{f"parts-{q}-fused-user": (_patch(_parts(q, True, users_only=True)),) for q in (1, 2)},
    **{f"parts-{q}-fused-16": (_patch(_parts(q, True, window=16)),) for q in (1, 2)},
    "parts-2-fused-user-16": (_patch(_parts(2, True, users_only=True, window=16)),),
}
