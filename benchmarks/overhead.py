"""Proxy overhead: the test upstream called directly vs through ``toolprune serve``, side by side.

Run from the repository root::

    PYTHONPATH=. python benchmarks/overhead.py            # ~1-2 minutes
    PYTHONPATH=. python benchmarks/overhead.py --workers 2 --no-pruned   # proxy with 2 workers
    PYTHONPATH=. python benchmarks/overhead.py --help

The upstream (``benchmarks.support.upstream.Upstream``, no inference: it answers ``"ok"`` at once)
and the proxy (``python -m proxy.cli.main serve``) each run as their own uvicorn process, so the
benchmark client (``httpx.AsyncClient``), the proxy and the upstream do not share a GIL.

Payloads (one row each):

* ``no tools``: a short chat request without ``tools`` (pure pass-through overhead);
* ``117 tools, off``: the GitHub MCP server catalogue (117 tools, a ~120 KiB body) with
  ``X-Tool-Pruning: off`` (the proxy forwards a large body unchanged);
* ``117 tools, pruned``: the same body with pruning on (the proxy parses, embeds the query,
  selects and rewrites; the upstream then gets a much smaller body).

And the history table: added latency of plain requests as a conversation grows (0 to
1 MiB of messages, each request the one before it plus one exchange:
``benchmarks.overhead_history``), pass-through (no tools) and pruned at catalogue sizes
117, 2,470 and 10,000 (the real catalogues repeated under namespaces), side by side with
direct.

Measured, each for the direct and the proxied target:

* latency of sequential requests, non-streaming and streaming (time to first body byte and
  to the end of the stream), p50/p99; ``added`` is proxy percentile minus direct percentile;
* requests/s of non-streaming requests at concurrency levels (default 1, 8, 32), in
  fixed-duration windows.

The machine is noisy, so direct and proxied measurements are interleaved: every row is
measured in rounds, each round one batch (or window) per target, the target order
alternating from round to round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from benchmarks.overhead_history import add_history_arguments, measure_history, print_history
from benchmarks.overhead_requests import (
    STARTUP_TIMEOUT_S,
    TOOLS_HEADER,
    Failed,
    Payload,
    Tally,
    Target,
    build_payloads,
    ordered,
    plain_request,
    stream_request,
    wait_pruning,
    warm_up,
)
from benchmarks.processes import (
    HOST,
    Server,
    clean_env,
    free_port,
    shared_state,
    start_checkout_proxy,
    start_server,
)
from benchmarks.support.data import REAL_CATALOGS

DEFAULT_CATALOG = REAL_CATALOGS / "github_mcp_server.json"
CHAT = "/v1/chat/completions"

#: The upstream as its own process. ``Upstream`` records every request (body included) in a
#: list; a bounded deque keeps the benchmark's memory flat (155 KB bodies, thousands of them).
UPSTREAM_MAIN = """
import collections, sys
import uvicorn
from benchmarks.support.upstream import Upstream

upstream = Upstream()
upstream._records = collections.deque(maxlen=64)
uvicorn.run(upstream.app, host=sys.argv[1], port=int(sys.argv[2]),
            log_level="warning", access_log=False)
"""

# --- processes ---------------------------------------------------------------------------
async def wait_ready(client: httpx.AsyncClient, server: Server, path: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited during startup:\n{server.log_tail()}")
        try:
            response = await client.get(server.origin + path, timeout=5)
            if response.status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{server.name} not ready after {STARTUP_TIMEOUT_S} s")
        await asyncio.sleep(0.1)


# --- latency -----------------------------------------------------------------------------
@dataclass
class LatencyRow:
    label: str
    samples: dict[str, list[float]]  # target name -> seconds


async def measure_latency(
    targets: list[Target], payload: Payload, requests: int, rounds: int, tally: Tally
) -> list[LatencyRow]:
    plain: dict[str, list[float]] = {t.name: [] for t in targets}
    ttfb: dict[str, list[float]] = {t.name: [] for t in targets}
    ttlb: dict[str, list[float]] = {t.name: [] for t in targets}
    per_round = [requests // rounds + (1 if r < requests % rounds else 0) for r in range(rounds)]
    index = 0
    for round_index, batch in enumerate(per_round):
        for target in ordered(targets, round_index):
            for i in range(batch):
                plain[target.name].append(await plain_request(target, payload, index + i, tally))
        for target in ordered(targets, round_index + 1):
            for i in range(batch):
                first, last = await stream_request(target, payload, index + i, tally)
                ttfb[target.name].append(first)
                ttlb[target.name].append(last)
        index += batch
    return [
        LatencyRow(f"plain   {payload.label}", plain),
        LatencyRow(f"stream  {payload.label}  first byte", ttfb),
        LatencyRow(f"stream  {payload.label}  last byte", ttlb),
    ]


# --- throughput --------------------------------------------------------------------------
@dataclass
class ThroughputRow:
    label: str
    concurrency: int
    completed: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def rps(self, name: str) -> float:
        return self.completed.get(name, 0) / self.seconds[name] if self.seconds.get(name) else 0.0


async def window(
    target: Target, payload: Payload, concurrency: int, duration_s: float, tally: Tally
) -> tuple[int, float]:
    """Requests completed by ``concurrency`` workers that start requests for ``duration_s``,
    and the seconds until the last one finished."""
    completed = 0
    started = time.perf_counter()
    deadline = started + duration_s

    async def worker(offset: int) -> None:
        nonlocal completed
        i = offset
        while time.perf_counter() < deadline:
            await plain_request(target, payload, i, tally)
            completed += 1
            i += concurrency

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return completed, time.perf_counter() - started


async def measure_throughput(
    targets: list[Target],
    payload: Payload,
    concurrency: int,
    rounds: int,
    duration_s: float,
    tally: Tally,
) -> ThroughputRow:
    row = ThroughputRow(payload.label, concurrency)
    for target in targets:  # a short unmeasured window opens the connections
        await window(target, payload, concurrency, min(0.2, duration_s), tally)
    for round_index in range(rounds):
        for target in ordered(targets, round_index):
            done, seconds = await window(target, payload, concurrency, duration_s, tally)
            row.completed[target.name] = row.completed.get(target.name, 0) + done
            row.seconds[target.name] = row.seconds.get(target.name, 0.0) + seconds
    return row


# --- report ------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


def print_latency(rows: list[LatencyRow]) -> None:
    width = max(len(row.label) for row in rows)
    print()
    print("Latency of sequential requests, ms (added = proxy - direct, per percentile)")
    head = f"{'':{width}}  {'--------------- p50 ---------------':>35}  {'--------------- p99 ---------------':>35}"
    print(head)
    cols = f"{'direct':>8}  {'proxy':>8}  {'added':>8}  {'n':>5}"
    print(f"{'row':{width}}  {cols}  {cols}")
    for row in rows:
        cells = []
        for q in (50, 99):
            direct = float(np.percentile(row.samples["direct"], q))
            proxy = float(np.percentile(row.samples["proxy"], q))
            n = min(len(row.samples["direct"]), len(row.samples["proxy"]))
            cells.append(f"{ms(direct)}  {ms(proxy)}  {(proxy - direct) * 1000:+8.2f}  {n:5d}")
        print(f"{row.label:{width}}  {'  '.join(cells)}")


def print_throughput(rows: list[ThroughputRow], duration_s: float, rounds: int) -> None:
    width = max(len(row.label) for row in rows)
    print()
    print(
        f"Throughput, non-streaming requests/s ({rounds} x {duration_s:g} s windows per target)"
    )
    print(f"{'payload':{width}}  {'conc':>4}  {'direct':>8}  {'proxy':>8}  {'proxy/direct':>12}")
    for row in rows:
        direct, proxy = row.rps("direct"), row.rps("proxy")
        ratio = proxy / direct if direct else float("nan")
        print(
            f"{row.label:{width}}  {row.concurrency:4d}  {direct:8.1f}  {proxy:8.1f}  {ratio:12.2f}"
        )


# --- main --------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300,
                        help="latency: measured requests per target per row (default 300)")
    parser.add_argument("--rounds", type=int, default=6,
                        help="latency: interleaved direct/proxy batches per row (default 6)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="unmeasured requests per target per payload and mode (default 10)")
    parser.add_argument("--concurrency", default="1,8,32",
                        help="throughput: comma-separated concurrency levels (default 1,8,32)")
    parser.add_argument("--window-s", type=float, default=1.0,
                        help="throughput: seconds of one measurement window (default 1.0)")
    parser.add_argument("--throughput-rounds", type=int, default=3,
                        help="throughput: windows per target per row (default 3)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the throughput table")
    parser.add_argument("--no-pruned", action="store_true", help="skip the pruned rows")
    add_history_arguments(parser)
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG,
                        help=f"tools JSON array (default {DEFAULT_CATALOG})")
    parser.add_argument("--workers", type=int, default=1,
                        help="toolprune serve --workers (default 1; >1 starts a redis-server "
                        "for the shared state)")
    parser.add_argument("--proxy-log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="TOOLPRUNE_LOG_LEVEL of the proxy (default info, the default)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    args.histories = [int(h) for h in args.histories.split(",") if h.strip()]
    args.catalogs = [int(c) for c in args.catalogs.split(",") if c.strip()]
    if args.requests < 1 or args.rounds < 1 or args.requests < args.rounds:
        parser.error("need --requests >= --rounds >= 1")
    return args


async def run(args: argparse.Namespace, log_dir: Path) -> None:
    payloads = build_payloads(args.catalog, not args.no_pruned)
    up_port, proxy_port = free_port(), free_port()
    env = clean_env(args.proxy_log_level)
    # The requests rotate through 8 queries: with the query cache on, every pruned request
    # after the first 8 would skip the query embedding that a new user message costs.
    env["TOOLPRUNE_QUERY_CACHE_SIZE"] = "0"
    env["TOOLPRUNE_LATE_TOOLS"] = args.late_tools
    upstream = start_server(
        "upstream", [sys.executable, "-c", UPSTREAM_MAIN, HOST, str(up_port)], up_port, log_dir, env
    )
    servers = [upstream]
    redis = None
    try:
        redis = shared_state(args.workers, env)
        proxy = start_server(
            "proxy",
            [sys.executable, "-m", "proxy.cli.main", "serve", "--host", HOST, "--port",
             str(proxy_port), "--upstream", f"{upstream.origin}/v1",
             *(["--workers", str(args.workers)] if args.workers > 1 else [])],
            proxy_port, log_dir, env,
        )
        servers.append(proxy)
        baseline = None
        if args.baseline is not None:
            baseline_port = free_port()
            baseline = start_checkout_proxy(args.baseline.resolve(), baseline_port,
                                            upstream.origin, log_dir, env)
            servers.append(baseline)
        limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
        timeout = httpx.Timeout(60.0)
        async with (
            httpx.AsyncClient(limits=limits, timeout=timeout) as direct_client,
            httpx.AsyncClient(limits=limits, timeout=timeout) as proxy_client,
        ):
            await wait_ready(direct_client, upstream, "/v1/models")
            await wait_ready(proxy_client, proxy, "/readyz")
            targets = [
                Target("direct", direct_client, upstream.origin + CHAT),
                Target("proxy", proxy_client, proxy.origin + CHAT),
            ]
            load = os.getloadavg()
            print(
                f"toolprune overhead benchmark: python {platform.python_version()}, "
                f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
            )
            print(f"upstream {upstream.origin} (benchmarks.support.upstream), proxy {proxy.origin} "
                  f"(toolprune serve, {args.workers} worker(s), log level "
                  f"{args.proxy_log_level}); bodies: "
                  + ", ".join(f"{p.label} {len(p.body(False, 0)) / 1024:.1f} KiB"
                              for p in payloads if not p.pruned))
            tallies = {p.label: Tally() for p in payloads}
            for payload in [] if args.no_latency else payloads:
                if payload.pruned:
                    took = await wait_pruning(targets[1], payload)
                    print(f"pruning warm-up (catalogue embedding): {took:.1f} s")
                await warm_up(targets, payload, args.warmup, tallies[payload.label])

            phase = time.monotonic()
            latency_rows: list[LatencyRow] = []
            for payload in [] if args.no_latency else payloads:
                latency_rows += await measure_latency(
                    targets, payload, args.requests, args.rounds, tallies[payload.label]
                )
            latency_s = time.monotonic() - phase

            throughput_rows: list[ThroughputRow] = []
            history_targets = list(targets)
            if baseline is not None:
                await wait_ready(proxy_client, baseline, "/readyz")
                history_targets.append(Target("baseline", proxy_client, baseline.origin + CHAT))
            history = [] if args.no_history else await measure_history(
                history_targets, args.catalogs, args.histories, args.history_requests, 3600.0,
                args.ending)
            if not (args.no_throughput or args.no_latency):
                for payload in payloads:
                    for concurrency in args.concurrency:
                        throughput_rows.append(await measure_throughput(
                            targets, payload, concurrency, args.throughput_rounds,
                            args.window_s, tallies[payload.label],
                        ))

            if latency_rows:
                print_latency(latency_rows)
            if history:
                print_history(history, args.ending)
                load = os.getloadavg()
                print(f"load average after the history table {load[0]:.2f} {load[1]:.2f}")
            if throughput_rows:
                print_throughput(throughput_rows, args.window_s, args.throughput_rounds)
            print()
            print(f"latency phase {latency_s:.0f} s, throughput phase "
                  f"{time.monotonic() - phase - latency_s:.0f} s")
            for payload in payloads:
                tally = tallies[payload.label]
                line = f"{payload.label}: {tally.errors} failed requests"
                if payload.pruned:
                    line += (f", {tally.unpruned} proxied responses without {TOOLS_HEADER}, "
                             f"{TOOLS_HEADER} = {', '.join(sorted(tally.tools_header))}")
                print(line)
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolprune-overhead-") as log_dir:
        try:
            asyncio.run(run(args, Path(log_dir)))
        except Failed as error:
            print(f"benchmark failed: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
