"""An httpx transport over several connection pools, for many concurrent upstream requests.

httpcore's connection pool re-examines every connection it holds each time a request
starts or ends (``_assign_requests_to_connections``: an idle and expiry check per
connection, each a socket readability probe), so its cost per request grows with the
connections open: at 32 concurrent streams to one upstream it held the proxy to ~30
requests/s (``benchmarks/upstream_clients.py``). Spreading requests over ``shards``
independent pools, round-robin, keeps each pool small; limits are per pool.
"""

from __future__ import annotations

import itertools

import httpx


class ShardedTransport(httpx.AsyncBaseTransport):
    """``shards`` :class:`httpx.AsyncHTTPTransport` pools used in turn; ``options`` are
    passed to each (``limits`` apply per pool). The pools share one TLS context (building
    one loads the CA bundle: ~0.2 s each)."""

    def __init__(self, shards: int, **options: object) -> None:
        if shards < 1:
            raise ValueError("shards must be at least 1")
        options.setdefault("verify", httpx.create_ssl_context())
        self._pools = [httpx.AsyncHTTPTransport(**options) for _ in range(shards)]  # type: ignore[arg-type]
        self._next = itertools.cycle(self._pools)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
