"""A real ``redis-server`` process on a free loopback port, for tests and benchmarks.

No persistence (``--save "" --appendonly no``), its own temporary working directory, and
readiness checked by sending ``PING`` until ``+PONG`` comes back (bounded polling). The
server can be killed, restarted on the same port (empty, as nothing is persisted), paused
(SIGSTOP: a Redis that accepts connections but never answers) and resumed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.support.servers import free_port

REDIS_SERVER = shutil.which("redis-server")
SKIP_REASON = (
    "redis-server is not on PATH (Debian: apt-get install -y redis-server; .ci/run installs it)"
)
READY_TIMEOUT_S = 10.0
_POLL_S = 0.01


def ping(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """Whether a Redis on ``host:port`` answers PING with PONG."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` child process; :meth:`start` it (or use :func:`redis_server`)."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        if REDIS_SERVER is None:
            raise RuntimeError(SKIP_REASON)
        self.host = host
        self.port = port or free_port(host)
        self._dir = Path(tempfile.mkdtemp(prefix="toolprune-redis-"))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start on ``self.port`` and return once it answers PING (bounded wait)."""
        assert not self.running, "already running"
        assert REDIS_SERVER is not None
        self._process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                self.host,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._dir),
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
                "--logfile",
                str(self._dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ping(self.port, self.host):
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"redis-server on port {self.port} exited ({self._process.returncode}): "
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"redis-server on port {self.port} did not answer PING")
            time.sleep(_POLL_S)

    def kill(self) -> None:
        """SIGKILL (a crash: no shutdown, no save) and wait for the process to be gone."""
        if self._process is not None:
            if self._process.poll() is None:
                os.kill(self._process.pid, signal.SIGCONT)  # a paused process dies too
                self._process.kill()
            self._process.wait(timeout=10)
            self._process = None

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, nothing is answered."""
        assert self._process is not None and self.running
        os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self._process is not None and self.running
        os.kill(self._process.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Start again on the same port (empty: nothing is persisted)."""
        self.kill()
        self.start()

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return (self._dir / "redis.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A started server on a free loopback port, killed and cleaned up on exit."""
    last_error: Exception | None = None
    for _ in range(3):  # the free port may be taken between picking and binding it
        server = RedisServer()
        try:
            server.start()
        except (RuntimeError, TimeoutError) as error:
            server.close()
            last_error = error
            continue
        try:
            yield server
        finally:
            server.close()
        return
    raise RuntimeError(f"could not start redis-server: {last_error}")
