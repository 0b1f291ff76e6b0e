"""`toolprune serve` as a real process: it serves, and on SIGTERM lets in-flight streams
finish before it exits (graceful shutdown); what the grace period cuts ends with an error
the client can read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.support.servers import free_port
from benchmarks.support.upstream import SSE, Hang
from tests.conftest import RunningUpstream

STARTUP_DEADLINE_S = 60.0


@pytest.fixture
def grace_s() -> str:
    return "20"


@pytest.fixture
def served_proxy(
    upstream: RunningUpstream, grace_s: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {**os.environ, "TOOLPRUNE_SHUTDOWN_GRACE_S": grace_s}
    with (tmp_path / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(port),
             "--upstream", upstream.base_url],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
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


@pytest.mark.parametrize("grace_s", ["0.5"])
def test_sigterm_past_the_grace_period_ends_streams_with_an_error_event_and_answers_503(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, origin = served_proxy
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    never = threading.Event()
    upstream.upstream.script(SSE([first, b"data: [DONE]\n\n"], gate=never, gate_after=1), Hang())
    stream_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    plain_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    plain: dict[str, httpx.Response] = {}

    def post_plain() -> None:
        plain["response"] = httpx.post(origin + "/v1/chat/completions", json=plain_body, timeout=30)

    with httpx.stream("POST", origin + "/v1/chat/completions", json=stream_body, timeout=30) as response:
        chunks = response.iter_raw()
        received = next(chunks)
        waiter = threading.Thread(target=post_plain)
        waiter.start()
        upstream.upstream.wait_for(  # both requests are in flight upstream
            lambda records: sum(r.path.endswith("/chat/completions") for r in records) == 2)
        process.send_signal(signal.SIGTERM)
        received += b"".join(chunks)
    waiter.join(30)
    assert received.startswith(first)
    event = received[len(first):]
    assert event.startswith(b"event: error\ndata: ") and b"[DONE]" not in event
    assert json.loads(event.split(b"data: ", 1)[1])["error"]["code"] == "proxy_shutting_down"
    answer = plain["response"]
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "proxy_shutting_down"
    assert process.wait(20) in (0, -signal.SIGTERM)


def test_every_line_the_server_writes_is_one_json_object(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    process, origin = served_proxy
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(origin + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    process.send_signal(signal.SIGTERM)
    assert process.wait(20) in (0, -signal.SIGTERM)
    lines = (tmp_path / "stderr.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # fails on uvicorn's plain "INFO:" lines
    loggers = {entry["logger"] for entry in entries}
    assert "uvicorn.error" in loggers  # its start-up and shutdown lines
    assert any(name.startswith("toolprune.") for name in loggers)
    assert any(entry["event"] == "Application shutdown complete." for entry in entries)
