"""Selection latency on a warm catalogue, query embedding included.

What one acting request costs the proxy before it forwards: ``query_parts`` →
``SelectionEngine.score`` (embed the query and its parts in one call, score the
catalogue's index vectors) → ``select``. The catalogue index is built first (its cold
cost is printed apart), so this is the steady state of a catalogue seen before.

Catalogues: the GitHub MCP server's tools (first 100 of 117, real schemas) and the
Seal-Tools catalogue (first 4,000 of 4,076 tools): the first from tests/data, the second
from the optional evaluation data (``--data PATH`` or ``$TOOLPRUNE_SHARED_DATA``; format in
docs/eval-format.md), which also gives the queries.
Queries: "short" = single user messages (MetaTool and Seal-Tools cases, median ~25
tokens); "long" = real queries joined up to ``query_chars`` characters, which the
embedder truncates to 256 tokens: the most a query can cost (a long tool result does that),
sent as one user message, so that it is also split into ``query_parts`` parts.

Columns: ``p50``/``p99`` = score (query embedding + index search) + ``select``, the
figure the targets are about; ``parse p50`` = ``parse_tools`` of the request's tools
array (canonical-JSON fingerprint of every tool), which the proxy also does per request,
reported apart; ``index cold`` = first-time embedding of the catalogue's texts.

    PYTHONPATH=. python benchmarks/selection_latency.py [--data DIR]
        [--queries 200] [--threads 1] [--json]

Targets (issue 14, with BM25 fusion, name-word coverage, named tools, token budget and
dependency expansion at their defaults): p50 ≤ 20 ms at 100 tools, ≤ 40 ms at 4,000 tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import EVALUATION_DATA_VARIABLE, REAL_CATALOGS
from config.policy import load_policy
from config.settings import Settings
from selection.catalog.catalog import parse_tools
from selection.catalog.policy import Policy
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from selection.conversation.query import build_query, query_parts
from selection.embedders.onnx import OnnxEmbedder
from selection.ranking.engine import SelectionEngine
from selection.ranking.signals.registry import Signals

TARGETS_MS = {100: 20.0, 4000: 40.0}


def _read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    return rows


def load_queries(
    data: Path, count: int, seed: int, settings: Settings
) -> dict[str, list[list[str]]]:
    """Per kind, each query as :func:`query_parts` gives it to ``SelectionEngine.score``."""
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
    pool = queries(long_rows) + short
    long = []
    for _ in range(count):
        parts: list[str] = []
        while sum(len(part) + 1 for part in parts) < settings.query_chars:
            parts.append(rng.choice(pool))
        long.append("\n".join(parts)[-settings.query_chars :])
    def parted(text: str) -> list[str]:
        message = {"role": "user", "content": text}
        return query_parts([message], 1, settings.query_chars, settings.query_parts)

    short_sample = rng.sample(short, min(count, len(short)))
    return {"short": [parted(q) for q in short_sample], "long": [parted(q) for q in long]}


def load_catalogs(data: Path) -> dict[int, list[Any]]:
    """Raw ``tools`` arrays, as a request carries them."""
    github = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
    seal = json.loads((data / "sealtools" / "catalog.json").read_text())
    return {100: github[:100], 4000: seal[:4000]}


async def measure(
    engine: SelectionEngine, tools: list[Any], queries: list[list[str]], policy: Policy
) -> dict[str, Any]:
    total, embed_search, selecting, parsing = [], [], [], []
    catalog = parse_tools(tools)
    for query in queries[:5]:  # warm-up: thread pool, allocator, caches
        await engine.score(catalog, {}, query)
    for query in queries:
        started = time.perf_counter()
        catalog = parse_tools(tools)
        parsed_at = time.perf_counter()
        scored = await engine.score(catalog, {}, query)
        scored_at = time.perf_counter()
        select(catalog, scored, policy, ConversationState(), TurnFacts(now=0.0))
        ended = time.perf_counter()
        parsing.append((parsed_at - started) * 1000)
        total.append((ended - parsed_at) * 1000)
        embed_search.append((scored_at - parsed_at) * 1000)
        selecting.append((ended - scored_at) * 1000)

    def pct(values: list[float], q: float) -> float:
        return float(np.percentile(values, q))

    return {
        "queries": len(queries),
        "parts_mean": float(np.mean([len(query) for query in queries])),
        "p50_ms": pct(total, 50),
        "p99_ms": pct(total, 99),
        "score_p50_ms": pct(embed_search, 50),
        "select_p50_ms": pct(selecting, 50),
        "parse_p50_ms": pct(parsing, 50),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    policy = load_policy(settings)
    embedder = OnnxEmbedder(max_tokens=settings.embedder_max_tokens, intra_op_threads=args.threads)
    await embedder.load()
    engine = SelectionEngine(
        embedder, vector_cache_size=settings.vector_cache_size, index_cache_size=8,
        timeout_s=60.0, index_timeout_s=3600.0,
        signals=Signals.from_values(settings.signal_values()),
    )
    queries = load_queries(args.data, args.queries, args.seed, settings)
    rows = []
    for size, tools in load_catalogs(args.data).items():
        catalog = parse_tools(tools)
        started = time.perf_counter()
        index, _ = await engine.index_for(catalog, {})
        await engine.lexical_task(catalog)
        engine.name_index(catalog)
        cold_s = time.perf_counter() - started
        for kind, texts in queries.items():
            result = await measure(engine, tools, texts, policy)
            rows.append({
                "tools": len(catalog), "texts": index.index.ntotal, "queries_kind": kind,
                "index_cold_s": cold_s, "target_p50_ms": TARGETS_MS[size], **result,
            })
    await engine.aclose()
    return {"threads": args.threads, "embedder": embedder.id, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=os.environ.get(EVALUATION_DATA_VARIABLE),
        help=f"folder of the evaluation data holding metatool/ and sealtools/ (${EVALUATION_DATA_VARIABLE})",
    )
    parser.add_argument("--queries", type=int, default=200, help="queries per kind")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.data is None:
        parser.error(f"needs the evaluation data (MetaTool and Seal-Tools sets): --data PATH "
                     f"or {EVALUATION_DATA_VARIABLE}=PATH")
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"selection latency, warm index, query embedding included ({report['embedder']}, "
          f"{report['threads']} thread(s))")
    print(f"{'tools':>6} {'texts':>6} {'query':>6} {'n':>4} {'parts':>5} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'score p50':>9} {'select p50':>10} {'target p50':>10} {'parse p50':>9} {'index cold s':>12}")
    for row in report["rows"]:
        print(f"{row['tools']:>6} {row['texts']:>6} {row['queries_kind']:>6} {row['queries']:>4} "
              f"{row['parts_mean']:>5.1f} {row['p50_ms']:>7.2f} {row['p99_ms']:>7.2f} {row['score_p50_ms']:>9.2f} "
              f"{row['select_p50_ms']:>10.2f} {row['target_p50_ms']:>10.0f} {row['parse_p50_ms']:>9.2f} "
              f"{row['index_cold_s']:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
