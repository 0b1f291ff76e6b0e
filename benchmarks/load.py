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
length, recurs every stream length. The upstream (its own process, below) streams
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
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httptools
import httpx
import numpy as np

from benchmarks.processes import (
    HOST, REPO_ROOT, Server, clean_env, free_port, shared_state, start_server,
)
from benchmarks.support.data import REAL_CATALOGS

DEFAULT_CATALOG = REAL_CATALOGS / "github_mcp_server.json"
CHAT = "/v1/chat/completions"
STARTUP_TIMEOUT_S = 240.0
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: A minimal OpenAI-compatible streaming upstream (raw ASGI under uvicorn): reads the body,
#: then streams ``chunks`` chat.completion.chunk events ``interval`` seconds apart and
#: ``[DONE]``; ``GET /v1/models`` answers for readiness.
UPSTREAM_MAIN = r"""
import asyncio, json, sys
import uvicorn

HOST, PORT, CHUNKS, INTERVAL = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])

def event(delta, finish=None):
    chunk = {"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0,
             "model": "load", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"

FIRST = event({"role": "assistant", "content": ""})
TOKEN = event({"content": "tok "})
LAST = event({}, "stop") + b"data: [DONE]\n\n"
MODELS = json.dumps({"object": "list", "data": [{"id": "load", "object": "model"}]}).encode()

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        more = message.get("more_body", False)
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": MODELS})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": FIRST, "more_body": True})
    for _ in range(CHUNKS):
        await asyncio.sleep(INTERVAL)
        await send({"type": "http.response.body", "body": TOKEN, "more_body": True})
    await send({"type": "http.response.body", "body": LAST})

uvicorn.run(app, host=HOST, port=PORT, log_level="warning", access_log=False,
            backlog=4096, timeout_keep_alive=60)
"""

#: The least a Python proxy on the product's stack does per request (``--floor``): raw ASGI
#: under uvicorn's httptools protocol, the body read and sent upstream by one aiohttp
#: session, the answer relayed chunk by chunk. No routing, middleware, headers or checks.
FLOOR_MAIN = r"""
import sys
import aiohttp, uvicorn

HOST, PORT, UPSTREAM = sys.argv[1], int(sys.argv[2]), sys.argv[3]
session = None

async def app(scope, receive, send):
    global session
    if scope["type"] != "http":
        return
    if session is None:
        session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    async with session.request(scope["method"], UPSTREAM + scope["path"], data=body,
                               headers={"content-type": "application/json"}) as response:
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(b"content-type", response.headers.get("content-type", "").encode())]})
        async for chunk in response.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})

uvicorn.run(app, host=HOST, port=PORT, log_level="warning", access_log=False, http="httptools",
            backlog=4096, timeout_keep_alive=60)
"""

QUERIES = [
    "List the open pull requests in octocat/hello-world and show me the failing checks.",
    "Create an issue in acme/api titled 'Login fails on Safari' and label it bug.",
    "What changed in the last three commits on the main branch of acme/web?",
    "Search the code of acme/api for uses of the deprecated fetch_user function.",
    "Re-run the failed jobs of the latest workflow run in acme/infra.",
    "Who reviewed pull request 42 in acme/web, and were there requested changes?",
    "Get the contents of README.md on the develop branch of acme/docs.",
    "Show the Dependabot alerts for acme/api sorted by severity.",
]


class Requests:
    """The raw requests of one window: every request's query is distinct (one of
    ``QUERIES`` with the window, client and request number in its one sentence), so the
    proxy's query cache answers none of them and every request's query is embedded."""

    PLACEHOLDER = "\u0000query\u0000"

    def __init__(self, catalog: Path | None, host: str, port: int, window: int) -> None:
        """``catalog``: the tools JSON array every request sends; None: no ``tools`` (the
        proxy passes such a request through unchanged)."""
        body = json.dumps({
            "model": "load",
            "stream": True,
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": self.PLACEHOLDER},
            ],
            **({"tools": json.loads(catalog.read_text())} if catalog is not None else {}),
        })
        self._before, self._after = body.split(json.dumps(self.PLACEHOLDER), 1)
        self._host, self._port, self._window = host, port, window

    def query(self, client: int, i: int) -> str:
        return f"For ticket {self._window}-{client}-{i}: {QUERIES[(client + i) % len(QUERIES)]}"

    def body(self, client: int, i: int) -> bytes:
        return (self._before + json.dumps(self.query(client, i)) + self._after).encode()

    def request(self, client: int, i: int) -> bytes:
        body = self.body(client, i)
        head = (
            f"POST {CHAT} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: application/json\r\nX-Conversation-Id: load-{client}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


# --- one streaming client ----------------------------------------------------------------
class _Response:
    """httptools callbacks for one response: status, first body byte, end, [DONE] seen."""

    def __init__(self) -> None:
        self.status = 0
        self.first: float | None = None
        self.complete = False
        self.tail = b""
        self.keep_alive = True

    def on_status(self, status: bytes) -> None:
        pass

    def on_body(self, body: bytes) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.tail = (self.tail + body)[-64:]

    def on_message_complete(self) -> None:
        self.complete = True


@dataclass
class Samples:
    """Latencies (seconds) of the streams sent in a measured interval."""

    first: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


async def client_loop(
    host: str, port: int, requests: Requests, client: int, start: float,
    measure_from: float, deadline: float, samples: Samples,
) -> None:
    """From ``start`` to ``deadline`` (perf_counter), send streaming requests one after
    another; the latencies of those sent from ``measure_from`` on are kept."""
    await asyncio.sleep(max(0.0, start - time.perf_counter()))
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    i = 0
    while time.perf_counter() < deadline:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
            assert reader is not None
            response = _Response()
            parser = httptools.HttpResponseParser(response)
            started = time.perf_counter()
            writer.write(requests.request(client, i))
            i += 1
            while not response.complete:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("closed mid-response")
                parser.feed_data(data)
            end = time.perf_counter()
            status = parser.get_status_code()
            if status != 200:
                samples.fail(f"http {status}")
            elif b"[DONE]" not in response.tail or response.first is None:
                samples.fail("no [DONE]")
            elif measure_from <= started:
                samples.first.append(response.first - started)
                samples.total.append(end - started)
            if not parser.should_keep_alive():
                writer.close()
                writer = None
        except (OSError, ConnectionError, httptools.HttpParserError) as error:
            samples.fail(type(error).__name__)
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


# --- process sampling ---------------------------------------------------------------------
def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def rss_and_fds(pid: int) -> tuple[float, int]:
    """Resident MiB and open fds, summed over ``pid``'s process tree."""
    rss_pages, fds = 0, 0
    for member in process_tree(pid):
        try:
            with open(f"/proc/{member}/statm") as statm:
                rss_pages += int(statm.read().split()[1])
            fds += len(os.listdir(f"/proc/{member}/fd"))
        except (OSError, ValueError, IndexError):
            continue
    return rss_pages * PAGE_SIZE / 2**20, fds


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds so far, summed over ``pid``'s process tree (0 for None)."""
    ticks = 0
    for member in process_tree(pid) if pid is not None else []:
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14, 15)
        except (OSError, ValueError, IndexError):
            continue
    return ticks / CLOCK_TICKS


@dataclass
class Peak:
    rss_mib: float = 0.0
    fds: int = 0


async def sample_peak(pid: int | None, peak: Peak, stop: asyncio.Event) -> None:
    while pid is not None and not stop.is_set():
        rss, fds = rss_and_fds(pid)
        peak.rss_mib, peak.fds = max(peak.rss_mib, rss), max(peak.fds, fds)
        try:
            async with asyncio.timeout(0.25):
                await stop.wait()
        except TimeoutError:
            pass


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
