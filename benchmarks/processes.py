"""Servers that benchmarks run as separate processes on loopback (so client, proxy and
upstream do not share one GIL), with their output kept in a log file."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.redis_server import RedisServer
from benchmarks.support.servers import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

__all__ = [
    "HOST", "REPO_ROOT", "Server", "clean_env", "free_port", "shared_state",
    "start_checkout_proxy", "start_server",
]


@dataclass
class Server:
    """A server process, its log file and its origin (``http://HOST:PORT``)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    origin: str

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate (kill after 20 s) and reap the process."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_server(
    name: str, argv: list[str], port: int, log_dir: Path, env: dict[str, str],
    cwd: Path = REPO_ROOT,
) -> Server:
    """Start ``argv`` in ``cwd`` (the repository root), output to ``log_dir/NAME.log``."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Server(name, process, log_path, f"http://{HOST}:{port}")


def clean_env(log_level: str = "info") -> dict[str, str]:
    """The environment without any TOOLPRUNE_* setting of the caller's, so defaults apply,
    and with the repository importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPRUNE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TOOLPRUNE_LOG_LEVEL"] = log_level
    return env


def shared_state(workers: int, env: dict[str, str]) -> RedisServer | None:
    """For a proxy of more than one worker, a started redis-server for their shared state,
    its URL put in ``env`` as ``TOOLPRUNE_STATE_URL`` (the caller closes it); None for one
    worker. Raises RuntimeError when no ``redis-server`` is installed."""
    if workers <= 1:
        return None
    redis = RedisServer()
    redis.start()
    env["TOOLPRUNE_STATE_URL"] = redis.url
    return redis


def start_checkout_proxy(
    root: Path, port: int, upstream: str, log_dir: Path, env: dict[str, str], name: str = "baseline"
) -> Server:
    """``toolprune serve`` of the checkout at ``root`` (its code first on the path), in front
    of the upstream at origin ``upstream``."""
    paths = [p for p in env["PYTHONPATH"].split(os.pathsep) if p != str(REPO_ROOT)]
    return start_server(
        name,
        [sys.executable, "-m", "proxy.cli.main", "serve", "--host", HOST, "--port", str(port),
         "--upstream", f"{upstream}/v1"],
        port, log_dir, {**env, "PYTHONPATH": os.pathsep.join([str(root), *paths])}, cwd=root,
    )
