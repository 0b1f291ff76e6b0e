"""Learning from traffic, measured on cases never replayed (docs/learning.md).

Run from the repository root::

    nice env PYTHONPATH=. python benchmarks/learning.py --data $TOOLPRUNE_SHARED_DATA \\
        --sets livemcpbench_dev,restbench_spotify:4 --plot docs/learning.png
    nice env PYTHONPATH=. python benchmarks/learning.py --data $TOOLPRUNE_SHARED_DATA \\
        --sets toolbench_dev --one-fold --shares 0.1,1.0

Per set, the cases are split by conversation with a fixed seed (``--seed``): into two
halves, or ``--folds`` folds for the sets given with ``name:folds`` (RestBench: 4). For
each fold, ``toolprune eval HELD --learn-from TEACH`` runs as the command would
(:func:`proxy.cli.eval.run_eval`) with the teaching part replayed as traffic at each
share of ``--shares``, next to the plain eval of the same held part (no traffic) and a
control that learns from another set's cases (another catalogue: must change nothing).
Columns: recall@8 and mean forwarded schema tokens at k = 8 of the ``toolprune`` method,
pooled over folds (requirements summed), and recall@8 of the held cases whose expected
tools the traffic never called (``untouched``). ``--plot`` draws recall@8 against the
share of traffic. Splits are written to a temporary folder beside a copy of the set's
catalogue files. One embedder serves every run, its vectors kept by text in a pickle file
in the temporary folder (``benchmarks.support.embedder_cache.DiskCachedEmbedder``: the
product's caches live per engine, and each run builds its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.support.embedder_cache import DiskCachedEmbedder
from benchmarks.support.packages import require
from proxy.cli.eval import add_arguments, default_embedder_factory, run_eval
from proxy.cli.traffic import traffic_share
from selection.evaluation.cases import load_cases
from selection.learning import guard as learned_guard
from selection.learning import learned


def _split(path: Path, folds: int, seed: int, folder: Path) -> list[tuple[Path, Path]]:
    """Write ``folds`` (teach, held) file pairs of ``path``'s cases into ``folder``."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    cases = load_cases(path).cases
    conversations = sorted({case.conversation for case in cases})
    random.Random(seed).shuffle(conversations)
    fold_of = {conversation: i % folds for i, conversation in enumerate(conversations)}
    for extra in path.parent.iterdir():
        if extra.suffix == ".json":
            shutil.copy(extra, folder / extra.name)
    pairs = []
    for fold in range(folds):
        teach = folder / f"{path.parent.name}_teach{fold}.jsonl"
        held = folder / f"{path.parent.name}_held{fold}.jsonl"
        teach.write_text("\n".join(
            line for line, case in zip(lines, cases, strict=True) if fold_of[case.conversation] != fold
        ) + "\n")
        held.write_text("\n".join(
            line for line, case in zip(lines, cases, strict=True) if fold_of[case.conversation] == fold
        ) + "\n")
        pairs.append((teach, held))
    return pairs


class SharedEmbedder(DiskCachedEmbedder):
    """The configured embedder, loaded once for every run, its vectors kept in a pickle
    file (each run's engine closes its embedder at the end: here that only saves)."""

    async def aclose(self) -> None:
        self.save()


class Embedders:
    """The factory :func:`run_eval` calls: one :class:`SharedEmbedder` for every run."""

    def __init__(self) -> None:
        self.cache = Path(tempfile.gettempdir()) / "toolprune-learning-vectors.pickle"
        self.shared: SharedEmbedder | None = None

    def factory(self, settings: Any, client: Any) -> SharedEmbedder:
        if self.shared is None:
            self.shared = SharedEmbedder(default_embedder_factory(settings, client), self.cache)
        return self.shared


EMBEDDER = Embedders()


async def _eval(held: Path, learn_from: Path | None, share: float, seed: int) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = [str(held), "--k", "8", "--json", "--misses", "--no-bm25", "--no-progress"]
    if learn_from is not None:
        argv += ["--learn-from", str(learn_from), "--learn-share", str(share),
                 "--learn-seed", str(seed)]
    return await run_eval(parser.parse_args(argv), EMBEDDER.factory)


def _row(report: dict[str, Any], held: Path, untouched: set[str]) -> dict[str, float]:
    method = next(m for m in report["sets"][0]["methods"] if m["method"] == "toolprune")
    row = method["ks"][0]
    requirements = {c.id: len(c.requirements) for c in load_cases(held).cases}
    missed: dict[str, int] = {}
    for miss in row["miss_list"]:
        missed[miss["id"]] = missed.get(miss["id"], 0) + 1
    untouched_units = sum(requirements[i] for i in untouched)
    untouched_hits = untouched_units - sum(missed.get(i, 0) for i in untouched)
    return {
        "units": row["requirements"],
        "hits": row["recall"] * row["requirements"],
        "tokens": row["schema_tokens_mean"] * row["cases"],
        "cases": row["cases"],
        "untouched_units": untouched_units,
        "untouched_hits": untouched_hits,
    }


def _untouched(teach: Path, held: Path, share: float, seed: int) -> set[str]:
    taught = traffic_share(load_cases(teach).cases, share, seed)
    called = {name for case in taught for unit in case.requirements for name in unit[:1]}
    return {
        case.id for case in load_cases(held).cases
        if case.requirements and not any(unit[0] in called for unit in case.requirements)
    }


def _pool(rows: list[dict[str, float]]) -> dict[str, float | None]:
    units = sum(r["units"] for r in rows)
    untouched = sum(r["untouched_units"] for r in rows)
    return {
        "recall@8": sum(r["hits"] for r in rows) / units if units else None,
        "schema_tokens": sum(r["tokens"] for r in rows) / sum(r["cases"] for r in rows),
        "untouched_recall@8": sum(r["untouched_hits"] for r in rows) / untouched if untouched else None,
        "untouched_requirements": untouched,
    }


async def measure(data: Path, spec: str, shares: list[float], seed: int, control: Path,
                  folder: Path, baseline: bool = True, one_fold: bool = False) -> dict[str, Any]:
    name, _, folds = spec.partition(":")
    pairs = _split(data / name / "cases.jsonl", int(folds or 2), seed, folder)
    pairs = pairs[:1] if one_fold and not folds else pairs
    runs: dict[str, list[dict[str, float]]] = {}
    promotions: dict[str, list[Any]] = {}
    for teach, held in pairs:
        plain_untouched = _untouched(teach, held, 1.0, seed)
        if baseline:
            report = await _eval(held, None, 1.0, seed)
            runs.setdefault("plain", []).append(_row(report, held, plain_untouched))
            report = await _eval(held, control, 1.0, seed)
            runs.setdefault("control", []).append(_row(report, held, plain_untouched))
        for share in shares:
            report = await _eval(held, teach, share, seed)
            label = f"learned {share:.0%}"
            runs.setdefault(label, []).append(_row(report, held, _untouched(teach, held, share, seed)))
            promotions.setdefault(label, []).append(report["config"]["learning"]["outcomes"])
            print(f"{name} {held.name} {label}: {report['config']['learning']['outcomes']}",
                  file=sys.stderr, flush=True)
    return {
        "set": name,
        "folds": len(pairs),
        "seed": seed,
        "results": {label: _pool(rows) for label, rows in runs.items()},
        "promotions": promotions,
    }


def plot(results: list[dict[str, Any]], shares: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.2, 3.6))
    for result in results:
        pooled = result["results"]
        points = [(0.0, pooled["plain"]["recall@8"])] + [
            (share, pooled[f"learned {share:.0%}"]["recall@8"])
            for share in shares if f"learned {share:.0%}" in pooled
        ]
        axis.plot([x * 100 for x, _ in points], [y for _, y in points], marker="o",
                  markersize=3, label=result["set"])
    axis.set_xlabel("traffic replayed (% of the teaching part)")
    axis.set_ylabel("recall@8 on never-replayed cases")
    axis.set_ylim(0, 1.02)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="the shared data folder")
    parser.add_argument("--sets", default="livemcpbench_dev,toolbench_dev,restbench_spotify:4")
    parser.add_argument("--shares", default="0.1,0.5,1.0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--control", default="metatool",
                        help="set whose cases are the control's traffic (another catalogue)")
    parser.add_argument("--gains", default=",".join(f"{g:g}" for g in learned_guard.GAINS),
                        help="selection.learning.guard.GAINS for this run (a variant)")
    parser.add_argument("--centerings",
                        default=",".join(f"{c:g}" for c in learned_guard.CENTERINGS),
                        help="selection.learning.guard.CENTERINGS for this run (a variant)")
    parser.add_argument("--forwarded-weight", type=float,
                        default=learned.STATUS_WEIGHTS["forwarded"],
                        help="weight of a forwarded call's evidence for this run (a variant)")
    parser.add_argument("--one-fold", action="store_true",
                        help="sets split in two: learn from one half and score the other only")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the plain and control runs (variants of the learned runs)")
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--cache", type=Path, default=EMBEDDER.cache,
                        help="pickle file of the embedder's vectors, kept between runs")
    parser.add_argument("--replot", type=Path, nargs="+", metavar="RESULTS.json",
                        help="only draw --plot from the --json results of earlier runs")
    args = parser.parse_args()
    if args.plot is not None:
        require("python -m benchmarks.learning", "matplotlib")
    shares = [float(s) for s in args.shares.split(",")]
    if args.replot:
        if args.plot is None:
            parser.error("--replot needs --plot")
        plot([r for path in args.replot for r in json.loads(path.read_text())], shares, args.plot)
        return 0
    learned_guard.GAINS = tuple(float(g) for g in args.gains.split(","))
    learned_guard.CENTERINGS = tuple(float(c) for c in args.centerings.split(","))
    EMBEDDER.cache = args.cache
    learned.STATUS_WEIGHTS = {**learned.STATUS_WEIGHTS, "forwarded": args.forwarded_weight}
    if args.data is None:
        parser.error("--data is required")
    results = []
    with tempfile.TemporaryDirectory(prefix="toolprune-learning-") as folder:
        (Path(folder) / "control").mkdir()
        control = Path(folder) / "control" / "cases.jsonl"
        source = args.data / args.control
        control.write_text("\n".join((source / "cases.jsonl").read_text().splitlines()[:100]) + "\n")
        for extra in source.glob("*.json"):
            shutil.copy(extra, control.parent / extra.name)

        async def run_all() -> None:
            for spec in args.sets.split(","):
                results.append(
                    await measure(args.data, spec, shares, args.seed, control, Path(folder),
                                  baseline=not args.no_baseline, one_fold=args.one_fold)
                )

        asyncio.run(run_all())
    print(f"{'set':<20} {'traffic':<14} {'recall@8':>9} {'tokens':>8} {'untouched':>10}")
    for result in results:
        for label, pooled in result["results"].items():
            untouched = pooled["untouched_recall@8"]
            print(f"{result['set']:<20} {label:<14} {pooled['recall@8']:>9.3f} "
                  f"{pooled['schema_tokens']:>8.0f} "
                  f"{'–' if untouched is None else f'{untouched:.3f}':>10}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, shares, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
