"""Conversation state stores: Redis vs memory, side by side, and memory per conversation.

Run from the repository root (needs ``redis-server`` on PATH, or ``--redis-url``)::

    PYTHONPATH=. python benchmarks/state_store.py            # ~30 s
    PYTHONPATH=. python benchmarks/state_store.py --help

What an acting request costs in state: one ``get`` before selection and one ``put`` after
it (plus one ``put`` per meta-tool round). Both stores are driven through the same
``StateStore`` interface from one asyncio event loop, as the proxy does:

* latency of one request's state work (``get`` + ``put``), sequential, p50/p99 in µs;
  ``added`` is the Redis percentile minus the memory percentile: what moving state to Redis
  adds to each request;
* throughput: requests' state work (``get`` + ``put`` pairs) per second with ``conc``
  concurrent tasks on the loop; single operations per second are twice that;
* memory per conversation: ``MemoryStateStore`` holding ``--conversations`` conversations of
  ``--tools`` loaded tools each, measured with ``tracemalloc`` (every Python allocation the
  store makes: keys, serialised states, dict and tuple overhead), and Redis's
  ``used_memory`` growth for the same keys (with their TTLs); both extrapolated linearly
  to 100,000 conversations.

The Redis is a local ``redis-server`` started on a free loopback port (no persistence), so
the network cost is a loopback round trip; add your network's round-trip time for a
Redis on another host.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from contextlib import ExitStack

import numpy as np
import redis

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.redis_server import redis_server
from proxy.state.redis import RedisStateStore
from proxy.state.store import MemoryStateStore, StateStore
from selection.choosing.state import ConversationState, LoadedTool

EXTRAPOLATE_TO = 100_000


def tool_names() -> list[str]:
    """Realistic tool names: the GitHub MCP server's catalogue when present."""
    path = REAL_CATALOGS / "github_mcp_server.json"
    if path.exists():
        return [t["function"]["name"] for t in json.loads(path.read_text())]
    return [f"tool_number_{i}_of_the_catalogue" for i in range(117)]


def conversation_state(names: list[str], tools: int, seed: int) -> ConversationState:
    now = time.time()
    chosen = random.Random(seed).sample(names, min(tools, len(names)))
    loaded = {n: LoadedTool(now - 60.0 + k, now - k * 0.5) for k, n in enumerate(chosen)}
    return ConversationState(loaded, turn=12, meta_calls=2)


def conversation_id(i: int) -> str:
    return f"h:{i:032x}"  # the shape of the proxy's derived ids ("h:" + 32 hex digits)


async def request_state_work(
    store: StateStore, conversation: str, state: ConversationState
) -> None:
    """What one acting request does with the store."""
    await store.get(conversation)
    await store.put(conversation, state)


async def latencies(store: StateStore, states: list[ConversationState], n: int) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        started = time.perf_counter()
        await request_state_work(store, conversation_id(i % len(states)), states[i % len(states)])
        out[i] = time.perf_counter() - started
    return out


async def throughput(
    store: StateStore, states: list[ConversationState], concurrency: int, window_s: float
) -> float:
    done = 0
    deadline = time.perf_counter() + window_s

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            await request_state_work(
                store, conversation_id(i % len(states)), states[i % len(states)]
            )
            done += 1
            i += concurrency

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done / (time.perf_counter() - started)


async def measure_stores(
    stores: dict[str, StateStore], states: list[ConversationState], args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {name: {} for name in stores}
    for store in stores.values():  # warm-up: connections, caches
        await latencies(store, states, 200)
    samples: dict[str, list[np.ndarray]] = {name: [] for name in stores}
    for round_ in range(args.rounds):  # interleaved, order alternating: a noisy machine
        order = list(stores) if round_ % 2 == 0 else list(reversed(stores))
        for name in order:
            samples[name].append(
                await latencies(stores[name], states, args.requests // args.rounds)
            )
    for name in stores:
        joined = np.concatenate(samples[name]) * 1e6
        results[name]["p50"] = float(np.percentile(joined, 50))
        results[name]["p99"] = float(np.percentile(joined, 99))
        results[name]["n"] = float(joined.size)
    for concurrency in args.concurrency:
        rates: dict[str, list[float]] = {name: [] for name in stores}
        for round_ in range(args.rounds):
            order = list(stores) if round_ % 2 == 0 else list(reversed(stores))
            for name in order:
                rates[name].append(
                    await throughput(stores[name], states, concurrency, args.window_s)
                )
        for name in stores:
            results[name][f"rps{concurrency}"] = statistics.median(rates[name])
    return results


def memory_store_bytes(states: list[ConversationState], conversations: int) -> tuple[float, int]:
    """(bytes per conversation in MemoryStateStore, mean JSON value size)."""
    store = MemoryStateStore(ttl_s=3600, max_conversations=conversations)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]

    async def fill() -> None:
        for i in range(conversations):
            await store.put(conversation_id(i), states[i % len(states)])

    asyncio.run(fill())
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(store) == conversations
    value = statistics.mean(len(s.to_json()) for s in states)
    return (after - before) / conversations, round(value)


async def redis_bytes(url: str, states: list[ConversationState], conversations: int) -> float:
    """Bytes of Redis ``used_memory`` per conversation key (with its TTL)."""
    raw = redis.Redis.from_url(url)
    raw.flushall()
    before = int(raw.info("memory")["used_memory"])
    store = RedisStateStore(url, ttl_s=3600, key_prefix="bench:", timeout_s=5)
    for start in range(0, conversations, 500):
        await asyncio.gather(
            *(
                store.put(conversation_id(i), states[i % len(states)])
                for i in range(start, min(start + 500, conversations))
            )
        )
    await store.aclose()
    after = int(raw.info("memory")["used_memory"])
    assert raw.dbsize() == conversations
    raw.flushall()
    raw.close()
    return (after - before) / conversations


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis-url", help="an existing Redis (default: start redis-server)")
    parser.add_argument(
        "--requests", type=int, default=20_000, help="sequential requests per store"
    )
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per measurement")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--window-s", type=float, default=1.0, help="throughput window per round")
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=10, help="loaded tools per conversation")
    args = parser.parse_args(argv)

    names = tool_names()
    states = [conversation_state(names, args.tools, seed) for seed in range(64)]
    with ExitStack() as stack:
        url = args.redis_url or stack.enter_context(redis_server()).url

        async def run() -> dict[str, dict[str, float]]:
            stores: dict[str, StateStore] = {
                "memory": MemoryStateStore(ttl_s=3600, max_conversations=args.conversations),
                "redis": RedisStateStore(url, ttl_s=3600, key_prefix="bench:", timeout_s=5),
            }
            try:
                return await measure_stores(stores, states, args)
            finally:
                for store in stores.values():
                    await store.aclose()

        results = asyncio.run(run())
        per_conversation, value_bytes = memory_store_bytes(states, args.conversations)
        redis_per_conversation = asyncio.run(redis_bytes(url, states, args.conversations))
        server_version = redis.Redis.from_url(url).info("server")["redis_version"]

    print(
        f"# state store benchmark — Python {platform.python_version()}, redis-py "
        f"{redis.__version__}, redis-server {server_version}, {platform.machine()}, "
        f"{len(states[0].loaded)} loaded tools per conversation, value {value_bytes} B of JSON, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    print("Per request (one get + one put), sequential, µs:\n")
    print("| store | p50 | p99 | added p50 | added p99 | n |")
    print("|---|---:|---:|---:|---:|---:|")
    base = results["memory"]
    for name, r in results.items():
        added = (
            ("–", "–")
            if name == "memory"
            else (f"{r['p50'] - base['p50']:,.0f}", f"{r['p99'] - base['p99']:,.0f}")
        )
        cells = [name, f"{r['p50']:,.1f}", f"{r['p99']:,.1f}", *added, str(int(r["n"]))]
        print("| " + " | ".join(cells) + " |")
    print("\nThroughput, requests' state work (get + put) per second on one event loop:\n")
    print("| store | " + " | ".join(f"conc {c}" for c in args.concurrency) + " |")
    print("|---|" + "---:|" * len(args.concurrency))
    for name, r in results.items():
        print(f"| {name} | " + " | ".join(f"{r[f'rps{c}']:,.0f}" for c in args.concurrency) + " |")
    print(
        f"\nMemory per conversation ({args.conversations:,} conversations measured, "
        f"{args.tools} loaded tools each):\n"
    )
    print(f"| store | per conversation | at {args.conversations:,} | at {EXTRAPOLATE_TO:,} |")
    print("|---|---:|---:|---:|")
    for name, per in (
        ("memory (tracemalloc)", per_conversation),
        ("redis (used_memory)", redis_per_conversation),
    ):
        print(
            f"| {name} | {per:,.0f} B | {fmt_bytes(per * args.conversations)} | "
            f"{fmt_bytes(per * EXTRAPOLATE_TO)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
