"""Upstream HTTP clients compared: requests/s and latency of streamed requests to a fast
upstream, at several concurrencies, one client configuration at a time, in one process.

Run from the repository root::

    PYTHONPATH=. python benchmarks/upstream_clients.py              # ~1 minute
    PYTHONPATH=. python benchmarks/upstream_clients.py --concurrency 32,200

What the proxy's upstream client does per request is measured here alone: send a ~2 KB
POST, read a short SSE response chunk by chunk to its end. The upstream is the load
benchmark's (``benchmarks/load.py``; its own process) with no pause between chunks.
Configurations: httpx ``AsyncClient`` with the pool limits the proxy once had (100
kept-alive connections) and with every connection kept alive, httpx's transport called
directly (no cookie jar, auth or redirect layers), and the proxy's own client (aiohttp's,
as :func:`proxy.http.upstream.create_session` sets it up, read with ``raw_chunks``).
Rounds alternate the order of configurations, since the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import numpy as np

from benchmarks.load import UPSTREAM_MAIN, wait_ready
from benchmarks.processes import HOST, clean_env, free_port, start_server
from config.settings import Settings
from proxy.http.upstream import Upstream, create_session, raw_chunks

BODY = json.dumps({"model": "m", "stream": True, "messages": [
    {"role": "user", "content": "x" * 2000}]}).encode()
HEADERS = {"content-type": "application/json", "authorization": "Bearer k"}

Send = Callable[[str], Awaitable[None]]


def httpx_client(keepalive: int) -> tuple[Send, Callable[[], Awaitable[None]]]:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=keepalive)
    client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60.0))

    async def send(url: str) -> None:
        request = client.build_request("POST", url, content=BODY, headers=HEADERS)
        response = await client.send(request, stream=True)
        try:
            async for _ in response.aiter_raw():
                pass
        finally:
            await response.aclose()

    return send, client.aclose


def httpx_transport() -> tuple[Send, Callable[[], Awaitable[None]]]:
    client = httpx.AsyncClient(timeout=httpx.Timeout(60.0))
    transport = httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    )

    async def send(url: str) -> None:
        request = client.build_request("POST", url, content=BODY, headers=HEADERS)
        response = await transport.handle_async_request(request)
        try:
            async for _ in response.aiter_raw():
                pass
        finally:
            await response.aclose()

    async def close() -> None:
        await transport.aclose()
        await client.aclose()

    return send, close


def proxy_client() -> tuple[Send, Callable[[], Awaitable[None]]]:
    settings = Settings(idle_timeout_s=60.0)
    session = create_session(settings)
    upstream = Upstream(settings, session)
    headers = [(name.encode(), value.encode()) for name, value in HEADERS.items()]

    async def send(url: str) -> None:
        response, _ = await upstream.send("POST", url, headers, BODY)
        try:
            async for _ in raw_chunks(response):
                pass
        finally:
            await response.aclose()

    return send, session.close


CLIENTS: dict[str, Callable[[], tuple[Send, Callable[[], Awaitable[None]]]]] = {
    "httpx AsyncClient, 100 kept alive": lambda: httpx_client(100),
    "httpx AsyncClient, all kept alive": lambda: httpx_client(1000),
    "httpx transport, all kept alive": httpx_transport,
    "proxy's client (aiohttp)": proxy_client,
}


async def window(send: Send, url: str, concurrency: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await send(url)
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def run(args: argparse.Namespace, log_dir: Path) -> None:
    port = free_port()
    upstream = start_server(
        "upstream", [sys.executable, "-c", UPSTREAM_MAIN, HOST, str(port), str(args.chunks), "0"],
        port, log_dir, clean_env("warning"),
    )
    try:
        await wait_ready(upstream, "/v1/models", lambda r: r.status_code == 200)
        url = upstream.origin + "/v1/chat/completions"
        names = list(CLIENTS)
        print(f"{'client':<36}  {'conc':>4}  {'req/s':>7}  {'p50 ms':>7}  {'p99 ms':>7}")
        for concurrency in args.concurrency:
            samples: dict[str, list[float]] = {name: [] for name in names}
            seconds: dict[str, float] = {name: 0.0 for name in names}
            for round_index in range(args.rounds):
                order = names if round_index % 2 == 0 else names[::-1]
                for name in order:
                    send, close = CLIENTS[name]()
                    await window(send, url, concurrency, 0.3)  # opens the connections
                    started = time.perf_counter()
                    samples[name] += await window(send, url, concurrency, args.window_s)
                    seconds[name] += time.perf_counter() - started
                    await close()
            for name in names:
                values = samples[name]
                print(f"{name:<36}  {concurrency:4d}  {len(values) / seconds[name]:7.0f}  "
                      f"{np.percentile(values, 50) * 1000:7.1f}  {np.percentile(values, 99) * 1000:7.1f}")
    finally:
        upstream.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="32,200",
                        help="comma-separated concurrencies (default 32,200)")
    parser.add_argument("--window-s", type=float, default=3.0, help="seconds per window (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="windows per client (default 2)")
    parser.add_argument("--chunks", type=int, default=8, help="SSE chunks per response (default 8)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    with tempfile.TemporaryDirectory(prefix="toolprune-clients-") as log_dir:
        asyncio.run(run(args, Path(log_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
