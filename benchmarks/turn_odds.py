"""The chance a turn needs a tool, read from where toolprune's ranking puts it: the odds
the plan in seconds weighs deliveries by (:mod:`selection.choosing.seconds`).

Each case of the given sets goes through the proxy's own scoring (``toolprune eval``'s
:class:`~selection.evaluation.scoring.EngineScorer`, default settings); of its ranking's
best ``--top`` tools, each one's rank, score, the score's gap below the best tool's, and
whether the case needs it (it is in one of the case's requirements). Printed: the share
needed per rank (the rank-only odds), per gap and per score bin, and logistic models
fitted by iteratively reweighted least squares (Platt scaling, J. Platt 1999) on ln rank;
on the gap and ln rank; on the gap, ln rank and the score — the plan's:
``p = 1 / (1 + exp(-(a + b·gap + c·ln rank + d·score)))`` — each with its log-loss, so
what the gap and the score add to the rank is measured, not assumed.

The odds are fitted on MetaTool and Seal-Tools only (:data:`FIT_SETS`; one and 2.7 tools
a case) of the optional evaluation data; BFCL, API-Bank, NESTFUL, LiveMCPBench, RestBench
and ToolBench are kept out of fitting.

    .venv/bin/python -m benchmarks.turn_odds --data $TOOLPRUNE_SHARED_DATA --limit 1500
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import httpx
import numpy as np
from tabulate import tabulate

from benchmarks.support.data import EVALUATION_DATA_VARIABLE
from config.policy import load_policy
from config.selector import build_embedder, build_selector
from config.settings import Settings
from proxy.cli.eval import cases_file
from selection.evaluation.cases import load_cases
from selection.evaluation.scoring import EngineScorer, score_cases

#: The sets the odds are fitted on (folders of the evaluation data).
FIT_SETS = ("metatool", "sealtools")
#: Gap bins of the printed table (score units below the best tool's).
GAP_BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, math.inf)
#: Score bins of the printed table.
SCORE_BINS = (-math.inf, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, math.inf)


async def observations(paths: Sequence[Path], limit: int | None, top: int) -> np.ndarray:
    """Per ranked tool of every pruned case: (rank, gap, score, needed), float64 ``(n, 4)``."""
    settings = Settings()
    policy = load_policy(settings)
    rows: list[tuple[float, float, float, float]] = []
    async with httpx.AsyncClient() as client:
        embedder = build_embedder(settings, client)
        await embedder.load()
        selector = build_selector(settings, embedder, policy=policy, offline=True)
        try:
            scorer = EngineScorer(selector.engine, policy)
            for path in paths:
                cases = load_cases(cases_file(path), limit=limit, seed=0)
                run = await score_cases(
                    cases.cases, scorer, forwards_whole=lambda catalog: False,
                    query_user_messages=settings.query_user_messages,
                    query_chars=settings.query_chars, query_parts_max=settings.query_parts,
                )
                for scored in run.cases:
                    if scored.scores is None or scored.catalog is None:
                        continue
                    needed = {name for unit in scored.case.requirements for name in unit}
                    order = np.argsort(-scored.scores, kind="stable")[:top]
                    best = float(scored.scores[order[0]])
                    for rank, position in enumerate(order.tolist(), 1):
                        tool = scored.catalog.tools[position]
                        score = float(scored.scores[position])
                        rows.append((rank, best - score, score, float(tool.name in needed)))
        finally:
            await selector.aclose()
    return np.asarray(rows, dtype=np.float64)


def fit_logistic(features: np.ndarray, labels: np.ndarray, steps: int = 50) -> np.ndarray:
    """Logistic regression by iteratively reweighted least squares (Newton's method on the
    log-likelihood); ``features`` ``(n, d)`` with a column of ones for the intercept.
    Returns the weights ``(d,)``."""
    weights = np.zeros(features.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-features @ weights))
        gradient = features.T @ (labels - p)
        hessian = (features * (p * (1 - p))[:, None]).T @ features
        step = np.linalg.solve(hessian + 1e-9 * np.eye(len(weights)), gradient)
        weights += step
        if np.abs(step).max() < 1e-10:
            break
    return weights


def log_loss(p: np.ndarray, labels: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def shares(values: np.ndarray, needed: np.ndarray, bins: Sequence[float],
           title: str) -> str:
    """The share needed per bin of ``values``, as a table."""
    table = []
    for low, high in pairwise(bins):
        inside = (values >= low) & (values < high)
        if inside.any():
            table.append([f"{low:g} to {high:g}", int(inside.sum()), f"{needed[inside].mean():.3f}"])
    return tabulate(table, headers=[title, "tools", "needed"], tablefmt="github")


def report(rows: np.ndarray) -> str:
    """The tables and the fitted models of ``rows`` (:func:`observations`)."""
    rank, gap, score, needed = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    per_rank = [[int(r), int((rank == r).sum()), f"{needed[rank == r].mean():.3f}"]
                for r in np.unique(rank)]
    share = {r: needed[rank == r].mean() for r in np.unique(rank)}
    lines = [
        tabulate(per_rank, headers=["rank", "tools", "needed"], tablefmt="github"), "",
        shares(gap[rank > 1], needed[rank > 1], GAP_BINS, "gap below the best (rank > 1)"), "",
        shares(score, needed, SCORE_BINS, "score"), "",
        f"observations {len(rows)}, cases {int((rank == 1).sum())}",
        f"log-loss, the share per rank: {log_loss(np.array([share[r] for r in rank]), needed):.4f}",
    ]
    ones, log_rank = np.ones_like(gap), np.log(rank)
    models = (("ln rank", ["a", "c"], [ones, log_rank]),
              ("gap + ln rank", ["a", "b", "c"], [ones, gap, log_rank]),
              ("gap + ln rank + score", ["a", "b", "c", "d"], [ones, gap, log_rank, score]))
    for name, letters, columns in models:
        features = np.column_stack(columns)
        weights = fit_logistic(features, needed)
        p = 1 / (1 + np.exp(-features @ weights))
        fitted = ", ".join(f"{letter} {weight:.3f}" for letter, weight in zip(letters, weights,
                                                                                 strict=True))
        lines.append(f"log-loss, logistic on {name}: {log_loss(p, needed):.4f}  ({fitted})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=os.environ.get(EVALUATION_DATA_VARIABLE),
                        help="the evaluation data folder ($TOOLPRUNE_SHARED_DATA)")
    parser.add_argument("--limit", type=int, default=1500, help="cases sampled per set")
    parser.add_argument("--top", type=int, default=8, help="ranks observed per case")
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("needs the evaluation data: --data PATH or $TOOLPRUNE_SHARED_DATA")
    sets = [args.data / name for name in FIT_SETS]
    print(report(asyncio.run(observations(sets, args.limit, args.top))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
