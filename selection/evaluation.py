"""Offline evaluation of tool selection on labelled cases (``toolprune eval``). No HTTP.

Cases follow docs/eval-format.md: one JSON object per line with ``id``,
``messages``, ``tools`` (or ``catalog``: a file relative to the set's folder holding the
``tools`` array), ``expected`` (tool names; ``[]`` means no tool should be called) and
optionally ``expected_any_of`` (a list of alternatives; each inner list is one more
required tool, satisfied by any of its members).

The evaluation runs the proxy's own steps for every case (proxy/chat/planner.py
``Planner.plan``): a catalogue of at most ``min_catalog_tools`` tools is passed through
whole; otherwise ``query_parts`` → scorer → ``select`` with ``pinned`` = a
``tool_choice`` function + ``called_tools(messages)`` + ``text_called_tools`` and the
conversation's
:class:`~selection.state.ConversationState` carried from its previous step, so
stickiness and history pinning count exactly as in the proxy. Conversations are keyed
by :func:`conversation_key` (as if sent as ``X-Conversation-Id``), cases replayed in
file order. The query is scored once per case and ``select`` replayed per k (the
planner would embed the same query again for each k); tests check that the forwarded
lists equal ``Planner.plan``'s. System-prompt tool blocks (the text path) are not
evaluated: the data sets send native ``tools``. Meta-tools
(``load_tools``/``search_tools``) are not simulated: a miss here is a miss the model
would have to repair with the escape hatch.

Per k of the sweep, ``select`` runs with ``top_k = k`` and ``max_tools = max(policy
.max_tools, k)`` (``k = all``: the catalogue size), so the cap never cuts semantic
admissions below k while stickiness still fills up to the configured cap, as it would in
the proxy. Hence the mean number forwarded may exceed k; it is reported as measured.

Metrics, per k (nothing is ever dropped from a denominator):

* ``recall``: satisfied requirements / all requirements over cases that expect a tool
  (a requirement is an ``expected`` name, or one ``expected_any_of`` group);
  ``recall_macro``: the mean of per-case recall.
* ``all``: share of those cases whose requirements were all satisfied.
* ``mrr_at_k``: mean reciprocal rank of each case's best-ranked requirement in the score
  order, counted only when that rank is ≤ k (``mrr`` per method: untruncated).
* ``forwarded_mean``: tools forwarded per case; ``none_forwarded_mean``: the same over
  the ``expected: []`` cases, reported apart (tools forwarded for nothing).
* misses: each unsatisfied requirement with the rank its best member had (1 = best
  score; ``None`` when it is not in the catalogue or the case had no query).

Latency per case: scoring (query embedding + index search, with the catalogue index
already built) plus one ``select`` at the policy's ``top_k``.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from selection.catalog import Catalog, parse_tools
from selection.engine import SelectionEngine
from selection.errors import CatalogError, SelectionError
from selection.history import called_tools, read_tool_choice
from selection.policy import Policy
from selection.query import query_parts
from selection.selector import select
from selection.state import ConversationState
from selection.text_path import text_called_tools

#: ``None`` in a k sweep means "all": k is the catalogue size.
ALL = None
DEFAULT_KS: tuple[int | None, ...] = (1, 2, 4, 8, 16, 32, ALL)

_CALL_SUFFIX = re.compile(r"^(?P<conversation>.+)_call\d+$")
_STEP_SUFFIX = re.compile(r"^(?P<conversation>.+)_t\d+_s\d+$")


def parse_ks(text: str) -> tuple[int | None, ...]:
    """``"1,2,4,all"`` → ``(1, 2, 4, None)``. Raises ValueError."""
    ks: list[int | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if item == "all":
            ks.append(ALL)
        else:
            k = int(item)
            if k < 1:
                raise ValueError(f"k must be ≥ 1, got {k}")
            ks.append(k)
    if not ks:
        raise ValueError("no k given")
    return tuple(dict.fromkeys(ks))


def k_label(k: int | None) -> str:
    return "all" if k is None else str(k)


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One labelled request.

    ``catalog`` is None when the case's tools could not be parsed (the proxy then
    forwards them unchanged). ``requirements``: one tuple per required tool, satisfied
    by any of its members.
    """

    id: str
    conversation: str
    messages: list[Any]
    catalog: Catalog | None
    tool_names: tuple[str, ...]
    requirements: tuple[tuple[str, ...], ...]
    tool_choice: Any = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def expects_none(self) -> bool:
        return not self.requirements


@dataclass(frozen=True)
class CaseSet:
    """Cases of one data file, in file order. ``total``: cases in the file (before
    sampling); ``conversations``: distinct conversation keys among ``cases``."""

    name: str
    path: Path
    cases: list[Case]
    total: int

    @property
    def conversations(self) -> int:
        return len({case.conversation for case in self.cases})


def conversation_key(raw: Mapping[str, Any]) -> str:
    """The conversation a case is a step of.

    An explicit ``conversation`` / ``conversation_id`` / ``source_id`` key (BFCL
    multi-turn: ``source_id``); else the id without a ``_callN`` suffix (API-Bank:
    ``..._call0``, ``..._call1`` are the steps of one dialogue) or a ``_tN_sM`` suffix;
    else the case id (a single-turn case is its own conversation).
    """
    for key in ("conversation", "conversation_id", "source_id"):
        value = raw.get(key)
        if isinstance(value, str | int) and str(value):
            return str(value)
    case_id = str(raw.get("id", ""))
    for pattern in (_CALL_SUFFIX, _STEP_SUFFIX):
        match = pattern.match(case_id)
        if match:
            return match["conversation"]
    return case_id


def _requirements(raw: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    expected = raw.get("expected") or []
    any_of = raw.get("expected_any_of") or []
    if not isinstance(expected, list) or not isinstance(any_of, list):
        raise ValueError(f"case {raw.get('id')!r}: expected / expected_any_of must be lists")
    units = [(str(name),) for name in dict.fromkeys(expected)]
    for group in any_of:
        members = group if isinstance(group, list) else [group]
        if members:
            units.append(tuple(dict.fromkeys(str(name) for name in members)))
    return tuple(units)


class _CatalogCache:
    """Parsed catalogues by source (a file path, or the canonical JSON of an inline
    ``tools`` array), so each distinct catalogue is parsed once."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[Catalog | None, tuple[str, ...]]] = {}

    def _parse(self, key: str, load: Callable[[], Any]) -> tuple[Catalog | None, tuple[str, ...]]:
        hit = self._parsed.get(key)
        if hit is None:
            tools = load()
            try:
                catalog: Catalog | None = parse_tools(tools)
                names = tuple(catalog.names)
            except CatalogError:
                catalog = None
                names = tuple(
                    str(entry.get("function", {}).get("name", ""))
                    for entry in tools
                    if isinstance(entry, Mapping) and isinstance(entry.get("function"), Mapping)
                ) if isinstance(tools, list) else ()
            hit = self._parsed[key] = (catalog, names)
        return hit

    def from_file(self, path: Path) -> tuple[Catalog | None, tuple[str, ...]]:
        def load() -> Any:
            with path.open(encoding="utf-8") as handle:
                return json.load(handle)

        return self._parse(str(path.resolve()), load)

    def inline(self, tools: Any) -> tuple[Catalog | None, tuple[str, ...]]:
        key = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return self._parse(key, lambda: tools)


def _sample(raws: list[dict[str, Any]], limit: int, seed: int) -> list[dict[str, Any]]:
    """Whole conversations, drawn at random (``seed``) until at least ``limit`` cases;
    file order kept. A conversation is never cut, so its state replays faithfully."""
    groups: dict[str, list[int]] = defaultdict(list)
    for position, raw in enumerate(raws):
        groups[conversation_key(raw)].append(position)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    chosen: list[int] = []
    for key in keys:
        if len(chosen) >= limit:
            break
        chosen.extend(groups[key])
    return [raws[position] for position in sorted(chosen)]


def load_cases(path: Path | str, *, limit: int | None = None, seed: int = 0) -> CaseSet:
    """Read a ``cases.jsonl``. ``limit``: sample whole conversations (seeded) until at
    least ``limit`` cases. Raises ValueError on a malformed case, OSError on I/O."""
    path = Path(path)
    raws: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list):
                raise ValueError(f"{path}:{number}: a case must be an object with messages")
            if "tools" not in raw and "catalog" not in raw:
                raise ValueError(f"{path}:{number}: a case needs tools or catalog")
            raws.append(raw)
    total = len(raws)
    if limit is not None and limit < total:
        raws = _sample(raws, limit, seed)
    cache = _CatalogCache()
    cases = []
    for raw in raws:
        if "tools" in raw:
            catalog, names = cache.inline(raw["tools"])
        else:
            catalog, names = cache.from_file(path.parent / str(raw["catalog"]))
        meta = {
            key: value
            for key, value in raw.items()
            if key not in ("messages", "tools", "expected", "expected_any_of")
        }
        cases.append(
            Case(
                id=str(raw.get("id", len(cases))),
                conversation=conversation_key(raw),
                messages=raw["messages"],
                catalog=catalog,
                tool_names=names,
                requirements=_requirements(raw),
                tool_choice=raw.get("tool_choice"),
                meta=meta,
            )
        )
    name = path.parent.name if path.name == "cases.jsonl" else path.stem
    return CaseSet(name, path, cases, total)


# --------------------------------------------------------------------------- scoring


class Scorer(Protocol):
    """Scores every tool of a catalogue against a query text."""

    name: str
    #: Whether the policy's τ applies to these scores (cosines) or not (BM25).
    uses_threshold: bool

    async def prepare(self, catalog: Catalog) -> float:
        """Build what scoring ``catalog`` needs; the seconds spent embedding for it."""
        ...

    async def score(self, catalog: Catalog, query: Sequence[str]) -> tuple[np.ndarray, float]:
        """Per-tool scores (float32, catalogue order) and the seconds spent embedding.
        ``query``: :func:`~selection.query.query_parts` (the whole query first)."""
        ...


class EngineScorer:
    """The proxy's scorer: :meth:`SelectionEngine.score` (cached tool vectors, faiss
    index per catalogue, the policy's example utterances)."""

    uses_threshold = True

    def __init__(
        self, engine: SelectionEngine, examples: Mapping[str, Sequence[str]], name: str = "embed"
    ) -> None:
        self.engine = engine
        self.examples = examples
        self.name = name

    async def prepare(self, catalog: Catalog) -> float:
        return (await self.engine.index_for(catalog, self.examples))[1]

    async def score(self, catalog: Catalog, query: Sequence[str]) -> tuple[np.ndarray, float]:
        scored = await self.engine.score(catalog, self.examples, query)
        return scored.values, scored.embedding_s


@dataclass
class ScoredCase:
    """A case after scoring. ``mode``: ``select`` (pruned), ``small`` (catalogue at or
    below ``min_catalog_tools``: passed through whole, though still scored so that its
    expected tools have ranks), ``fallback`` (unparseable catalogue or scorer error:
    passed through whole). ``scores`` (what ``select`` gets) is None when the case is not
    pruned or had no query. ``ranks``: best rank of each requirement (1-based, None when
    unranked). Embedding time counts pruned cases only, as the proxy spends it."""

    case: Case
    catalog: Catalog | None
    mode: str
    scores: np.ndarray | None
    pinned: list[str]
    ranks: list[int | None]
    score_s: float = 0.0
    query_embedding_s: float = 0.0


@dataclass
class ScoredRun:
    scorer: str
    uses_threshold: bool
    cases: list[ScoredCase]
    index_s: float
    query_embedding_s: float
    errors: int


def _rank_of(scores: np.ndarray, position: int) -> int:
    """1-based rank of ``position`` in the order ``semantic_candidates`` uses (score
    descending, ties by catalogue order)."""
    value = scores[position]
    return int(1 + np.count_nonzero(scores > value) + np.count_nonzero(scores[:position] == value))


def requirement_ranks(case: Case, catalog: Catalog | None, scores: np.ndarray | None) -> list[int | None]:
    ranks: list[int | None] = []
    for unit in case.requirements:
        best: int | None = None
        if catalog is not None and scores is not None:
            for name in unit:
                position = catalog.index_of(name)
                if position is not None:
                    rank = _rank_of(scores, position)
                    best = rank if best is None else min(best, rank)
        ranks.append(best)
    return ranks


def _tool_choice_of(case: Case) -> tuple[str | None, frozenset[str] | None]:
    """(pinned name, allowed set) from a case's ``tool_choice``, read as the proxy reads it."""
    if case.tool_choice is None:
        return None, None
    choice = read_tool_choice({"tool_choice": case.tool_choice})
    return choice.pinned, choice.allowed


async def score_cases(
    cases: Sequence[Case],
    scorer: Scorer,
    *,
    min_catalog_tools: int,
    query_user_messages: int,
    query_chars: int,
    query_parts_max: int = 6,
    progress: Callable[[Iterable[Case]], Iterable[Case]] | None = None,
) -> ScoredRun:
    """Score every case as the proxy would, catalogue index built (and timed) apart."""
    run = ScoredRun(scorer.name, scorer.uses_threshold, [], 0.0, 0.0, 0)
    for case in progress(cases) if progress else cases:
        if case.catalog is None:
            run.cases.append(ScoredCase(case, None, "fallback", None, [], requirement_ranks(case, None, None)))
            continue
        if len(case.catalog) <= min_catalog_tools:
            # Forwarded whole (before tool_choice is read, as in the planner); scored only
            # to rank the expected tools, for MRR: not counted as embedding or latency.
            catalog = case.catalog
            scores = None
            query = query_parts(case.messages, query_user_messages, query_chars, query_parts_max)
            try:
                await scorer.prepare(catalog)
                scores = (await scorer.score(catalog, query))[0] if query else None
            except SelectionError:
                run.errors += 1
            run.cases.append(ScoredCase(case, catalog, "small", None, [], requirement_ranks(case, catalog, scores)))
            continue
        choice_pin, allowed = _tool_choice_of(case)
        catalog = case.catalog if allowed is None else case.catalog.restricted_to(set(allowed))
        pinned = [  # as proxy/chat/planner.py pins
            *([choice_pin] if choice_pin else []),
            *called_tools(case.messages),
            *text_called_tools(case.messages, set(catalog.names)),
        ]
        query = query_parts(case.messages, query_user_messages, query_chars, query_parts_max)
        scores = None
        score_s = embedding_s = 0.0
        try:
            run.index_s += await scorer.prepare(catalog)
            if query:
                started = time.perf_counter()
                scores, embedding_s = await scorer.score(catalog, query)
                score_s = time.perf_counter() - started
        except SelectionError:
            run.errors += 1
            run.cases.append(ScoredCase(case, catalog, "fallback", None, pinned, requirement_ranks(case, catalog, None)))
            continue
        run.query_embedding_s += embedding_s
        run.cases.append(
            ScoredCase(
                case, catalog, "select", scores, pinned,
                requirement_ranks(case, catalog, scores), score_s, embedding_s,
            )
        )
    return run


# --------------------------------------------------------------------------- replay


@dataclass
class CaseOutcome:
    """One case at one k: ``forwarded`` names in forwarding order; ``satisfied`` per
    requirement; ``select_s``: the select call's time (0 when passed through)."""

    case: ScoredCase
    forwarded: list[str]
    satisfied: list[bool]
    select_s: float

    @property
    def recall(self) -> float:
        return sum(self.satisfied) / len(self.satisfied) if self.satisfied else 1.0


def policy_for_k(policy: Policy, k: int | None, catalog_size: int, uses_threshold: bool) -> Policy:
    """The policy a k of the sweep runs with: ``top_k = k``, ``max_tools = max(policy
    .max_tools, k)`` (``all``: the catalogue size); τ off for scores that are not cosines."""
    top_k = catalog_size if k is None else k
    return replace(
        policy,
        top_k=top_k,
        max_tools=max(policy.max_tools, top_k),
        threshold=policy.threshold if uses_threshold else -math.inf,
    )


def replay(run: ScoredRun, policy: Policy, k: int | None) -> list[CaseOutcome]:
    """Run ``select`` for every case in order, carrying each conversation's state."""
    states: dict[str, ConversationState] = {}
    outcomes = []
    clock = 0.0
    for scored in run.cases:
        case = scored.case
        clock += 1.0
        select_s = 0.0
        if scored.mode != "select":
            forwarded = list(scored.catalog.names) if scored.catalog else list(case.tool_names)
        else:
            catalog = scored.catalog
            assert catalog is not None
            state = states.get(case.conversation) or ConversationState()
            started = time.perf_counter()
            selection = select(
                catalog, scored.scores, policy_for_k(policy, k, len(catalog), run.uses_threshold),
                state, now=clock, pinned=scored.pinned,
            )
            select_s = time.perf_counter() - started
            selection.state.turn += 1
            states[case.conversation] = selection.state
            forwarded = selection.names
        chosen = set(forwarded)
        satisfied = [any(name in chosen for name in unit) for unit in case.requirements]
        outcomes.append(CaseOutcome(scored, forwarded, satisfied, select_s))
    return outcomes


# --------------------------------------------------------------------------- reports


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _mean(values: Sequence[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def summarise_k(outcomes: Sequence[CaseOutcome], k: int | None) -> dict[str, Any]:
    """Metrics of one k (see the module docstring)."""
    expecting = [o for o in outcomes if not o.case.case.expects_none]
    nothing = [o for o in outcomes if o.case.case.expects_none]
    units = sum(len(o.satisfied) for o in expecting)
    hits = sum(sum(o.satisfied) for o in expecting)
    misses = []
    reciprocal = []
    for outcome in expecting:
        ranks = [r for r in outcome.case.ranks if r is not None]
        best = min(ranks) if ranks else None
        reciprocal.append(1.0 / best if best is not None and (k is None or best <= k) else 0.0)
        for unit, ok, rank in zip(outcome.case.case.requirements, outcome.satisfied, outcome.case.ranks, strict=True):
            if not ok:
                misses.append({"id": outcome.case.case.id, "expected": list(unit), "rank": rank})
    miss_ranks = [m["rank"] for m in misses if m["rank"] is not None]
    return {
        "k": k_label(k),
        "cases": len(expecting),
        "requirements": units,
        "recall": hits / units if units else None,
        "recall_macro": _mean([o.recall for o in expecting]),
        "all": (sum(all(o.satisfied) for o in expecting) / len(expecting)) if expecting else None,
        "mrr_at_k": _mean(reciprocal),
        "forwarded_mean": _mean([len(o.forwarded) for o in expecting]),
        "forwarded_max": max((len(o.forwarded) for o in expecting), default=None),
        "none_cases": len(nothing),
        "none_forwarded_mean": _mean([len(o.forwarded) for o in nothing]),
        "none_forwarded_zero": (
            sum(1 for o in nothing if not o.forwarded) / len(nothing) if nothing else None
        ),
        "misses": len(misses),
        "miss_rank_p50": _percentile(miss_ranks, 50),
        "miss_rank_p90": _percentile(miss_ranks, 90),
        "miss_unranked": sum(1 for m in misses if m["rank"] is None),
        "miss_list": misses,
    }


SCORE_PERCENTILES = (5, 10, 25, 50, 75, 90)


def score_distribution(run: ScoredRun) -> dict[str, Any]:
    """Percentiles of the scores ``select`` saw (pruned cases with a query): each
    requirement's best member (``expected``), the best tool that is not expected
    (``best_other``), and the best tool of ``expected: []`` cases (``none_best``) — what
    a threshold τ has to separate. Plus the share of ``expected`` below common τ values."""
    expected: list[float] = []
    best_other: list[float] = []
    none_best: list[float] = []
    for scored in run.cases:
        if scored.mode != "select" or scored.scores is None or scored.catalog is None:
            continue
        scores, catalog = scored.scores, scored.catalog
        if scored.case.expects_none:
            none_best.append(float(scores.max()))
            continue
        mask = np.ones(len(scores), dtype=bool)
        for unit in scored.case.requirements:
            positions = [p for p in map(catalog.index_of, unit) if p is not None]
            if positions:
                expected.append(float(scores[positions].max()))
                mask[positions] = False
        if mask.any():
            best_other.append(float(scores[mask].max()))

    def pcts(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {f"p{q}": float(np.percentile(values, q)) for q in SCORE_PERCENTILES}

    below = {
        f"{tau:g}": float(np.mean(np.asarray(expected) < tau)) if expected else None
        for tau in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
    }
    return {
        "expected": pcts(expected),
        "best_other": pcts(best_other),
        "none_best": pcts(none_best),
        "expected_below": below,
        "n_expected": len(expected),
        "n_none": len(none_best),
    }


def summarise_method(
    run: ScoredRun, policy: Policy, ks: Sequence[int | None]
) -> dict[str, Any]:
    """Replay ``run`` for every k; plus MRR, latency (at ``policy.top_k``), embedding time."""
    rows = []
    latency_outcomes: list[CaseOutcome] | None = None
    for k in ks:
        outcomes = replay(run, policy, k)
        rows.append(summarise_k(outcomes, k))
        if k == policy.top_k:
            latency_outcomes = outcomes
    if latency_outcomes is None:
        latency_outcomes = replay(run, policy, policy.top_k)
    timed = [
        (o.case.score_s + o.select_s) * 1000.0 for o in latency_outcomes if o.case.mode == "select"
    ]
    expecting = [c for c in run.cases if not c.case.expects_none]
    best = [min((r for r in c.ranks if r is not None), default=None) for c in expecting]
    modes: dict[str, int] = defaultdict(int)
    for scored in run.cases:
        modes[scored.mode] += 1
    return {
        "method": run.scorer,
        "threshold": policy.threshold if run.uses_threshold else None,
        "mrr": _mean([1.0 / b if b else 0.0 for b in best]),
        "latency_ms_p50": _percentile(timed, 50),
        "latency_ms_p99": _percentile(timed, 99),
        "latency_cases": len(timed),
        "latency_top_k": policy.top_k,
        "index_embedding_s": run.index_s,
        "query_embedding_s": run.query_embedding_s,
        "modes": dict(modes),
        "scorer_errors": run.errors,
        "scores": score_distribution(run),
        "ks": rows,
    }


def describe_set(case_set: CaseSet) -> dict[str, Any]:
    sizes = [len(c.tool_names) for c in case_set.cases]
    catalogs = {c.catalog.fingerprint if c.catalog else c.tool_names for c in case_set.cases}
    return {
        "set": case_set.name,
        "path": str(case_set.path),
        "cases": len(case_set.cases),
        "cases_total": case_set.total,
        "conversations": case_set.conversations,
        "catalogs": len(catalogs),
        "tools_min": min(sizes, default=0),
        "tools_median": statistics.median(sizes) if sizes else 0,
        "tools_max": max(sizes, default=0),
        "expect_none": sum(1 for c in case_set.cases if c.expects_none),
    }


async def evaluate(
    case_set: CaseSet,
    scorers: Sequence[Scorer],
    policy: Policy,
    *,
    ks: Sequence[int | None] = DEFAULT_KS,
    query_user_messages: int = 2,
    query_chars: int = 4000,
    query_parts_max: int = 6,
    progress: Callable[[Iterable[Case], str], Iterable[Case]] | None = None,
) -> dict[str, Any]:
    """Evaluate each scorer on ``case_set``; a JSON-ready report."""
    report = describe_set(case_set)
    report["methods"] = []
    for scorer in scorers:
        wrap = (lambda items, name=scorer.name: progress(items, name)) if progress else None
        run = await score_cases(
            case_set.cases, scorer,
            min_catalog_tools=policy.min_catalog_tools,
            query_user_messages=query_user_messages,
            query_chars=query_chars,
            query_parts_max=query_parts_max,
            progress=wrap,
        )
        report["methods"].append(summarise_method(run, policy, ks))
    return report


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _fmt_rank(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def format_report(report: Mapping[str, Any]) -> str:
    """The terminal table of one set's report."""
    sampled = (
        f"{report['cases']} of {report['cases_total']} (sampled)"
        if report["cases"] < report["cases_total"]
        else str(report["cases"])
    )
    lines = [
        (
            f"{report['set']}: {sampled} cases, {report['conversations']} conversations, "
            f"{report['catalogs']} catalogues, tools/case {report['tools_min']}–"
            f"{report['tools_max']} (median {report['tools_median']:g}), "
            f"expected:[] {report['expect_none']}"
        ),
        (
            f"{'method':<8} {'k':>4} {'recall':>7} {'all@k':>7} {'MRR@k':>7} {'fwd':>6} "
            f"{'fwd(∅)':>7} {'misses':>7} {'miss rank p50/p90':>18}"
        ),
    ]
    for method in report["methods"]:
        for row in method["ks"]:
            ranks = f"{_fmt_rank(row['miss_rank_p50'])}/{_fmt_rank(row['miss_rank_p90'])}"
            if row["miss_unranked"]:
                ranks += f" (+{row['miss_unranked']} n/a)"
            lines.append(
                f"{method['method']:<8} {row['k']:>4} {_fmt(row['recall']):>7} "
                f"{_fmt(row['all']):>7} {_fmt(row['mrr_at_k']):>7} "
                f"{_fmt(row['forwarded_mean'], 1):>6} {_fmt(row['none_forwarded_mean'], 1):>7} "
                f"{row['misses']:>7} {ranks:>18}"
            )
    for method in report["methods"]:
        tau = "" if method["threshold"] is None else f" τ={method['threshold']:g}"
        modes = ", ".join(f"{m} {n}" for m, n in sorted(method["modes"].items()))
        lines.append(
            f"{method['method']}{tau}: MRR {_fmt(method['mrr'])}; latency (score+select, k="
            f"{method['latency_top_k']}) p50 {_fmt(method['latency_ms_p50'], 2)} ms, p99 "
            f"{_fmt(method['latency_ms_p99'], 2)} ms over {method['latency_cases']} cases; "
            f"embedding: queries {method['query_embedding_s']:.1f} s, tool texts "
            f"{method['index_embedding_s']:.1f} s; cases: {modes}"
            + (f"; scorer errors {method['scorer_errors']}" if method["scorer_errors"] else "")
        )
        dist = method["scores"]
        if method["threshold"] is not None and dist["expected"]:
            parts = [
                f"{label} p10/p50/p90 "
                + "/".join(f"{dist[key][q]:.2f}" for q in ("p10", "p50", "p90"))
                for label, key in (("expected", "expected"), ("best other", "best_other"),
                                   ("no-tool best", "none_best"))
                if dist[key]
            ]
            below = ", ".join(
                f"τ={tau}: {share:.1%}" for tau, share in dist["expected_below"].items()
                if share is not None and float(tau) in (0.1, 0.2, 0.3)
            )
            lines.append(f"  {method['method']} scores: " + "; ".join(parts) + f"; expected below {below}")
    return "\n".join(lines)


def strip_miss_lists(report: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``report`` without the per-miss lists (for compact output)."""
    copy = json.loads(json.dumps(report))
    for method in copy["methods"]:
        for row in method["ks"]:
            row.pop("miss_list", None)
    return copy


__all__ = [
    "ALL",
    "DEFAULT_KS",
    "Case",
    "CaseSet",
    "EngineScorer",
    "ScoredRun",
    "conversation_key",
    "evaluate",
    "format_report",
    "load_cases",
    "parse_ks",
    "replay",
    "score_cases",
    "summarise_method",
]
