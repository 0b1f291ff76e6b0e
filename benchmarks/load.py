"""Load: N concurrent streaming clients for a set time, direct to a fast upstream and through
``toolprune serve``, in one run, side by side.

Run from the repository root::

    PYTHONPATH=. python benchmarks/load.py --streams 50,200          # ~3 minutes
    PYTHONPATH=. python benchmarks/load.py --workers 2 --streams 200  # proxy with 2 workers
    PYTHONPATH=. python benchmarks/load.py --no-tools --chunks 1 --chunk-interval-ms 0 \
        --streams 32 --floor          # pass-through capacity, with a minimal relay's floor
    PYTHONPATH=. python benchmarks/load.py --help

The clients join evenly over ``--ramp-s`` (default one stream's length), so requests
arrive spread out, as independent agents' do; each then loops: it sends a streaming chat
request (the 117-tool GitHub MCP catalogue with pruning on, so the proxy parses, selects
and rewrites every request) and reads the SSE response to ``[DONE]``. The ``--warmup-s``
after the ramp are not measured, the next ``--duration-s`` are. ``--ramp-s 0`` starts all
clients at once instead: a burst of N simultaneous requests that, streams being of one
length, recurs every stream length. The upstream (its own process, ``benchmarks/load_servers.py``) streams
``--chunks`` chunks ``--chunk-interval-ms`` apart, so a stream lasts about
``chunks x interval`` when nothing queues: a proxy that keeps up shows the direct rate.

Measured per target and stream count, over the streams sent in the measured seconds:
streams per second (N / mean stream time, Little's law for N clients without think time),
first body byte and whole-stream latency (p50/p99, from sending the request), errors
(non-200, a stream without ``[DONE]``, a connection failure), and the proxy's peak
resident memory (RSS, summed over its worker processes) and open file descriptors, sampled
from ``/proc`` every 0.25 s, and its CPU time (user + system, from ``/proc``) per stream:
the figure that other processes on a shared machine disturb least.
Direct and proxied windows alternate (``--rounds``), since the machine is shared.

Clients are raw asyncio connections (one keep-alive connection each) parsed with
``httptools`` (the C parser uvicorn uses), so the load generator costs little CPU next to
the servers it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from benchmarks.load_clients import CHAT, Requests, Samples, client_loop
from benchmarks.load_servers import FLOOR_MAIN, UPSTREAM_MAIN
from benchmarks.process_stats import Peak, cpu_seconds, rss_and_fds, sample_peak
from benchmarks.processes import (
    HOST,
    REPO_ROOT,
    Server,
    clean_env,
    free_port,
    shared_state,
    start_server,
)
from benchmarks.support.data import REAL_CATALOGS

DEFAULT_CATALOG = REAL_CATALOGS / "github_mcp_server.json"
STARTUP_TIMEOUT_S = 240.0

# --- windows ------------------------------------------------------------------------------
@dataclass
class Result:
    target: str
    streams: int
    samples: Samples = field(default_factory=Samples)
    seconds: float = 0.0
    peak: Peak = field(default_factory=Peak)
    cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        """Streams per second by Little's law: N clients that each send the next request
        when one ends complete N / (mean stream time) a second. Counting the streams that
        end within a window would alias: clients that start together stay in phase."""
        total = self.samples.total
        return self.streams * len(total) / sum(total) if total else 0.0

    @property
    def cpu_ms_per_stream(self) -> float:
        streams = self.rate * self.seconds
        return 1000 * self.cpu_s / streams if streams else 0.0


async def window(
    port: int, requests: Requests, streams: int, ramp_s: float, warmup_s: float,
    duration_s: float, pid: int | None, result: Result,
) -> None:
    """``streams`` clients join evenly over ``ramp_s`` seconds (0: all at once); the
    ``warmup_s`` seconds after the ramp are not measured, the next ``duration_s`` are."""
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_peak(pid, result.peak, stop))
    started = time.perf_counter()
    measure_from = started + ramp_s + warmup_s
    deadline = measure_from + duration_s
    clients = asyncio.gather(*(
        client_loop(HOST, port, requests, c, started + ramp_s * c / streams, measure_from,
                    deadline, result.samples)
        for c in range(streams)
    ))
    await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
    cpu_before = cpu_seconds(pid)
    await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
    result.cpu_s += cpu_seconds(pid) - cpu_before
    result.seconds += duration_s
    await clients
    stop.set()
    await sampler


async def wait_ready(server: Server, path: str, ready: Callable[[httpx.Response], bool]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    async with httpx.AsyncClient(timeout=30) as client:
        while True:
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} exited during startup:\n{server.log_tail()}")
            try:
                if ready(await client.get(server.origin + path)):
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{server.name} not ready after {STARTUP_TIMEOUT_S} s")
            await asyncio.sleep(0.2)


async def wait_pruning(origin: str, body: bytes) -> float:
    """Send the catalogue until a response comes back pruned by its dense index (not
    ``X-Tool-Pruning-Index: building``, the BM25 ranking while the index is built in the
    background, which would otherwise go on during the first windows)."""
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=300) as client:
        while time.monotonic() - started < STARTUP_TIMEOUT_S:
            response = await client.post(origin + CHAT, content=body,
                                         headers={"content-type": "application/json"})
            headers = response.headers
            if (response.status_code == 200 and "x-tool-pruning-tools" in headers
                    and "x-tool-pruning-index" not in headers):
                return time.monotonic() - started
            await asyncio.sleep(0.5)
    raise TimeoutError("the proxy never pruned the catalogue")


QUERY_METRICS = {
    'toolprune_query_texts_total{source="cache"}': "cached",
    'toolprune_query_texts_total{source="embedder"}': "embedded",
    "toolprune_query_batches_total": "batches",
    "toolprune_query_batched_requests_total": "requests",
}


async def query_metrics(origin: str) -> dict[str, float]:
    """The proxy's query-embedding counters and its fallbacks to the full catalogue (all
    reasons: an embedding past `TOOLPRUNE_EMBEDDER_TIMEOUT_S` is one), of the worker that
    answers /metrics."""
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(origin + "/metrics")).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in QUERY_METRICS:
            counts[QUERY_METRICS[name]] = float(value)
        elif name.startswith("toolprune_fallbacks_total{"):
            counts["fallbacks"] = counts.get("fallbacks", 0.0) + float(value)
    return counts


# --- report -------------------------------------------------------------------------------
def ms(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q) * 1000:8.0f}" if values else f"{'-':>8}"


def print_table(results: list[Result]) -> None:
    print()
    print(f"{'streams':>7}  {'target':<8}  {'streams/s':>9}  {'of direct':>9}  "
          f"{'first p50':>9}  {'first p99':>9}  {'total p50':>9}  {'total p99':>9}  "
          f"{'errors':>6}  {'RSS MiB':>7}  {'fds':>5}  {'CPU ms/stream':>13}")
    direct_rate: dict[int, float] = {}
    for result in results:
        if result.target == "direct":
            direct_rate[result.streams] = result.rate
        base = direct_rate.get(result.streams)
        ratio = f"{result.rate / base:9.2f}" if base else f"{'':>9}"
        s = result.samples
        rss = f"{result.peak.rss_mib:7.0f}" if result.peak.rss_mib else f"{'-':>7}"
        fds = f"{result.peak.fds:5d}" if result.peak.fds else f"{'-':>5}"
        cpu = f"{result.cpu_ms_per_stream:13.1f}" if result.cpu_s else f"{'-':>13}"
        print(f"{result.streams:7d}  {result.target:<8}  {result.rate:9.1f}  {ratio}  "
              f"{ms(s.first, 50)} ms{ms(s.first, 99)} ms{ms(s.total, 50)} ms"
              f"{ms(s.total, 99)} ms  {s.errors:6d}  {rss}  {fds}  {cpu}")
    kinds = {f"{r.target}/{r.streams}": r.samples.error_kinds for r in results if r.samples.errors}
    if kinds:
        print("errors by kind:", kinds)


def print_query_counts(counts: dict[int, dict[str, float]], workers: int) -> None:
    """Per stream count: query texts the proxy embedded and answered from its query cache,
    and how many requests one embedder call served on average."""
    scope = "" if workers == 1 else f" (one of {workers} workers: the one that answered /metrics)"
    print(f"proxy query embedding{scope}:")
    for streams, c in counts.items():
        texts = c.get("cached", 0) + c.get("embedded", 0)
        share = c.get("cached", 0) / texts if texts else 0.0
        per_call = c.get("requests", 0) / c["batches"] if c.get("batches") else 0.0
        print(f"  {streams} streams: {c.get('embedded', 0):.0f} texts embedded, "
              f"{c.get('cached', 0):.0f} from the cache ({share:.1%}); "
              f"{c.get('batches', 0):.0f} embedder calls, {per_call:.1f} requests each; "
              f"{c.get('fallbacks', 0):.0f} requests forwarded unpruned after a failure")


# --- main ---------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="50,200",
                        help="comma-separated concurrent stream counts (default 50,200)")
    parser.add_argument("--duration-s", type=float, default=10.0,
                        help="measured seconds of one window (default 10)")
    parser.add_argument("--ramp-s", type=float, default=None,
                        help="seconds over which a window's clients join, evenly (default: "
                        "one stream's length, chunks x interval, so requests arrive spread "
                        "out; 0: all at once, a burst of N simultaneous requests)")
    parser.add_argument("--warmup-s", type=float, default=2.0,
                        help="unmeasured seconds after the ramp (default 2)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="windows per target per stream count, alternating (default 2)")
    parser.add_argument("--chunks", type=int, default=40,
                        help="content chunks per upstream stream (default 40)")
    parser.add_argument("--chunk-interval-ms", type=float, default=100.0,
                        help="upstream pause before each chunk, ms (default 100: 4 s streams, "
                        "10 tokens/s each)")
    parser.add_argument("--workers", type=int, default=1,
                        help="toolprune serve --workers (default 1; >1 starts a redis-server)")
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG,
                        help=f"tools JSON array (default {DEFAULT_CATALOG})")
    parser.add_argument("--no-tools", action="store_true",
                        help="requests without tools: the proxy's pass-through (with "
                        "--chunks 1 --chunk-interval-ms 0: requests/s against a fast upstream)")
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="also measure the proxy of another checkout of the repository "
                        "(e.g. `git worktree add DIR main`) as a third target, `baseline`, "
                        "in the same alternating windows")
    parser.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra TOOLPRUNE_* setting of the baseline proxy only (repeatable; "
                        "with --baseline .: this checkout under other settings)")
    parser.add_argument("--floor", action="store_true",
                        help="also measure a minimal relay (raw ASGI under uvicorn, one "
                        "aiohttp session, no checks): the floor of a Python proxy on this stack")
    parser.add_argument("--proxy-env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra TOOLPRUNE_* setting of the proxy (repeatable)")
    args = parser.parse_args(argv)
    args.streams = [int(s) for s in args.streams.split(",") if s.strip()]
    if args.no_tools:
        args.catalog = None
    if args.ramp_s is None:
        args.ramp_s = args.chunks * args.chunk_interval_ms / 1000
    return args


async def run(args: argparse.Namespace, log_dir: Path) -> None:
    up_port, proxy_port = free_port(), free_port()
    env = clean_env("warning")
    env.update(item.split("=", 1) for item in args.proxy_env)
    servers: list[Server] = []
    redis = None
    try:
        upstream = start_server(
            "upstream",
            [sys.executable, "-c", UPSTREAM_MAIN, HOST, str(up_port), str(args.chunks),
             str(args.chunk_interval_ms / 1000)],
            up_port, log_dir, env,
        )
        servers.append(upstream)
        redis = shared_state(args.workers, env)
        proxy = start_proxy("proxy", proxy_port, upstream.origin, args, log_dir, env)
        servers.append(proxy)
        baseline = None
        if args.baseline is not None:
            baseline_port = free_port()
            baseline_env = {**env, **dict(item.split("=", 1) for item in args.baseline_env)}
            baseline = start_proxy("baseline", baseline_port, upstream.origin, args, log_dir,
                                   baseline_env, root=args.baseline.resolve())
            servers.append(baseline)
        floor = None
        if args.floor:
            floor_port = free_port()
            floor = start_server(
                "floor", [sys.executable, "-c", FLOOR_MAIN, HOST, str(floor_port), upstream.origin],
                floor_port, log_dir, env,
            )
            servers.append(floor)
            await wait_ready(floor, "/v1/models", lambda r: r.status_code == 200)
        await wait_ready(upstream, "/v1/models", lambda r: r.status_code == 200)
        probe = Requests(args.catalog, HOST, proxy_port, window=0).body(0, 0)
        took = 0.0
        for server in (s for s in servers[1:] if s is not floor):
            await wait_ready(server, "/readyz", lambda r: r.status_code == 200)
            if args.catalog is not None:
                took = await wait_pruning(server.origin, probe)
        load = os.getloadavg()
        print(f"toolprune load benchmark: python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"upstream: {args.chunks} chunks x {args.chunk_interval_ms:g} ms per stream; "
              f"proxy: toolprune serve, {args.workers} worker(s); body: "
              f"{f'{args.catalog.name} tools, pruning on' if args.catalog else 'no tools'}; "
              f"{args.rounds} x {args.duration_s:g} s measured per target, each "
              f"after a {args.ramp_s:g} s ramp and {args.warmup_s:g} s unmeasured; "
              f"catalogue warm-up {took:.1f} s")
        targets = {"direct": (up_port, None), "proxy": (proxy_port, proxy.process.pid)}
        if baseline is not None:
            targets["baseline"] = (baseline_port, baseline.process.pid)
        if floor is not None:
            targets["floor"] = (floor_port, floor.process.pid)
        results: list[Result] = []
        windows = 0
        query_counts: dict[int, dict[str, float]] = {}
        for streams in args.streams:
            before = await query_metrics(proxy.origin)
            per_target = {name: Result(name, streams) for name in targets}
            for round_index in range(args.rounds):
                names = list(targets) if round_index % 2 == 0 else list(targets)[::-1]
                for name in names:
                    port, pid = targets[name]
                    windows += 1
                    requests = Requests(args.catalog, HOST, port, window=windows)
                    await window(port, requests, streams, args.ramp_s, args.warmup_s,
                                 args.duration_s, pid, per_target[name])
            results.extend(per_target.values())
            after = await query_metrics(proxy.origin)
            query_counts[streams] = {k: v - before.get(k, 0.0) for k, v in after.items()}
        print_table(results)
        if args.catalog is not None:
            print_query_counts(query_counts, args.workers)
        idle_rss, idle_fds = rss_and_fds(proxy.process.pid)
        print(f"proxy after the run: RSS {idle_rss:.0f} MiB, {idle_fds} fds")
    except BaseException:
        for server in servers:
            tail = server.log_tail()
            if tail:
                print(f"--- {server.name} log tail ---\n{tail}", file=sys.stderr)
        raise
    finally:
        for server in reversed(servers):
            server.stop()
        if redis is not None:
            redis.close()


def start_proxy(
    name: str, port: int, upstream: str, args: argparse.Namespace, log_dir: Path,
    env: dict[str, str], root: Path | None = None,
) -> Server:
    """``toolprune serve`` of this repository, or of the checkout at ``root``, in front of
    the upstream at origin ``upstream``."""
    if root is not None:
        env = {**env, "PYTHONPATH": os.pathsep.join(
            [str(root), *(p for p in env["PYTHONPATH"].split(os.pathsep) if p != str(REPO_ROOT))]
        )}
    return start_server(
        name,
        [sys.executable, "-m", "proxy.cli.main", "serve", "--host", HOST, "--port", str(port),
         "--upstream", f"{upstream}/v1",
         *(["--workers", str(args.workers)] if args.workers > 1 else [])],
        port, log_dir, env, **({"cwd": root} if root is not None else {}),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolprune-load-") as log_dir:
        asyncio.run(run(args, Path(log_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
