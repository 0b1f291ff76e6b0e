"""Learned states shared through Redis (docs/learning.md "Shared by replicas"): what a
state costs in Redis and what each step of sharing it takes, per state size.

Run from the repository root (needs ``redis-server`` on PATH)::

    nice env PYTHONPATH=. python benchmarks/learning_share.py

Per state size (evidence vectors of the embedder's 384 dimensions: a few, a typical
measured state, the cap :data:`selection.learning.learned.MAX_VECTORS`), against a local
``redis-server`` on a free loopback port (no persistence; add your network's round trips
for a Redis elsewhere). Columns: the bytes of the value (``STRLEN``: ``encode_state``'s
bytes) and what Redis holds for it (``MEMORY USAGE`` of the state's key and the index); wall
milliseconds, p50/p99 over ``--repeats`` runs, of publishing it (the compare-and-set
script, a newer version each time), of a refresh that finds nothing new (what every
replica pays each ``TOOLPRUNE_LEARN_REFRESH_S``: one ``HGETALL``), and of a refresh that
installs it (``HGETALL``, ``GET``, decoding, installing). None of these is on a request's
path: they run in the proxy's background task.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
import redis

from benchmarks.support.redis_server import redis_server
from proxy.usage.learning_share import SharedStates
from selection.learning.learned import MAX_VECTORS, LearnedState
from selection.learning.states import LearnedStates

DIMENSION = 384
SIZES = (8, 400, MAX_VECTORS)
EMBEDDER = "bench"


def make_state(vectors: int, version: int, rng: np.random.Generator) -> LearnedState:
    rows = rng.standard_normal((vectors, DIMENSION)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    tools = tuple(f"tool_{i // 8:04d}" for i in range(vectors))
    return LearnedState(f"catalogue-{vectors}", EMBEDDER, version, 0.0, tools,
                        rows.astype(np.float16), np.ones(vectors, dtype=np.float32))


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} / {p99:.2f}"


async def measure(url: str, vectors: int, repeats: int) -> list[str]:
    rng = np.random.default_rng(vectors)
    raw = redis.Redis.from_url(url)
    raw.flushall()
    publisher = SharedStates(url, embedder=EMBEDDER)
    replica = SharedStates(url, embedder=EMBEDDER)
    state = make_state(vectors, 1, rng)
    publish, idle, install = [], [], []
    try:
        for version in range(1, repeats + 1):
            state = LearnedState(state.catalog, EMBEDDER, version, 0.0, state.tools,
                                 state.vectors, state.weights)
            started = time.perf_counter()
            assert await publisher.publish(state)
            publish.append((time.perf_counter() - started) * 1000)
            learned = LearnedStates(EMBEDDER)  # a version this replica has not fetched
            started = time.perf_counter()
            assert await replica.refresh(learned) == 1
            install.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            assert await replica.refresh(learned) == 0
            idle.append((time.perf_counter() - started) * 1000)
        size = int(raw.strlen(publisher.key(state.catalog)))
        grown = sum(int(raw.memory_usage(key) or 0)
                    for key in (publisher.key(state.catalog), publisher.index_key))
    finally:
        await publisher.aclose()
        await replica.aclose()
        raw.close()
    return [f"{vectors:,}", f"{size:,}", f"{grown:,}", percentiles(publish),
            percentiles(idle), percentiles(install)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50, help="runs per size (default 50)")
    args = parser.parse_args()
    header = ["evidence vectors", "value bytes", "Redis memory", "publish ms",
              "refresh, nothing new ms", "refresh, install ms"]
    rows = []
    with redis_server() as server:
        for vectors in SIZES:
            rows.append(asyncio.run(measure(server.url, vectors, args.repeats)))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
