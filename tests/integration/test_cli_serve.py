"""`toolprune serve` as a real process: it serves, and on SIGTERM lets in-flight streams
finish before it exits (graceful shutdown)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningUpstream
from tests.support.servers import free_port
from tests.support.upstream import SSE

STARTUP_DEADLINE_S = 60.0


@pytest.fixture
def served_proxy(upstream: RunningUpstream) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {**os.environ, "TOOLPRUNE_SHUTDOWN_GRACE_S": "20"}
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(port), "--upstream", upstream.base_url],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    origin = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while True:
        try:
            if httpx.get(origin + "/healthz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert process.poll() is None, "toolprune serve exited during start-up"
        assert time.monotonic() < deadline, "toolprune serve did not start"
        time.sleep(0.05)
    try:
        yield process, origin
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_sigterm_lets_an_in_flight_stream_finish(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, origin = served_proxy
    gate = threading.Event()
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    upstream.upstream.script(SSE([first, b"data: [DONE]\n\n"], gate=gate, gate_after=1))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", origin + "/v1/chat/completions", json=body, timeout=30) as response:
        chunks = response.iter_raw()
        received = next(chunks)
        process.send_signal(signal.SIGTERM)
        gate.set()
        received += b"".join(chunks)
    assert received == first + b"data: [DONE]\n\n"
    assert process.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
