"""Ranking a catalogue for one turn: hybrid scores, and the candidates a turn forwards.

Scores: the dense cosine (best tool text against the best query part) plus
``lexical_weight`` × the BM25 score normalised by the turn's best BM25 score
(:class:`LexicalIndex`) plus ``name_weight`` × the share of the tool's name words that
the request uses (:mod:`selection.name_match`), so a request that uses a tool's own words
("list the open pull requests" → ``list_pull_requests``) ranks that tool first even when
the embedder prefers another. Weighted sum of normalised scores rather than reciprocal
rank fusion: RRF throws away the score gaps that adaptive k reads (and measured worse,
benchmarks/README.md "Ranking levers").

Candidates (:func:`choose`): tools in score order (τ inclusive) are admitted while they fit
a token budget (``top_k`` × the mean tool cost of the catalogue and of the turn's best
2 × ``top_k`` candidates, averaged: a catalogue of small tools gets more of them and one
of large tools fewer, and the budget follows the cost of the tools actually in contention)
and stay within ``dominance_margin`` of the best score (one dominant match: few tools;
flat scores: the whole budget); when a one-intent request names the best candidate
(every word of its name; :mod:`selection.name_match`), only the tools it names are
candidates. Each admitted tool among the first ``dependency_parents``
brings the producers of the identifiers it needs (:mod:`selection.dependencies`), bounded
by ``max_dependencies`` and the same budget. The next ``tier_size`` tools by score form
the *tier*: listed by name and purpose in the meta-tool, loadable in one round.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from selection.catalog import Catalog, Tool, name_words
from selection.dependencies import expand
from selection.group_inputs import input_producers
from selection.index import LRUCache
from selection.tokens import tool_tokens


@dataclass(frozen=True)
class RankingPolicy:
    """Knobs of ranking and candidate choice (see the module docstring).

    ``lexical_weight``: weight of the normalised BM25 score added to the cosine (0: dense
    only). ``name_weight``: weight of the name-word coverage (0: off). ``budget``:
    ``tokens`` (candidates fill a token budget) or ``count`` (classic top-k: ``top_k``
    candidates whatever their cost). ``token_budget``: schema tokens the semantic
    candidates may cost per turn (0: :func:`token_budget`). ``dominance_margin``: candidates
    scoring below the best minus this are not admitted (None: off). ``max_dependencies``
    / ``dependency_parents``: producers added per turn, for how many of the first
    admitted tools. ``tier_size``: tools listed by name in the meta-tool beyond the
    forwarded ones. ``named_only``: when a one-intent request names the best candidate,
    only the tools it names are candidates (:mod:`selection.name_match`).
    """

    lexical_weight: float = 0.1
    name_weight: float = 0.2
    budget: Literal["tokens", "count"] = "tokens"
    token_budget: int = 0
    dominance_margin: float | None = None
    max_dependencies: int = 4
    dependency_parents: int = 8
    tier_size: int = 8
    named_only: bool = True


def lexical_text(tool: Tool) -> str:
    """The text BM25 indexes for a tool: name words, description and parameter names."""
    properties = tool.parameters.get("properties")
    parameters = " ".join(name_words(str(p)) for p in properties) if isinstance(properties, Mapping) else ""
    return " ".join(part for part in (name_words(tool.name), tool.description, parameters) if part)


def bm25_tokens(texts: Sequence[str]) -> list[list[str]]:
    """The words BM25 sees of each text (``bm25s.tokenize``: lower-cased words of two or
    more characters, English stop words removed, no stemming), one list per text."""
    import bm25s

    return bm25s.tokenize(list(texts), return_ids=False, show_progress=False)


class LexicalIndex:
    """BM25 over one catalogue's :func:`lexical_text` (library ``bm25s``: lower-cased
    words of two or more characters, English stop words removed, Lucene BM25 with
    k1 = 1.5, b = 0.75; Robertson & Zaragoza, "The Probabilistic Relevance Framework:
    BM25 and Beyond", 2009)."""

    def __init__(self, catalog: Catalog) -> None:
        import bm25s

        started = time.perf_counter()
        self._size = len(catalog)
        self._retriever = bm25s.BM25()
        if self._size:
            self._retriever.index(
                bm25_tokens([lexical_text(tool) for tool in catalog.tools]), show_progress=False
            )
        self.build_s = time.perf_counter() - started

    def scores(self, query: str) -> np.ndarray:
        """BM25 score per tool for ``query``, float32 ``(len(catalog),)``, normalised to
        [0, 1] by the best (all zeros when no query word is in the catalogue)."""
        return normalised_bm25(self._retriever, query, self._size)


def normalised_bm25(retriever: Any, query: str, size: int) -> np.ndarray:
    """The BM25 scores of ``query`` by ``retriever`` (a ``bm25s.BM25`` over ``size``
    texts tokenised by :func:`bm25_tokens`, or unindexed when ``size`` is 0), float32
    ``(size,)`` normalised to [0, 1] by the best (all zeros when no query word is in any
    text)."""
    tokens = bm25_tokens([query])[0] if query.strip() else []
    if not tokens or not size:
        return np.zeros(size, dtype=np.float32)
    raw = np.asarray(retriever.get_scores(tokens), dtype=np.float32)
    best = float(raw.max())
    return raw / best if best > 0 else np.zeros(size, dtype=np.float32)


def fuse(
    dense: np.ndarray,
    lexical: np.ndarray | None,
    weight: float,
    names: np.ndarray | None = None,
    name_weight: float = 0.0,
) -> np.ndarray:
    """``dense + weight × lexical + name_weight × names`` (float32, same shape);
    ``lexical`` and ``names`` (:meth:`selection.name_match.NameIndex.coverage`) in [0, 1],
    None (or a weight of 0) leaving their term out: ``dense`` itself when both are out."""
    fused = dense
    if lexical is not None and weight != 0:
        fused = fused + np.float32(weight) * lexical
    if names is not None and name_weight != 0:
        fused = fused + np.float32(name_weight) * names
    return np.asarray(fused, dtype=np.float32)


CandidateReason = Literal["semantic", "named", "dependency"]

#: :func:`choose` considers the best ``SCAN_FACTOR`` × top-k + ``SCAN_EXTRA`` tools only.
SCAN_FACTOR = 4
SCAN_EXTRA = 16
#: :func:`token_budget` averages in the cost of the best ``CONTENDER_FACTOR`` × top-k
#: candidates.
CONTENDER_FACTOR = 2


@dataclass(frozen=True)
class Candidate:
    """A tool a turn admits: ``score`` is its own score; ``parent`` the tool whose
    identifier it produces (reason ``dependency``). Reason ``named``: a semantic
    candidate admitted because a one-intent request names it (the others were not)."""

    name: str
    score: float
    reason: CandidateReason
    parent: str | None = None


@dataclass(frozen=True)
class Choice:
    """Candidates to admit, in admission order, and the tier (names, best first)."""

    candidates: tuple[Candidate, ...]
    tier: tuple[str, ...]


#: Mean tool tokens by catalogue fingerprint (estimated costs only).
_MEDIANS: LRUCache[str, float] = LRUCache(256)


def mean_tool_tokens(catalog: Catalog, exact: Mapping[str, int] | None = None) -> float:
    """Mean :func:`~selection.tokens.tool_tokens` over the catalogue (0 when empty)."""
    if not len(catalog):
        return 0.0
    cached = _MEDIANS.get(catalog.fingerprint) if exact is None else None
    if cached is None:
        cached = float(statistics.fmean(tool_tokens(tool, exact) for tool in catalog.tools))
        if exact is None:
            _MEDIANS.put(catalog.fingerprint, cached)
    return cached


def token_budget(catalog: Catalog, top_k: int, policy: RankingPolicy,
                 exact: Mapping[str, int] | None = None,
                 contenders: Sequence[Tool] = ()) -> int:
    """The turn's budget of candidate schema tokens: ``policy.token_budget``, or
    ``top_k`` × the mean of :func:`mean_tool_tokens` and the mean cost of
    ``contenders`` (the turn's best 2 × ``top_k`` candidates; the catalogue mean alone
    when there are none). The catalogue's mean alone under-spends where the tools in
    contention are larger than the catalogue's average (BFCL multi-turn: 8 × mean bought
    fewer tools than dense top-8, recall 0.825 → 0.806); their mean alone lets a turn
    of large candidates spend as much as count top-k (benchmarks/README.md)."""
    if policy.token_budget > 0:
        return policy.token_budget
    if top_k <= 0:
        return 0
    mean = mean_tool_tokens(catalog, exact)
    if contenders:
        mean = (mean + statistics.fmean(tool_tokens(t, exact) for t in contenders)) / 2
    return int(top_k * mean)


def choose(
    catalog: Catalog,
    scores: np.ndarray,
    *,
    top_k: int,
    threshold: float,
    exclude: set[str],
    policy: RankingPolicy,
    max_count: int | None = None,
    exact: Mapping[str, int] | None = None,
    named: np.ndarray | None = None,
    group_of: np.ndarray | None = None,
) -> Choice:
    """The candidates of one turn (see the module docstring).

    ``scores``: float32 ``(len(catalog),)``, fused score per tool. ``exclude``: tools
    already forwarded for another reason (CORE, pinned): never candidates, cost nothing.
    ``max_count``: most candidates admitted (default: no count limit beyond the budget;
    with ``policy.budget == "count"``, ``top_k``).
    A first candidate is always admitted when one scores ≥ τ, whatever its cost.
    ``named``: bool ``(len(catalog),)``, the tools a one-intent request names
    (:attr:`selection.engine.Scores.named`); with ``policy.named_only``, when the best
    candidate is named, only named tools are semantic candidates (the others stay in
    score order for the tier). ``group_of``: int ``(len(catalog),)``, each tool's group
    (−1: none): a grouped tool's dependencies come from its own group
    (:func:`selection.dependencies.expand`), then from the group mates that produce its
    required inputs (:func:`selection.group_inputs.input_producers`).
    """
    if top_k <= 0 or len(catalog) == 0:
        return Choice((), ())
    limit = max_count if max_count is not None else len(catalog)
    order = np.argsort(-scores, kind="stable")
    # Only the best few are looked at: a large catalogue is not scanned for small tools
    # that would fit what is left of the budget.
    window = [int(p) for p in order[: SCAN_FACTOR * top_k + len(exclude) + SCAN_EXTRA]]
    ranked = [p for p in window if catalog.tools[p].name not in exclude]
    if policy.budget == "count":
        budget, limit = 2**62, min(limit, top_k)
    else:
        contenders = [catalog.tools[p] for p in ranked[: CONTENDER_FACTOR * top_k]]
        budget = token_budget(catalog, top_k, policy, exact, contenders)
    best = float(scores[order[0]]) if len(order) else 0.0
    floor = threshold
    if policy.dominance_margin is not None:
        floor = max(floor, best - policy.dominance_margin)
    named_turn = bool(policy.named_only and named is not None and ranked and named[ranked[0]])
    ranked_admissible = [p for p in ranked if named[p]] if named_turn else ranked
    semantic_reason: CandidateReason = "named" if named_turn else "semantic"
    chosen: list[Candidate] = []
    refused: list[str] = []  # dependencies the budget had no room for: tier first
    taken: set[str] = set()
    spent = 0
    parents = 0

    def admit(candidate: Candidate, cost: int) -> bool:
        nonlocal spent
        if len(chosen) >= limit or (chosen and spent + cost > budget):
            return False
        chosen.append(candidate)
        taken.add(candidate.name)
        spent += cost
        return True

    for position in ranked_admissible:
        tool = catalog.tools[position]
        score = float(scores[position])
        if score < floor or len(chosen) >= limit or spent >= budget:
            break
        if tool.name in taken:
            continue
        if not admit(Candidate(tool.name, score, semantic_reason), tool_tokens(tool, exact)):
            continue  # too large for what is left: a smaller one may still fit
        if parents < policy.dependency_parents:
            parents += 1
            room = policy.max_dependencies - sum(c.reason == "dependency" for c in chosen)
            dependencies = expand(
                catalog, scores, [tool.name], exclude | taken, max_added=room, min_score=threshold,
                group_of=group_of,
            )
            if group_of is not None and len(dependencies) < room:
                present = exclude | taken | {d.name for d in dependencies}
                dependencies += input_producers(
                    catalog, group_of, scores, [tool.name], present,
                    max_added=room - len(dependencies), min_score=threshold,
                )
            for dependency in dependencies:
                producer = catalog.get(dependency.name)
                assert producer is not None
                position_of = catalog.index_of(dependency.name)
                assert position_of is not None
                if not admit(
                    Candidate(dependency.name, float(scores[position_of]), "dependency", tool.name),
                    tool_tokens(producer, exact),
                ):
                    refused.append(dependency.name)
    rest = (catalog.tools[p].name for p in ranked)
    tier = [name for name in dict.fromkeys([*refused, *rest]) if name not in taken]
    return Choice(tuple(chosen), tuple(tier[: policy.tier_size]))


def semantic_candidates(
    catalog: Catalog, scores: np.ndarray, top_k: int, threshold: float, exclude: set[str]
) -> list[tuple[str, float]]:
    """The ``top_k`` best-scored tools not in ``exclude`` whose score is ≥ ``threshold``
    (τ, inclusive), best first; ties broken by catalogue order.

    ``scores``: float32 array of shape ``(len(catalog),)``, cosine per tool.
    """
    if top_k <= 0 or len(catalog) == 0:
        return []
    order = np.argsort(-scores, kind="stable")
    chosen: list[tuple[str, float]] = []
    for position in order:
        score = float(scores[position])
        if score < threshold or len(chosen) >= top_k:
            break
        name = catalog.tools[position].name
        if name not in exclude:
            chosen.append((name, score))
    return chosen
