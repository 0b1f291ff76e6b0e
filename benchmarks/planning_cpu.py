"""Planning CPU per request at large warm catalogues, the query embedding left out.

What the proxy's own code costs per acting request before it forwards, as the catalogue
grows: split the body (catalogue from the cache), key the conversation, score against the
warm index, select, build the meta-tool, save the state (the Chat Completions adapter's decoding
and reading, ``Planner.plan``, in process). The embedder is a deterministic stand-in (a seeded random
unit vector per text, 64 dimensions, ~0.1 ms a text), so the figures are the proxy's work
alone: add the real query embedding (~11 ms on one core, ``selection_latency.py``) for
the whole.

Catalogues: the repository's two real MCP catalogues (GitHub 117, Playwright 69 tools)
repeated under 40 namespaces (``ns7__get_me_1234``) up to each size, so bundles and the
namespace menu are exercised as in a real many-server catalogue. Each size is measured
twice, side by side: ranking with the catalogue's groups (the 40 namespaces,
:mod:`selection.ranking.group_ranking`, the default weights) and without (every group weight 0;
the groups are still found and head the meta-tool's lines), so the ``groups`` rows' added
p50 is what ranking by groups costs.

    PYTHONPATH=. python benchmarks/planning_cpu.py [--sizes 117,527,2470,10000] [--core 'get_me,search_*']
    PYTHONPATH=. python benchmarks/planning_cpu.py --sizes 10000 --profile 25   # where it goes
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import hashlib
import json
import os
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from benchmarks.support.data import REAL_CATALOGS
from config.policy import load_policy
from config.selector import selector_settings
from config.settings import Settings
from proxy.apis.chat.adapter import read_chat
from proxy.components import limit_blas_threads
from proxy.metrics import Metrics
from proxy.state.store import MemoryStateStore
from proxy.turn.planner import Planner
from selection.catalog.cache import CatalogCache
from selection.planning import Selector
from selection.ranking.engine import SelectionEngine
from selection.ranking.signals.registry import Signals

QUERIES = [
    "List the open pull requests in octocat/hello-world and show me the failing checks.",
    "Create an issue in acme/api titled 'Login fails on Safari' and label it bug.",
    "Open https://example.com in the browser and take a screenshot.",
]
DIMENSIONS = 64


class StandInEmbedder:
    """A seeded random unit vector per text: deterministic, and nearly free."""

    id = "stand-in"
    ready = True

    async def load(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).digest()
            vector = np.random.default_rng(int.from_bytes(seed, "little")).standard_normal(DIMENSIONS)
            vectors[row] = vector / np.linalg.norm(vector)
        return vectors


def catalogue(size: int) -> list[dict[str, Any]]:
    """``size`` tools: the real catalogues' tools, renamed under 40 namespaces."""
    real = [
        *json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text()),
        *json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text()),
    ]
    tools = []
    for i in range(size):
        tool = copy.deepcopy(real[i % len(real)])
        tool["function"]["name"] = f"ns{i % 40}__{tool['function']['name']}_{i}"
        tools.append(tool)
    return tools


async def measure(
    size: int, core: list[str], requests: int, profile: int = 0, groups: bool = True
) -> dict[str, Any]:
    off = {} if groups else {"group_weight": 0.0, "group_lexical_weight": 0.0,
                             "group_vector_weight": 0.0}
    settings = Settings(core=core, index_timeout_s=3600.0, **off)
    engine = SelectionEngine(
        StandInEmbedder(), vector_cache_size=4 * size + 1000, index_cache_size=4,  # type: ignore[arg-type]
        timeout_s=60.0, index_timeout_s=3600.0,
        signals=Signals.from_values(settings.signal_values()),
    )
    cache = CatalogCache(1 << 30)
    planner = Planner(
        settings=settings,
        selector=Selector(engine, load_policy(settings), selector_settings(settings)),
        store=MemoryStateStore(3600.0, requests + 10), metrics=Metrics(),
        on_late_error=lambda error: None,
    )
    tools = catalogue(size)
    bodies = [
        json.dumps({"model": "m", "stream": True, "tools": tools,
                    "messages": [{"role": "user", "content": query}]}).encode()
        for query in QUERIES
    ]
    started = time.perf_counter()
    warm = await read_chat(cache.decode_body(bodies[0]), cache)
    await planner.plan(warm, [(b"x-conversation-id", b"warm")])
    cold_s = time.perf_counter() - started
    seconds, cpu_seconds = [], []
    forwarded = 0
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    for n in range(requests):
        raw = bodies[n % len(bodies)]
        started, cpu = time.perf_counter(), time.thread_time()
        body = await read_chat(cache.decode_body(raw), cache)
        turn = await planner.plan(body, [(b"x-conversation-id", f"c{n}".encode())])
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.thread_time() - cpu)
        forwarded = len(turn.plan.selection.tools)
    if profiler is not None:
        profiler.disable()
        print(f"--- {size} tools: the {profile} functions of most own time, ms per request ---")
        stats = pstats.Stats(profiler)
        rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:profile]  # type: ignore[attr-defined]
        for (file, line, name), (_, calls, own, cumulative, _) in rows:
            print(f"{own / requests * 1000:8.2f} own {cumulative / requests * 1000:8.2f} cum "
                  f"{calls / requests:8.1f} calls  {Path(file).name}:{line} {name}")
    await engine.aclose()
    ms = np.array(seconds) * 1000
    return {
        "tools": size, "groups": "on" if groups else "off",
        "body MB": round(len(bodies[0]) / 1e6, 2),
        "plan p50 ms": round(float(np.percentile(ms, 50)), 1),
        "plan p90 ms": round(float(np.percentile(ms, 90)), 1),
        "CPU p50 ms": round(float(np.percentile(cpu_seconds, 50)) * 1000, 1),
        "first (cold) s": round(cold_s, 1), "forwarded": forwarded,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="117,527,2470,10000", help="catalogue sizes")
    parser.add_argument("--core", default="get_me,search_*", help="CORE patterns ('' for none)")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per size")
    parser.add_argument("--blas-threads", action="store_true",
                        help="leave numpy's BLAS its default threads (the proxy runs it on one)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile the timed requests (cProfile; its overhead inflates "
                        "the table's times) and print the N functions of most own time per size")
    args = parser.parse_args(argv)
    if not args.blas_threads:
        limit_blas_threads()  # as the proxy does
    core = [pattern for pattern in args.core.split(",") if pattern]
    rows = [
        asyncio.run(measure(int(size), core, args.requests, args.profile, groups))
        for size in args.sizes.split(",") for groups in (False, True)
    ]
    load = os.getloadavg()
    print(f"CORE {core}; {args.requests} warm requests per size, query embedding excluded; "
          f"CPU: the planning thread's own (time.thread_time), wall less other processes' "
          f"share; load average {load[0]:.2f}")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
