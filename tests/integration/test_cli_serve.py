"""`toolprune serve` as a real process: it serves, and on SIGTERM lets in-flight streams
finish before it exits (graceful shutdown); what the grace period cuts ends with an error
the client can read. The tests wait on events (the lines the server writes, the requests
the upstream records, the process's exit), never on elapsed time: a loaded machine makes
them slower, not wrong."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

from benchmarks.support.servers import free_port
from benchmarks.support.upstream import SSE, Hang
from tests.conftest import RunningUpstream

#: A bound on a hang, not a timing: every wait below is for an event (a line the server
#: writes, a request the upstream records, the process's exit); this only stops a test whose
#: event never comes from blocking the run.
HANG_GUARD_S = 600.0


def event_of(line: str) -> str:
    """The ``event`` of one of the server's JSON lines ("" for any other line)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return ""
    return str(entry.get("event", "")) if isinstance(entry, dict) else ""


class ServerLines:
    """The JSON lines ``toolprune serve`` writes to stderr, read as they come (a thread),
    so a test waits for the line that says the server reached a state."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            with self._changed:
                self.lines.append(raw.decode())
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, event: str) -> None:
        """Until the server writes a line whose event starts with ``event``; fails when it
        exits first (or hangs past :data:`HANG_GUARD_S`)."""
        def seen() -> bool:
            return any(event_of(line).startswith(event) for line in self.lines)

        with self._changed:
            self._changed.wait_for(lambda: seen() or self._ended, HANG_GUARD_S)
            assert seen(), f"toolprune serve never wrote {event!r}: {''.join(self.lines)[-3000:]}"


@pytest.fixture
def grace_s() -> str:
    return str(HANG_GUARD_S)  # no stream of these tests is cut unless one asks for it


@pytest.fixture
def served_proxy(
    upstream: RunningUpstream, grace_s: str
) -> Iterator[tuple[subprocess.Popen[bytes], str, ServerLines]]:
    """``toolprune serve`` in front of the scripted upstream, once it is ready: uvicorn
    listens and the embedder is loaded (its own lines say so)."""
    port = free_port()
    env = {**os.environ, "TOOLPRUNE_SHUTDOWN_GRACE_S": grace_s}
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(port),
         "--upstream", upstream.base_url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    lines = ServerLines(process)
    try:
        lines.wait_for("Uvicorn running on")
        lines.wait_for("embedder_loaded")
        yield process, f"http://127.0.0.1:{port}", lines
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(HANG_GUARD_S)


def test_sigterm_lets_an_in_flight_stream_finish(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str, ServerLines]
) -> None:
    """The stream is released only once the server says it is waiting for it: the shutdown
    always begins with the stream in flight, whatever the machine's load."""
    process, origin, lines = served_proxy
    gate = threading.Event()
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    upstream.upstream.script(SSE([first, b"data: [DONE]\n\n"], gate=gate, gate_after=1))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", origin + "/v1/chat/completions", json=body,
                      timeout=HANG_GUARD_S) as response:
        chunks = response.iter_raw()
        received = next(chunks)
        process.send_signal(signal.SIGTERM)
        lines.wait_for("Waiting for connections to close")
        gate.set()
        received += b"".join(chunks)
    assert received == first + b"data: [DONE]\n\n"
    assert process.wait(HANG_GUARD_S) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled


@pytest.mark.parametrize("grace_s", ["0.5"])
def test_sigterm_past_the_grace_period_ends_streams_with_an_error_event_and_answers_503(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str, ServerLines]
) -> None:
    process, origin, _ = served_proxy
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    never = threading.Event()
    upstream.upstream.script(SSE([first, b"data: [DONE]\n\n"], gate=never, gate_after=1), Hang())
    stream_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    plain_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    plain: dict[str, httpx.Response] = {}

    def post_plain() -> None:
        plain["response"] = httpx.post(origin + "/v1/chat/completions", json=plain_body,
                                       timeout=HANG_GUARD_S)

    with httpx.stream("POST", origin + "/v1/chat/completions", json=stream_body,
                      timeout=HANG_GUARD_S) as response:
        chunks = response.iter_raw()
        received = next(chunks)
        waiter = threading.Thread(target=post_plain)
        waiter.start()
        upstream.upstream.wait_for(  # both in flight upstream (not the proxy's own /props…)
            lambda records: sum(r.path.endswith("/chat/completions") for r in records) == 2,
            HANG_GUARD_S)
        process.send_signal(signal.SIGTERM)
        received += b"".join(chunks)
    waiter.join(HANG_GUARD_S)
    assert received.startswith(first)
    event = received[len(first):]
    assert event.startswith(b"event: error\ndata: ") and b"[DONE]" not in event
    assert json.loads(event.split(b"data: ", 1)[1])["error"]["code"] == "proxy_shutting_down"
    answer = plain["response"]
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "proxy_shutting_down"
    assert process.wait(HANG_GUARD_S) in (0, -signal.SIGTERM)


def test_every_line_the_server_writes_is_one_json_object(
    upstream: RunningUpstream, served_proxy: tuple[subprocess.Popen[bytes], str, ServerLines]
) -> None:
    process, origin, lines = served_proxy
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(origin + "/v1/chat/completions", json=body,
                      timeout=HANG_GUARD_S).status_code == 200
    process.send_signal(signal.SIGTERM)
    assert process.wait(HANG_GUARD_S) in (0, -signal.SIGTERM)
    lines.wait_for("Finished server process")
    entries = [json.loads(line) for line in lines.lines]  # fails on uvicorn's plain "INFO:" lines
    loggers = {entry["logger"] for entry in entries}
    assert "uvicorn.error" in loggers  # its start-up and shutdown lines
    assert any(name.startswith("toolprune.") for name in loggers)
    assert any(entry["event"] == "Application shutdown complete." for entry in entries)
