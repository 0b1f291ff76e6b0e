"""The requests of ``benchmarks/overhead.py``: the payloads (no tools, the catalogue with
pruning off, the catalogue pruned), one plain or streamed request to a target, timed, and
the checks every answer must pass (200, the pruning header where pruning is on, a stream
that ends with ``[DONE]``)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.load_clients import QUERIES

TOOLS_HEADER = "x-tool-pruning-tools"
INDEX_HEADER = "x-tool-pruning-index"
STARTUP_TIMEOUT_S = 180.0


@dataclass
class Payload:
    label: str
    bodies: dict[bool, list[bytes]]  # stream? -> bodies rotated through
    headers: dict[str, str]
    pruned: bool = False

    def body(self, stream: bool, index: int) -> bytes:
        bodies = self.bodies[stream]
        return bodies[index % len(bodies)]


def build_payloads(catalog_path: Path, with_pruned: bool) -> list[Payload]:
    tools = json.loads(catalog_path.read_text())

    def bodies(with_tools: bool) -> dict[bool, list[bytes]]:
        result: dict[bool, list[bytes]] = {}
        for stream in (False, True):
            result[stream] = []
            for query in QUERIES:
                body: dict[str, object] = {
                    "model": "test-model",
                    "messages": [
                        {"role": "system", "content": "You are a helpful assistant."},
                        {"role": "user", "content": query},
                    ],
                    "max_tokens": 64,
                }
                if with_tools:
                    body["tools"] = tools
                if stream:
                    body["stream"] = True
                result[stream].append(json.dumps(body).encode())
        return result

    json_header = {"content-type": "application/json"}
    with_tools = bodies(True)
    payloads = [
        Payload("no tools", bodies(False), json_header),
        Payload(f"{len(tools)} tools, off", with_tools, {**json_header, "x-tool-pruning": "off"}),
    ]
    if with_pruned:
        payloads.append(Payload(f"{len(tools)} tools, pruned", with_tools, json_header, True))
    return payloads


# --- requests ----------------------------------------------------------------------------
@dataclass
class Target:
    name: str  # "direct" or "proxy"
    client: httpx.AsyncClient
    url: str


@dataclass
class Tally:
    """Failures seen while measuring (any non-200, missing pruning header, cut stream)."""

    errors: int = 0
    unpruned: int = 0
    tools_header: set[str] = field(default_factory=set)


class Failed(Exception):
    pass


def check(target: Target, payload: Payload, response: httpx.Response, tally: Tally) -> None:
    if response.status_code != 200:
        tally.errors += 1
        raise Failed(f"{target.name} {payload.label}: HTTP {response.status_code}")
    if payload.pruned and target.name == "proxy":
        value = response.headers.get(TOOLS_HEADER)
        if value is None:
            tally.unpruned += 1
        else:
            tally.tools_header.add(value)


async def plain_request(target: Target, payload: Payload, index: int, tally: Tally) -> float:
    """Seconds until the whole response was read."""
    started = time.perf_counter()
    response = await target.client.post(
        target.url, content=payload.body(False, index), headers=payload.headers
    )
    elapsed = time.perf_counter() - started
    check(target, payload, response, tally)
    return elapsed


async def stream_request(
    target: Target, payload: Payload, index: int, tally: Tally
) -> tuple[float, float]:
    """Seconds until the first body byte and until the end of the stream."""
    started = time.perf_counter()
    first = None
    tail = b""
    async with target.client.stream(
        "POST", target.url, content=payload.body(True, index), headers=payload.headers
    ) as response:
        async for chunk in response.aiter_raw():
            if first is None and chunk:
                first = time.perf_counter()
            tail = (tail + chunk)[-64:]
        end = time.perf_counter()
    check(target, payload, response, tally)
    if first is None or b"[DONE]" not in tail:
        tally.errors += 1
        raise Failed(f"{target.name} {payload.label}: stream ended without [DONE]")
    return first - started, end - started


async def warm_up(targets: list[Target], payload: Payload, count: int, tally: Tally) -> None:
    for target in targets:
        for i in range(count):
            await plain_request(target, payload, i, tally)
            await stream_request(target, payload, i, tally)


async def wait_pruning(proxy: Target, payload: Payload) -> float:
    """Send pruned requests until one comes back pruned by the catalogue's dense index (not
    ranked by BM25 while the index is still being built in the background)."""
    started = time.monotonic()
    deadline = started + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        response = await proxy.client.post(
            proxy.url, content=payload.body(False, 0), headers=payload.headers, timeout=300
        )
        if (response.status_code == 200 and TOOLS_HEADER in response.headers
                and INDEX_HEADER not in response.headers):
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    raise TimeoutError(f"no response carried {TOOLS_HEADER} within {STARTUP_TIMEOUT_S} s")


def ordered(targets: list[Target], round_index: int) -> list[Target]:
    return targets if round_index % 2 == 0 else targets[::-1]
