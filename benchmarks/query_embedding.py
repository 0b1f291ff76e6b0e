"""Query embedding under concurrency, in process: the embedded ONNX model called once per
request (each call its own worker thread, as the proxy did) vs through the query batcher
(``selection.query_embedding.QueryBatcher``: one call at a time, queries that arrive while
it runs go together in the next), per onnxruntime session setting, side by side.

Run from the repository root::

    PYTHONPATH=. python benchmarks/query_embedding.py                     # ~1 minute
    PYTHONPATH=. python benchmarks/query_embedding.py --concurrency 1,8,50 --requests 200

Every request embeds one distinct query (a load-benchmark query with a request number), so
nothing is cached. ``conc`` requests are kept in flight on one asyncio event loop until
``--requests`` have completed. Per row: requests/s, CPU milliseconds of the process per
request (``time.process_time``: onnxruntime's threads, the worker threads and the event loop
together), latency p50/p99 from the call to its vectors, and embedder calls per request.
Configurations alternate in ``--rounds`` rounds (the machine is shared); the rows are the
medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.load import QUERIES
from selection.embedders import OnnxEmbedder
from selection.query_embedding import QueryBatcher


@dataclass(frozen=True)
class Setting:
    label: str
    threads: int
    spinning: bool


SETTINGS = [
    Setting("1 thread", 1, False),
    Setting("2 threads, spinning", 2, True),
    Setting("2 threads, no spinning", 2, False),
]


async def drive(
    embed: Callable[[Sequence[str]], Awaitable[np.ndarray]], concurrency: int, requests: int,
    salt: str,
) -> tuple[float, float, list[float]]:
    """(seconds, CPU seconds, latencies) of ``requests`` distinct one-text queries."""
    latencies: list[float] = []
    counter = iter(range(requests))

    async def worker() -> None:
        for i in counter:
            text = f"{QUERIES[i % len(QUERIES)]} (request {salt}-{i})"
            started = time.perf_counter()
            await embed([text])
            latencies.append(time.perf_counter() - started)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - wall, time.process_time() - cpu, latencies


async def run(args: argparse.Namespace) -> None:
    embedders = {}
    for setting in SETTINGS:
        embedder = OnnxEmbedder(intra_op_threads=setting.threads, intra_op_spinning=setting.spinning)
        await embedder.load()
        embedders[setting.label] = embedder
    load = os.getloadavg()
    print(f"query embedding: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.requests} distinct "
          f"one-sentence queries per measurement, medians of {args.rounds} rounds")
    print(f"{'session':<24} {'path':<9} {'conc':>4} {'req/s':>7} {'CPU ms/req':>10} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'calls/req':>9}")
    for concurrency in args.concurrency:
        rows: dict[tuple[str, str], list[tuple[float, float, float, float, float]]] = {}
        for round_index in range(args.rounds):
            order = [(s.label, path) for s in SETTINGS for path in ("per call", "batched")]
            if round_index % 2:
                order.reverse()
            for label, path in order:
                embedder = embedders[label]
                batcher = QueryBatcher(embedder.embed)
                embed = batcher.embed if path == "batched" else embedder.embed
                seconds, cpu, latencies = await drive(
                    embed, concurrency, args.requests, f"{round_index}-{label}-{path}"
                )
                calls = batcher.stats.batches / args.requests if path == "batched" else 1.0
                rows.setdefault((label, path), []).append((
                    args.requests / seconds, cpu / args.requests * 1000,
                    float(np.percentile(latencies, 50)) * 1000,
                    float(np.percentile(latencies, 99)) * 1000, calls,
                ))
        for (label, path), samples in rows.items():
            rate, cpu, p50, p99, calls = (statistics.median(column) for column in zip(*samples))
            print(f"{label:<24} {path:<9} {concurrency:>4} {rate:>7.1f} {cpu:>10.1f} "
                  f"{p50:>7.1f} {p99:>7.1f} {calls:>9.2f}")
    for embedder in embedders.values():
        await embedder.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,50,200",
                        help="comma-separated requests in flight (default 1,50,200)")
    parser.add_argument("--requests", type=int, default=200,
                        help="requests per measurement (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating (default 3)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
