"""The first request of a catalogue the proxy has never seen, against a warm one, and the
time to a full index (issue 32).

Two tables, side by side in one run:

* **Time to a full index** of the 117 GitHub MCP tools, livemcpbench_dev's 527 and
  toolbench_dev's 2,470 (the optional data): the tool texts embedded with main's batching
  (batches of 8 texts sorted by characters, :func:`main_batches`), with this version's
  (:func:`selection.embedders.token_batches.token_batches`) through an empty vector store, and read
  back from that store by a restarted engine; wall and CPU seconds (the process's, every
  thread). And how long a cold engine's first request takes when it waits for its
  shortlist (``cold_start_tools`` descriptions).
* **First-request recall**: recall@k (``toolprune eval``'s pipeline: the proxy's
  selection at top-k) of each set's cases, ranked as a warm proxy ranks them (full
  index), as main ranks a cold catalogue's first request (BM25 alone, the query as the
  client wrote it: blocks such as ``<system-reminder>`` included), and as this version
  ranks a cold engine's first request — a new engine per case, nothing in memory or on
  disk — with the shipped wait (``index_timeout_s`` 1.5 s, so what this machine embeds in
  time) and with a wait long enough for the shortlist (:data:`WAITED_S`). Sets: the GitHub tasks of
  ``benchmarks/support/cold_cases.py`` plain (117 tools) and in Claude Code's shape (141
  tools, a reminder beside the prompt), livemcpbench_dev, toolbench_dev (sampled).

Needs the optional data for the 527- and 2,470-tool rows (``TOOLPRUNE_SHARED_DATA``);
~30–60 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from benchmarks.support.cold_cases import claude_code_cases, github_cases
from benchmarks.support.data import EVALUATION_DATA_VARIABLE
from config.policy import load_policy
from config.settings import Settings
from proxy.components import limit_blas_threads
from selection.catalog.catalog import Catalog
from selection.conversation.query import content_text, query_parts
from selection.embedders.onnx import OnnxEmbedder
from selection.evaluation import evaluate
from selection.evaluation.cases import CaseSet, load_cases
from selection.indexes.build import IndexBuild
from selection.indexes.lexical import LexicalIndex
from selection.indexes.vector_store import SqliteVectorStore
from selection.ranking.engine import SelectionEngine
from selection.ranking.pipeline import Ranking, lexical_ranking
from selection.ranking.signals.registry import Signals

SHARED_SETS = {"livemcpbench_dev": None, "toolbench_dev": 100}  # set → cases sampled (None: all)
#: A wait long enough for a first request's shortlist on a loaded machine, too short for a
#: whole catalogue at the assumed rate (so the request is ranked by its shortlist).
WAITED_S = 10.0


def main_batches(texts: Sequence[str], batch_size: int = 8) -> list[list[int]]:
    """Main's batching (e557da2): sorted by characters, at most ``batch_size`` texts, a
    text over twice its batch's first (+ 32 characters) starting a new batch."""
    batches: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        batch = batches[-1] if batches else None
        if batch is None or len(batch) >= batch_size or len(texts[i]) > 2 * len(texts[batch[0]]) + 32:
            batches.append([i])
        else:
            batch.append(i)
    return batches


class Shared:
    """The benchmark's one loaded embedder, lent to many engines: their ``aclose`` leaves
    it loaded."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner

    id = property(lambda self: self.inner.id)
    ready = property(lambda self: self.inner.ready)

    async def load(self) -> None:
        await self.inner.load()

    async def embed(self, texts: Sequence[str]) -> Any:
        return await self.inner.embed(texts)

    async def aclose(self) -> None:
        return None


def engine(embedder: Shared, settings: Settings, **overrides: Any) -> SelectionEngine:
    options: dict[str, Any] = {
        "vector_cache_size": 1_000_000, "index_cache_size": 8, "timeout_s": 300.0,
        "index_timeout_s": settings.index_timeout_s,
        "signals": Signals.from_values(settings.signal_values()),
        "cold_start_tools": settings.cold_start_tools,
    }
    return SelectionEngine(embedder, **{**options, **overrides})  # type: ignore[arg-type]


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Wall and process CPU seconds of ``work()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    return time.perf_counter() - wall, time.process_time() - cpu


async def index_row(name: str, case_set: CaseSet, embedder: Shared, settings: Settings,
                    store: Path) -> dict[str, Any]:
    catalog = case_set.cases[0].catalog
    assert catalog is not None
    texts = IndexBuild.of(catalog, {}, settings.max_tool_text_chars).texts
    onnx = embedder.inner

    async def main_way() -> None:
        for batch in main_batches(texts):
            await asyncio.to_thread(onnx._run, [texts[i] for i in batch])  # main's embed loop

    main_s = await timed(main_way)
    whole = {"index_timeout_s": 3600.0}  # these wait for the whole index
    cold = engine(embedder, settings, store=SqliteVectorStore(store, 1 << 30), **whole)
    cold_s = await timed(lambda: cold.index_for(catalog, {}))
    await cold.aclose()
    restarted = engine(embedder, settings, store=SqliteVectorStore(store, 1 << 30), **whole)
    restart_s = await timed(lambda: restarted.index_for(catalog, {}))
    await restarted.aclose()
    first = engine(embedder, settings, index_timeout_s=WAITED_S)
    parts = query_parts(case_set.cases[0].messages)
    first_s = await timed(lambda: first.score(catalog, {}, parts))
    await first.aclose()
    return {
        "catalogue": name, "tools": len(catalog), "texts": len(texts),
        "main: wall / CPU s": f"{main_s[0]:.1f} / {main_s[1]:.1f}",
        "cold: wall / CPU s": f"{cold_s[0]:.1f} / {cold_s[1]:.1f}",
        "ms a tool (main → cold, CPU)": f"{1000 * main_s[1] / len(catalog):.0f} → {1000 * cold_s[1] / len(catalog):.0f}",
        "restart, store: s": f"{restart_s[0]:.2f}",
        f"first request, {WAITED_S:g} s wait: s": f"{first_s[0]:.2f}",
    }


class MainColdScorer:
    """Main's first request on a cold catalogue: BM25 alone over the query as the client
    wrote it (main's ``build_query``: the last two user messages, nothing left out)."""

    name, uses_threshold = "main_cold", True

    def __init__(self, case_set: CaseSet) -> None:
        self.raw = {tuple(query_parts(c.messages)): "\n".join(
            content_text(m.get("content")) for m in c.messages if m.get("role") == "user")[-4000:]
            for c in case_set.cases}
        self.indexes: dict[str, LexicalIndex] = {}

    async def prepare(self, catalog: Catalog) -> float:
        return 0.0

    async def score(self, catalog: Catalog, query: Sequence[str]) -> Ranking:
        index = self.indexes.setdefault(catalog.fingerprint, LexicalIndex(catalog))
        return lexical_ranking(index.scores(self.raw[tuple(query)]))


class ColdScorer:
    """This version's first request: a new engine per case (nothing in memory, no store),
    its background build ended with the case. Counts how each case was ranked."""

    uses_threshold = True

    def __init__(self, name: str, embedder: Shared, settings: Settings, **overrides: Any) -> None:
        self.name, self.embedder, self.settings, self.overrides = name, embedder, settings, overrides
        self.ranked: dict[str, int] = {"full": 0, "partial": 0, "bm25": 0}

    async def prepare(self, catalog: Catalog) -> float:
        return 0.0

    async def score(self, catalog: Catalog, query: Sequence[str]) -> Ranking:
        fresh = engine(self.embedder, self.settings, **self.overrides)
        try:
            scored = await fresh.score(catalog, {}, query)
        finally:
            await fresh.aclose()
        kind = "bm25" if scored.lexical_only else "partial" if scored.partial else "full"
        self.ranked[kind] += 1
        return scored


class WarmScorer(ColdScorer):
    """A warm proxy: the catalogue's index built before the first case (from the store)."""

    def __init__(self, embedder: Shared, settings: Settings, store: Path) -> None:
        super().__init__("warm", embedder, settings)
        self.warm = engine(embedder, settings, store=SqliteVectorStore(store, 1 << 30),
                           index_timeout_s=3600.0)

    async def prepare(self, catalog: Catalog) -> float:
        return (await self.warm.index_for(catalog, {}))[1]

    async def score(self, catalog: Catalog, query: Sequence[str]) -> Ranking:
        return await self.warm.score(catalog, {}, query)


async def recall_row(case_set: CaseSet, embedder: Shared, settings: Settings, store: Path,
                     k: int) -> dict[str, Any]:
    policy = load_policy(settings)
    shipped = ColdScorer("cold_shipped", embedder, settings)
    waited = ColdScorer("cold_waited", embedder, settings, index_timeout_s=WAITED_S)
    row: dict[str, Any] = {"set": case_set.name, "cases": len(case_set.cases),
                           "tools": len(case_set.cases[0].tool_names)}
    labels = {"warm": "warm", "main_cold": "main, cold (BM25)",
              "cold_shipped": f"cold, {settings.index_timeout_s:g} s wait",
              "cold_waited": f"cold, {WAITED_S:g} s wait"}
    for scorer in (WarmScorer(embedder, settings, store), MainColdScorer(case_set), shipped, waited):
        report = await evaluate(case_set, [scorer], policy, ks=(k,))
        method = report["methods"][0]
        row[f"{labels[scorer.name]} R@{k}"] = f"{method['ks'][0]['recall']:.3f}"
        if scorer is shipped or scorer is waited:
            row[f"{labels[scorer.name]}: p50 ms"] = f"{method['latency_ms_p50']:.0f}"
    row["1.5 s wait ranked by"] = " / ".join(f"{n} {kind}" for kind, n in shipped.ranked.items() if n)
    return row


def case_sets(data: Path | None) -> list[tuple[str, CaseSet]]:
    sets = [("github_117", github_cases()), ("claude_code_141", claude_code_cases())]
    for name, limit in SHARED_SETS.items():
        if data is not None and (data / name / "cases.jsonl").is_file():
            sets.append((name, load_cases(data / name / "cases.jsonl", limit=limit)))
    return sets


async def run(args: argparse.Namespace) -> None:
    limit_blas_threads()
    settings = Settings()
    onnx = OnnxEmbedder(max_tokens=settings.embedder_max_tokens)
    await onnx.load()
    embedder = Shared(onnx)
    sets = [(name, cases) for name, cases in case_sets(args.data)
            if not args.sets or name in args.sets]
    with tempfile.TemporaryDirectory(prefix="cold-start-") as folder:
        store = Path(folder)
        rows = []
        for name, case_set in sets if not args.recall_only else []:
            if name != "claude_code_141":
                rows.append(await index_row(name, case_set, embedder, settings, store))
                print(tabulate(rows[-1:], headers="keys", tablefmt="github"), flush=True)
        if rows:
            print(f"\nTime to a full index (load average {os.getloadavg()[0]:.1f})\n")
            print(tabulate(rows, headers="keys", tablefmt="github"), flush=True)
        recall = [await recall_row(case_set, embedder, settings, store, args.k) for _, case_set in sets]
        print(f"\nFirst-request recall@{args.k} (load average {os.getloadavg()[0]:.1f})\n")
        print(tabulate(recall, headers="keys", tablefmt="github"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = os.environ.get(EVALUATION_DATA_VARIABLE)
    parser.add_argument("--data", type=Path, default=Path(default) if default else None,
                        help=f"the optional evaluation data (default: ${EVALUATION_DATA_VARIABLE})")
    parser.add_argument("--k", type=int, default=8, help="top-k of the recall (default 8)")
    parser.add_argument("--sets", nargs="*", default=[],
                        help="only these sets (github_117 claude_code_141 livemcpbench_dev toolbench_dev)")
    parser.add_argument("--recall-only", action="store_true", help="skip the index-time table")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
