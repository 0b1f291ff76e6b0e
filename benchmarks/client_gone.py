"""Clients that leave just before the proxy's first upstream request: does any upstream
round start, or run to its end, for a client that has left? One run, side by side: this
checkout's ``toolprune serve`` and, with ``--baseline DIR``, another checkout's.

Run from the repository root::

    python -m benchmarks.client_gone                       # ~3 minutes
    python -m benchmarks.client_gone --baseline /tmp/main  # + main's proxy, same loops
    python -m benchmarks.client_gone --help

The upstream is the scripted one in its own process (:mod:`benchmarks.support.abort_upstream`:
each request stamped with the monotonic time its first bytes were read): an aborted
request's first round answers after ``--round-s`` seconds with a ``search_tools`` call
(the meta-tool of a catalogue this large), which the proxy hides, runs and follows with a
re-issue, answered after ``--round-s`` too — the 2-second rounds of a model on a busy
local server. Each abort is preceded by a probe: the same kind of request (a distinct
query, so the proxy embeds it; the 117-tool GitHub MCP catalogue, pruned), answered at
once, which measures the time from sending a request to its first upstream request (the
median of the client's last five probes). The abort then sends its request and shuts its
connection (a FIN at once) that time minus an offset after: offsets 0, 1, … 35 ms in turn.
The APIs alternate (chat completions, Responses, Messages; streamed).

Two loops per target: ``one at a time`` (one client, ``--aborts`` aborts, nothing else
running) and ``under load`` (``--aborters`` such clients for ``--load-s`` seconds while
``--load-streams`` clients send streamed chat requests answered at once, the proxy's CPU
busy planning). Then every aborted request's upstream rounds are counted by their
``X-Request-Id``, against the moment its client closed: rounds that started after the
close, re-issues among them (a hidden round for nobody), and those the upstream sent to
their end (the proxy read a round for nobody); and the proxy's ``request`` log lines that
say ``complete: true`` for a client that had left.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.load import start_proxy, wait_pruning, wait_ready
from benchmarks.processes import HOST, Server, clean_env, free_port, start_server
from benchmarks.support.data import REAL_CATALOGS

CATALOG: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
OFFSETS_MS = range(36)
PROBES_KEPT = 5
SETTLE_TIMEOUT_S = 60.0
ASKS = (
    "List the open pull requests of octocat/hello-world that wait for my review",
    "Find issues labelled flaky-test in octocat/spoon-knife and summarise them",
    "Create a branch release-notes in octocat/hello-world from main",
    "Show the latest workflow runs of octocat/linguist that failed",
)


def request_body(api: str, ask: str) -> dict[str, Any]:
    functions = [t["function"] for t in CATALOG]
    if api == "chat":
        return {"model": "m", "messages": [{"role": "user", "content": ask}], "tools": CATALOG,
                "stream": True}
    if api == "responses":
        return {"model": "m", "input": ask, "stream": True,
                "tools": [{"type": "function", **f} for f in functions]}
    tools = [{"name": f["name"], "description": f.get("description", ""),
              "input_schema": f["parameters"]} for f in functions]
    return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": ask}],
            "tools": tools, "stream": True}


@dataclass
class Abort:
    request_id: str
    api: str
    offset_ms: int
    closed_at: float


class Client:
    """Raw HTTP/1.1 requests to one proxy, one connection each (``Connection: close``)."""

    def __init__(self, port: int, upstream: str, http: httpx.AsyncClient) -> None:
        self.port, self.upstream, self.http = port, upstream, http
        self.count = itertools.count()

    def request(self, api: str, kind: str, request_id: str) -> bytes:
        ask = f"{ASKS[next(self.count) % len(ASKS)]} (request {request_id[:8]})"
        body = json.dumps(request_body(api, ask)).encode()
        head = (f"POST {PATHS[api]} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\nX-Bench: {kind}\r\nX-Request-Id: {request_id}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        return head + body

    async def served(self, api: str, kind: str) -> tuple[str, float, bool]:
        """Send one request answered at once and read it to the end: its id, when it was
        sent (``time.monotonic()``), whether it got a 200."""
        request_id = uuid.uuid4().hex
        reader, writer = await asyncio.open_connection(HOST, self.port)
        sent_at = time.monotonic()
        writer.write(self.request(api, kind, request_id))
        answer = await reader.read()
        writer.close()
        return request_id, sent_at, answer.startswith(b"HTTP/1.1 200")

    async def first_round_at(self, request_id: str) -> float | None:
        rounds = (await self.http.get(self.upstream + "/records", params={"id": request_id})).json()
        return rounds[0]["arrived_at"] if rounds else None

    async def abort_loop(self, apis: list[str], aborts: int | None, until: float | None,
                         found: list[Abort]) -> None:
        """Probe, then abort with the next offset; ``aborts`` times, or until ``until``."""
        latencies: deque[float] = deque(maxlen=PROBES_KEPT)
        offsets = itertools.cycle(OFFSETS_MS)
        for n in itertools.count():
            if (aborts is not None and n >= aborts) or (until is not None and time.monotonic() >= until):
                return
            api = apis[n % len(apis)]
            probe_id, sent_at, ok = await self.served(api, "probe")
            first = await self.first_round_at(probe_id)
            if ok and first is not None:
                latencies.append(first - sent_at)
            if not latencies:
                continue
            offset = next(offsets)
            request_id = uuid.uuid4().hex
            _, writer = await asyncio.open_connection(HOST, self.port)
            writer.write(self.request(api, "abort", request_id))
            await asyncio.sleep(max(0.0, statistics.median(latencies) - offset / 1000))
            # The FIN leaves now (a transport's close sends it an iteration later).
            writer.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
            found.append(Abort(request_id, api, offset, time.monotonic()))
            writer.close()

    async def load_loop(self, until: float) -> None:
        while time.monotonic() < until:
            await self.served("chat", "load")


@dataclass
class Outcome:
    target: str
    mode: str
    aborted: int = 0
    first_before_close: int = 0
    started_after: int = 0
    reissued_after: int = 0
    read_to_end: int = 0
    logged_complete: int = 0


def request_lines(log_path: Path) -> dict[str, dict[str, Any]]:
    """The proxy's ``request`` log lines by request id."""
    lines: dict[str, dict[str, Any]] = {}
    for text in log_path.read_text(errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event") == "request":
            lines[str(line.get("request_id"))] = line
    return lines


async def outcome(target: str, mode: str, aborts: list[Abort], upstream: str,
                  server: Server, http: httpx.AsyncClient) -> Outcome:
    """Wait until every aborted request has its ``request`` line (it ended), then count."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    wanted = {abort.request_id for abort in aborts}
    while not wanted <= set(lines := request_lines(server.log_path)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted - set(lines))} aborted requests never ended")
        await asyncio.sleep(0.2)
    rounds: dict[str, list[dict[str, Any]]] = {}
    for record in (await http.get(upstream + "/records")).json():
        rounds.setdefault(record["id"] or "", []).append(record)
    result = Outcome(target, mode, aborted=len(aborts))
    for abort in aborts:
        mine = [r for r in rounds.get(abort.request_id, []) if r["path"] == PATHS[abort.api]]
        after = [r for r in mine if r["arrived_at"] > abort.closed_at]
        result.first_before_close += bool(mine) and mine[0]["arrived_at"] <= abort.closed_at
        result.started_after += len(after)
        result.reissued_after += sum(r["reissue"] for r in after)
        result.read_to_end += sum(r["completed"] for r in after)
        result.logged_complete += bool(lines[abort.request_id].get("complete"))
    return result


def print_table(results: list[Outcome]) -> None:
    print()
    print("| loop | target | aborted | first round before the close | rounds started after "
          "the close | re-issues among them | rounds read to their end after the close | "
          "logged `complete: true` |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.mode} | {r.target} | {r.aborted} | {r.first_before_close} | "
              f"{r.started_after} | {r.reissued_after} | {r.read_to_end} | {r.logged_complete} |")


async def run(args: argparse.Namespace, log_dir: Path) -> None:
    env = clean_env("info")
    up_port = free_port()
    servers = [start_server(
        "upstream", [sys.executable, "-m", "benchmarks.support.abort_upstream", str(up_port),
                     str(args.round_s)], up_port, log_dir, env)]
    upstream = servers[0].origin
    targets: dict[str, tuple[int, Server]] = {}
    launch = argparse.Namespace(workers=1)
    try:
        await wait_ready(servers[0], "/v1/models", lambda r: r.status_code == 200)
        for name, root in (("proxy", None), ("baseline", args.baseline)):
            if name == "baseline" and root is None:
                continue
            port = free_port()
            servers.append(start_proxy(name, port, upstream, launch, log_dir, env,
                                       root=root.resolve() if root is not None else None))
            targets[name] = (port, servers[-1])
        for _, server in targets.values():
            await wait_ready(server, "/readyz", lambda r: r.status_code == 200)
            await wait_pruning(server.origin, json.dumps(request_body("chat", ASKS[0])).encode())
        load = os.getloadavg()
        print(f"toolprune client_gone benchmark: python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"rounds of aborted requests: {args.round_s:g} s; APIs {', '.join(args.apis)}; "
              f"closes 0–35 ms before the probed first upstream request")
        results: list[Outcome] = []
        async with httpx.AsyncClient(timeout=60) as http:
            for name, (port, server) in targets.items():
                aborts: list[Abort] = []
                await Client(port, upstream, http).abort_loop(args.apis, args.aborts, None, aborts)
                results.append(await outcome(name, "one at a time", aborts, upstream, server, http))
            for name, (port, server) in targets.items():
                client = Client(port, upstream, http)
                aborts = []
                until = time.monotonic() + args.load_s
                await asyncio.gather(
                    *(client.load_loop(until) for _ in range(args.load_streams)),
                    *(client.abort_loop(args.apis, None, until, aborts) for _ in range(args.aborters)),
                )
                mode = f"under load ({args.load_streams} streams, {args.load_s:g} s)"
                results.append(await outcome(name, mode, aborts, upstream, server, http))
        print_table(results)
    except BaseException:
        for server in servers:
            print(f"--- {server.name} log tail ---\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        for server in reversed(servers):
            server.stop()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aborts", type=int, default=108,
                        help="aborts of the one-at-a-time loop (default 108: each offset 3 times)")
    parser.add_argument("--aborters", type=int, default=4,
                        help="abort clients under load (default 4)")
    parser.add_argument("--load-streams", type=int, default=8,
                        help="clients sending streamed chat requests meanwhile (default 8)")
    parser.add_argument("--load-s", type=float, default=50.0,
                        help="seconds of the loop under load (default 50)")
    parser.add_argument("--round-s", type=float, default=2.0,
                        help="seconds the upstream takes per round of an aborted request (default 2)")
    parser.add_argument("--apis", default="chat,responses,messages",
                        help="APIs the aborted requests take in turn (default all three)")
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="also run the proxy of another checkout of the repository "
                        "(e.g. `git worktree add DIR main`) as target `baseline`")
    args = parser.parse_args(argv)
    args.apis = [api for api in args.apis.split(",") if api in PATHS]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolprune-client-gone-") as log_dir:
        asyncio.run(run(args, Path(log_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
