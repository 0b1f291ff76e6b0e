"""Selection latency on a warm catalogue, query embedding included.

What one acting request costs the proxy before it forwards: ``build_query`` →
``SelectionEngine.score`` (embed the query, search the catalogue's faiss index) →
``select``. The catalogue index is built first (its cold cost is printed apart), so
this is the steady state of a catalogue seen before.

Catalogues: the GitHub MCP server's tools (first 100 of 117, real schemas) and the
Seal-Tools catalogue (first 4,000 of 4,076 tools), both from ../shared/data.
Queries: "short" = single user messages (MetaTool and Seal-Tools cases); "long" = the
proxy's query of BFCL multi-turn steps (two user messages plus trailing tool results,
up to ``query_chars``), most of which fill the 256-token truncation.

    PYTHONPATH=. python benchmarks/selection_latency.py [--data ../shared/data]
        [--queries 200] [--threads 1] [--json]

Targets (issue 3): p50 ≤ 15 ms at 100 tools, ≤ 30 ms at 4,000 tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config.settings import Settings  # noqa: E402
from selection.catalog import Catalog, parse_tools  # noqa: E402
from selection.embedders import OnnxEmbedder  # noqa: E402
from selection.engine import SelectionEngine  # noqa: E402
from selection.policy import Policy  # noqa: E402
from selection.query import build_query  # noqa: E402
from selection.selector import select  # noqa: E402
from selection.state import ConversationState  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TARGETS_MS = {100: 15.0, 4000: 30.0}


def _read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    return rows


def load_queries(data: Path, count: int, seed: int, settings: Settings) -> dict[str, list[str]]:
    rng = random.Random(seed)
    short_rows = _read_jsonl(data / "metatool" / "cases.jsonl", 5000)
    short_rows += _read_jsonl(data / "sealtools" / "cases.jsonl", 2100)
    long_rows = _read_jsonl(data / "bfcl_multi_turn" / "cases.jsonl", 4000)

    def queries(rows: list[dict[str, Any]]) -> list[str]:
        texts = [
            build_query(row["messages"], settings.query_user_messages, settings.query_chars)
            for row in rows
        ]
        return [text for text in texts if text]

    short = queries(short_rows)
    long = [text for text in queries(long_rows) if len(text) >= 1000]
    return {"short": rng.sample(short, min(count, len(short))), "long": rng.sample(long, min(count, len(long)))}


def load_catalogs(data: Path) -> dict[int, Catalog]:
    github = json.loads((data / "real_catalogs" / "github_mcp_server.json").read_text())
    seal = json.loads((data / "sealtools" / "catalog.json").read_text())
    return {100: parse_tools(github[:100]), 4000: parse_tools(seal[:4000])}


async def measure(
    engine: SelectionEngine, catalog: Catalog, queries: list[str], policy: Policy
) -> dict[str, Any]:
    total, embed_search, selecting = [], [], []
    for query in queries[:5]:  # warm-up: thread pool, allocator, caches
        await engine.score(catalog, {}, query)
    for query in queries:
        started = time.perf_counter()
        scored = await engine.score(catalog, {}, query)
        scored_at = time.perf_counter()
        select(catalog, scored.values, policy, ConversationState(), now=0.0)
        ended = time.perf_counter()
        total.append((ended - started) * 1000)
        embed_search.append((scored_at - started) * 1000)
        selecting.append((ended - scored_at) * 1000)

    def pct(values: list[float], q: float) -> float:
        return float(np.percentile(values, q))

    return {
        "queries": len(queries),
        "p50_ms": pct(total, 50),
        "p99_ms": pct(total, 99),
        "score_p50_ms": pct(embed_search, 50),
        "select_p50_ms": pct(selecting, 50),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    policy = Policy(top_k=settings.top_k, threshold=settings.threshold, max_tools=settings.max_tools)
    embedder = OnnxEmbedder(max_tokens=settings.embedder_max_tokens, intra_op_threads=args.threads)
    await embedder.load()
    engine = SelectionEngine(
        embedder, vector_cache_size=settings.vector_cache_size, index_cache_size=8,
        timeout_s=60.0, index_timeout_s=3600.0,
    )
    queries = load_queries(args.data, args.queries, args.seed, settings)
    rows = []
    for size, catalog in load_catalogs(args.data).items():
        started = time.perf_counter()
        index, _ = await engine.index_for(catalog, {})
        cold_s = time.perf_counter() - started
        for kind, texts in queries.items():
            result = await measure(engine, catalog, texts, policy)
            rows.append({
                "tools": len(catalog), "texts": index.index.ntotal, "queries_kind": kind,
                "index_cold_s": cold_s, "target_p50_ms": TARGETS_MS[size], **result,
            })
    await engine.aclose()
    return {"threads": args.threads, "embedder": embedder.id, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument("--queries", type=int, default=200, help="queries per kind")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"selection latency, warm index, query embedding included ({report['embedder']}, "
          f"{report['threads']} thread(s))")
    print(f"{'tools':>6} {'texts':>6} {'query':>6} {'n':>4} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'score p50':>9} {'select p50':>10} {'target p50':>10} {'index cold s':>12}")
    for row in report["rows"]:
        print(f"{row['tools']:>6} {row['texts']:>6} {row['queries_kind']:>6} {row['queries']:>4} "
              f"{row['p50_ms']:>7.2f} {row['p99_ms']:>7.2f} {row['score_p50_ms']:>9.2f} "
              f"{row['select_p50_ms']:>10.2f} {row['target_p50_ms']:>10.0f} {row['index_cold_s']:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
