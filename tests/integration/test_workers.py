"""``toolprune serve --workers N``: worker processes share the port and, through a real
``redis-server``, each conversation's state, so a conversation's loads hold whichever
worker serves its next turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer, redis_server
from benchmarks.support.servers import free_port
from benchmarks.support.upstream import Chat
from tests.conftest import RunningUpstream

pytestmark = [pytest.mark.redis, pytest.mark.skipif(REDIS_SERVER is None, reason=SKIP_REASON)]

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
LOADED = "browser_sessionstorage_delete"
CHAT = "/v1/chat/completions"
STARTUP_DEADLINE_S = 120.0
TURNS = 10


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def serve(
    upstream: RunningUpstream, *args: str, capture: bool = False, **env: str
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(port),
         "--upstream", upstream.base_url, *args],
        env={**os.environ, "TOOLPRUNE_INDEX_TIMEOUT_S": "300", **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if capture else subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def workers(upstream: RunningUpstream, redis: RedisServer) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    process, origin = serve(upstream, "--workers", "2", TOOLPRUNE_STATE_URL=redis.url)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    try:
        while True:
            try:
                if httpx.get(origin + "/healthz").status_code == 200 and len(children(process.pid)) >= 2:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "toolprune serve --workers 2 exited during start-up"
            assert time.monotonic() < deadline, "toolprune serve --workers 2 did not start"
            time.sleep(0.1)
        yield process, origin
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def forwarded(upstream: RunningUpstream) -> list[str]:
    last = [r for r in upstream.upstream.requests if r.path.endswith(CHAT)][-1]
    return [tool["function"]["name"] for tool in last.json()["tools"]]


def turn(origin: str) -> None:
    """One turn on a new connection (the kernel hands it to either worker)."""
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    response = httpx.post(origin + CHAT, json=body, headers={"X-Conversation-Id": "w"}, timeout=300)
    assert response.status_code == 200, response.text


def test_workers_share_conversation_state_through_redis(
    upstream: RunningUpstream, workers: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, origin = workers
    assert len(children(process.pid)) >= 2
    call = {"id": "meta_1", "name": "load_tools", "arguments": json.dumps({"names": [LOADED]})}
    upstream.upstream.script(Chat(content=None, tool_calls=[call]), Chat(content="loaded"))
    turn(origin)
    assert LOADED in forwarded(upstream)
    for _ in range(TURNS):
        turn(origin)
        assert LOADED in forwarded(upstream)


def test_workers_without_redis_refuse_to_start(upstream: RunningUpstream) -> None:
    process, _ = serve(upstream, "--workers", "2", capture=True, TOOLPRUNE_STATE_URL="")
    assert process.wait(60) == 2
    assert process.stderr is not None and b"TOOLPRUNE_STATE_URL" in process.stderr.read()
