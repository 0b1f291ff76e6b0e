"""deploy/try-local.sh checks its two ports before it builds or starts anything: with the
README's set-up proxy still on 8088, it stops at once and says what to do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("busy", ["LLAMA_PORT", "TOOLPRUNE_PORT"])
def test_a_busy_port_stops_try_local_before_anything_starts(busy: str, tmp_path: Path):
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        ports = {"LLAMA_PORT": str(free), "TOOLPRUNE_PORT": str(free), busy: str(port)}
        env = {**os.environ, **ports, "PYTHON": sys.executable,
               # A build would show up here: the llama cache must stay untouched.
               "TOOLPRUNE_LLAMA_CACHE": str(tmp_path / "llama-cache")}
        done = subprocess.run(["bash", "deploy/try-local.sh"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr
    assert "toolprune serve" in done.stderr and "TOOLPRUNE_PORT=8089" in done.stderr
    assert not (tmp_path / "llama-cache").exists()
