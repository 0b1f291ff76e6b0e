"""Run ASGI apps under a real uvicorn server on loopback, in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

STARTUP_TIMEOUT_SECONDS = 10.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0
GRACEFUL_SHUTDOWN_SECONDS = 1.0
_STARTUP_POLL_SECONDS = 0.01


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_in_thread(app: ASGIApp, *, host: str = "127.0.0.1", **config: object) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yield its origin ``http://host:port``.

    The listening socket is bound here and handed to uvicorn, so there is no race between
    picking a port and binding it. Returns only once uvicorn reports ``started`` (bounded
    wait) and, on exit, asks the server to stop and joins its thread. ``config``: further
    ``uvicorn.Config`` options.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **config,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"uvicorn on {host}:{port} exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"uvicorn on {host}:{port} did not start")
            time.sleep(_STARTUP_POLL_SECONDS)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_TIMEOUT_SECONDS)
        sock.close()
