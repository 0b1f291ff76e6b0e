"""Issue 14's ranking levers, one variant at a time, on halves of the hard sets.

Each case goes through ``toolprune eval``'s own code (``score_cases`` with the proxy's
``SelectionEngine`` scorer, then ``replay`` of ``select``) at the default settings, first
turn, k = 8, once per variant of ``benchmarks/selection_lever_variants.py``. Printed per
set: recall@8 / reachable in one meta round / mean forwarded client-tool schema tokens
(estimated, ``selection.tokens``) of the default pipeline and of dense top-8 with τ on the
same scores, and the share of expected tools the fused scores rank within 16 and 32.

A set may be given as ``NAME:even`` or ``NAME:odd`` (cases at even / odd positions of the
file, sampled first when the set is large): variants were chosen on the even half and
the odd half reported as held out. Vectors (tools and queries) are cached on disk by
sha256 of the text (``--cache``; all-MiniLM-L6-v2 int8 only), so a variant costs only the
texts it adds.

    PYTHONPATH=. python benchmarks/selection_levers.py --variants defaults,locators-name \
        --sets livemcpbench_dev:even,restbench_spotify:even,toolbench_dev:even
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import pickle
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.selection_lever_variants import VARIANTS, variant
from config.policy import load_policy
from config.settings import Settings
from selection.embedders import OnnxEmbedder
from selection.engine import SelectionEngine
from selection.evaluation import METHODS, EngineScorer, load_cases, replay, score_cases
from tests.support.data import EVALUATION_DATA_VARIABLE

#: Sampled as benchmarks/README.md's easy-set tables (whole conversations, seed 0).
LIMITS = {"nestful": 300, "metatool": 600, "bfcl_pooled": 600, "sealtools": 400, "bfcl_multi_turn": 600}


class DiskCachedEmbedder:
    """An :class:`OnnxEmbedder` whose vectors (float32 ``(d,)``) are kept in a pickle file
    keyed by sha256 of the text, loaded at start and written by :meth:`save`."""

    def __init__(self, inner: OnnxEmbedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.store: dict[str, np.ndarray] = pickle.loads(path.read_bytes()) if path.exists() else {}
        self.added = 0

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def ready(self) -> bool:
        return self.inner.ready

    async def load(self) -> None:
        await self.inner.load()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.store]
        if missing:
            fresh = await self.inner.embed([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self.store[keys[i]] = vector
            self.added += len(missing)
        return np.vstack([self.store[key] for key in keys]).astype(np.float32)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def save(self) -> None:
        if self.added:
            temporary = self.path.with_suffix(".tmp")
            temporary.write_bytes(pickle.dumps(self.store))
            temporary.replace(self.path)
            self.added = 0


async def measure(engine: SelectionEngine, data: Path, spec: str) -> dict[str, Any]:
    """The row of one ``NAME[:even|odd]`` set (see the module docstring)."""
    name, _, half = spec.partition(":")
    cases = load_cases(data / name / "cases.jsonl", limit=LIMITS.get(name)).cases
    if half:
        cases = [case for i, case in enumerate(cases) if i % 2 == (half == "odd")]
    settings = Settings()
    policy = load_policy(settings)
    run = await score_cases(
        cases, EngineScorer(engine, policy.examples, "minilm"),
        forwards_whole=policy.forwards_whole,
        query_user_messages=settings.query_user_messages,
        query_chars=settings.query_chars, query_parts_max=settings.query_parts,
    )
    row: dict[str, Any] = {"set": spec}
    for method in ("toolprune", "dense"):
        outcomes = [o for o in replay(run, policy, 8, METHODS[method]) if not o.case.case.expects_none]
        units = sum(len(o.satisfied) for o in outcomes)
        row["cases"] = len(outcomes)
        row[method] = {
            "recall": sum(sum(o.satisfied) for o in outcomes) / units,
            "reachable": sum(sum(o.reachable) for o in outcomes) / units,
            "schema_tokens": statistics.fmean(o.schema_tokens for o in outcomes),
        }
    ranks = [rank for scored in run.cases for rank in scored.ranks if rank is not None]
    row["ranked_16"] = statistics.fmean(rank <= 16 for rank in ranks)
    row["ranked_32"] = statistics.fmean(rank <= 32 for rank in ranks)
    return row


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    embedder = DiskCachedEmbedder(OnnxEmbedder(), args.cache)
    await embedder.load()
    settings = Settings()
    rows = []
    for name in args.variants:
        # A fresh engine per variant: its indexes are built from the variant's texts.
        engine = SelectionEngine(
            embedder, vector_cache_size=1, index_cache_size=8, timeout_s=600.0,
            index_timeout_s=3600.0, lexical_weight=settings.lexical_weight,
            name_weight=settings.name_weight,
        )
        with variant(name):
            for spec in args.sets:
                row = {"variant": name, **await measure(engine, args.data, spec)}
                embedder.save()
                rows.append(row)
                if not args.json:
                    tp, dense = row["toolprune"], row["dense"]
                    print(
                        f"{name:<30} {spec:<24} {row['cases']:>4}  {tp['recall']:.3f} / "
                        f"{tp['reachable']:.3f} / {tp['schema_tokens']:>4.0f}   dense "
                        f"{dense['recall']:.3f} / {dense['schema_tokens']:>4.0f}   ranked ≤16 "
                        f"{row['ranked_16']:.3f} ≤32 {row['ranked_32']:.3f}",
                        flush=True,
                    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=os.environ.get(EVALUATION_DATA_VARIABLE),
                        help="the evaluation data folder ($TOOLPRUNE_SHARED_DATA)")
    parser.add_argument("--sets", type=lambda text: text.split(","),
                        default=["livemcpbench_dev:even", "restbench_spotify:even", "toolbench_dev:even"],
                        help="comma-separated NAME or NAME:even / NAME:odd")
    parser.add_argument("--variants", type=lambda text: text.split(","), default=["defaults"],
                        help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--cache", type=Path, default=Path("selection_levers_vectors.pkl"),
                        help="the vector cache file (default: %(default)s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.data is None:
        parser.error(f"needs the evaluation data: --data PATH or ${EVALUATION_DATA_VARIABLE}")
    if unknown := set(args.variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)}")
    rows = asyncio.run(run(args))
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
