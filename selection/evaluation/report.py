"""Metrics and reports of ``toolprune eval``.

Metrics, per method and k (nothing is ever dropped from a denominator):

* ``recall``: satisfied requirements / all requirements over cases that expect a tool
  (a requirement is an ``expected`` name, or one ``expected_any_of`` group);
  ``recall_macro``: the mean of per-case recall.
* ``all``: share of those cases whose requirements were all satisfied.
* ``reachable`` / ``reachable_all``: the same for "reachable in one meta round"
  (forwarded, listed by name in the meta-tool, or found by ``search_tools`` for the
  task's own words; :mod:`selection.evaluation.replay`).
* ``schema_tokens_mean``: estimated prompt tokens of the forwarded tool schemas per case
  (:func:`selection.catalog.tokens.tool_tokens`); ``meta_tokens_mean``: of the meta-tool.
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
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from selection.catalog.policy import Policy
from selection.evaluation.cases import DEFAULT_KS, Case, CaseSet, k_label
from selection.evaluation.methods import METHODS, TOOLPRUNE, Method
from selection.evaluation.replay import CaseOutcome, replay
from selection.evaluation.scoring import ScoredRun, Scorer, score_cases


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
        ranks = [r for r in outcome.requirement_ranks if r is not None]
        best = min(ranks) if ranks else None
        reciprocal.append(1.0 / best if best is not None and (k is None or best <= k) else 0.0)
        for unit, ok, rank in zip(outcome.case.case.requirements, outcome.satisfied,
                                  outcome.requirement_ranks, strict=True):
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
        "reachable": (
            sum(sum(o.reachable) for o in expecting) / units if units else None
        ),
        "reachable_all": (
            sum(all(o.reachable) for o in expecting) / len(expecting) if expecting else None
        ),
        "schema_tokens_mean": _mean([o.schema_tokens for o in expecting]),
        "meta_tokens_mean": _mean([o.meta_tokens for o in expecting]),
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


def score_distribution(run: ScoredRun, ranked_by: str = "values") -> dict[str, Any]:
    """Percentiles of the scores ``select`` saw (pruned cases with a query) — the fused
    scores, or the dense cosines with ``ranked_by`` ``dense`` (a method's ``scores``):
    each requirement's best member (``expected``), the best tool that is not expected
    (``best_other``), and the best tool of ``expected: []`` cases (``none_best``) — what
    a threshold τ has to separate. Plus the share of ``expected`` below common τ values."""
    expected: list[float] = []
    best_other: list[float] = []
    none_best: list[float] = []
    for scored in run.cases:
        if scored.mode != "select" or scored.scores is None or scored.catalog is None:
            continue
        scores, catalog = scored.scores, scored.catalog
        if ranked_by == "dense" and scored.ranking is not None and scored.ranking.dense is not None:
            scores = scored.ranking.dense
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
    run: ScoredRun, policy: Policy, ks: Sequence[int | None], method: Method | None = None
) -> dict[str, Any]:
    """Replay ``run`` with ``method`` (default: the product's pipeline) for every k; plus
    MRR, latency (at ``policy.top_k``), embedding time."""
    method = method or METHODS[TOOLPRUNE]
    rows = []
    latency_outcomes: list[CaseOutcome] | None = None
    for k in ks:
        outcomes = replay(run, policy, k, method)
        rows.append(summarise_k(outcomes, k))
        if method.oracle:  # it forwards the expected tools without ranking anything
            rows[-1]["mrr_at_k"] = None
        if k == policy.top_k:
            latency_outcomes = outcomes
    if latency_outcomes is None:
        latency_outcomes = replay(run, policy, policy.top_k, method)
    timed = [
        (o.case.score_s + o.select_s) * 1000.0 for o in latency_outcomes if o.case.mode == "select"
    ]
    expecting = [o for o in latency_outcomes if not o.case.case.expects_none]
    best = [min((r for r in o.requirement_ranks if r is not None), default=None) for o in expecting]
    modes: dict[str, int] = defaultdict(int)
    for scored in run.cases:
        modes[scored.mode] += 1
    return {
        "method": method.name,
        "scorer": run.scorer,
        "threshold": policy.threshold if run.uses_threshold else None,
        "mrr": None if method.oracle else _mean([1.0 / b if b else 0.0 for b in best]),
        "latency_ms_p50": _percentile(timed, 50),
        "latency_ms_p99": _percentile(timed, 99),
        "latency_cases": len(timed),
        "latency_top_k": policy.top_k,
        "index_embedding_s": run.index_s,
        "query_embedding_s": run.query_embedding_s,
        "modes": dict(modes),
        "scorer_errors": run.errors,
        "scores": None if method.oracle else score_distribution(run, method.scores),
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
    """Evaluate each scorer on ``case_set``, replayed as each of its methods; a JSON-ready
    report."""
    report = describe_set(case_set)
    report["methods"] = []
    for scorer in scorers:
        wrap = (lambda items, name=scorer.name: progress(items, name)) if progress else None
        run = await score_cases(
            case_set.cases, scorer,
            forwards_whole=policy.forwards_whole,
            query_user_messages=query_user_messages,
            query_chars=query_chars,
            query_parts_max=query_parts_max,
            progress=wrap,
        )
        for method in scorer.methods:
            report["methods"].append(summarise_method(run, policy, ks, method))
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
            f"{'method':<13} {'k':>4} {'recall':>7} {'all@k':>7} {'reach':>7} {'MRR@k':>7} "
            f"{'fwd':>6} {'tokens':>7} {'meta':>6} {'fwd(∅)':>7} {'misses':>7} "
            f"{'miss rank p50/p90':>18}"
        ),
    ]
    for method in report["methods"]:
        for row in method["ks"]:
            ranks = f"{_fmt_rank(row['miss_rank_p50'])}/{_fmt_rank(row['miss_rank_p90'])}"
            if row["miss_unranked"]:
                ranks += f" (+{row['miss_unranked']} n/a)"
            lines.append(
                f"{method['method']:<13} {row['k']:>4} {_fmt(row['recall']):>7} "
                f"{_fmt(row['all']):>7} {_fmt(row['reachable']):>7} {_fmt(row['mrr_at_k']):>7} "
                f"{_fmt(row['forwarded_mean'], 1):>6} {_fmt(row['schema_tokens_mean'], 0):>7} "
                f"{_fmt(row['meta_tokens_mean'], 0):>6} {_fmt(row['none_forwarded_mean'], 1):>7} "
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
        if method["threshold"] is not None and dist and dist["expected"]:
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

