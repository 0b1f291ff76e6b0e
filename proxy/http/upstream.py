"""The upstream connection: URL mapping, the shared httpx client, and error mapping.

Every transport failure is turned into a :mod:`proxy.http.errors` exception here, so callers
handle one family: connect failures → :class:`UpstreamUnavailable` (502), timeouts →
:class:`UpstreamTimeout` (504), a body that breaks after the response started →
:class:`UpstreamStreamBroken`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from config.settings import Settings
from proxy.http.errors import UpstreamStreamBroken, UpstreamTimeout, UpstreamUnavailable
from proxy.http.headers import Headers
from proxy.http.pools import ShardedTransport
from proxy.log import get_logger

logger = get_logger("upstream")


#: Connections one pool opens and keeps alive at most.
CONNECTIONS_PER_POOL = 64


def create_client(settings: Settings) -> httpx.AsyncClient:
    """The process-wide upstream client.

    Connect timeout ``connect_timeout_s``; read timeout ``idle_timeout_s`` applies to each
    read (time between two chunks), so a long stream never hits a total timeout.
    Only failed connects are retried (httpx transport ``retries``), never a sent request.
    Cookies the upstream sets are never stored (a reject-all cookie policy). Requests are
    spread over ``upstream_pools`` connection pools (:mod:`proxy.pools`), each keeping up
    to ``CONNECTIONS_PER_POOL`` connections alive.
    """
    timeout = httpx.Timeout(
        connect=settings.connect_timeout_s,
        read=settings.idle_timeout_s,
        write=settings.idle_timeout_s,
        pool=settings.connect_timeout_s,
    )
    limits = httpx.Limits(
        max_connections=CONNECTIONS_PER_POOL, max_keepalive_connections=CONNECTIONS_PER_POOL
    )
    transport = ShardedTransport(
        settings.upstream_pools, retries=settings.connect_retries, limits=limits
    )
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        follow_redirects=False,
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
    )


class _ConnectionTrace:
    """httpcore trace events of one request: whether it opened a new connection (a
    ``connection.connect_tcp`` event) rather than reusing a pooled one."""

    def __init__(self) -> None:
        self.opened = False

    async def trace(self, event: str, info: dict[str, object]) -> None:
        if event.startswith(("connection.connect_tcp", "connection.connect_unix_socket")):
            self.opened = True


class Upstream:
    """Sends requests to the configured upstream and maps its failures.

    ``/v1/<rest>`` maps to ``{upstream_url}/<rest>``; any other path maps to the same
    path on the upstream's origin (llama-server's ``/health``, ``/tokenize``, ``/props``).
    """

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        self.client = client
        self.base_url = settings.upstream_url
        parsed = httpx.URL(self.base_url)
        self.origin = f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"

    def url_for(self, raw_path: bytes, query_string: bytes = b"") -> str:
        """Upstream URL for a client request path (percent-encoding kept as sent)."""
        path = raw_path.decode("latin-1")
        if path == "/v1" or path.startswith("/v1/"):
            url = self.base_url + path[3:]
        else:
            url = self.origin + path
        if query_string:
            url += "?" + query_string.decode("latin-1")
        return url

    async def send(
        self, method: str, url: str, headers: Headers, content: bytes
    ) -> tuple[httpx.Response, float]:
        """Send a request and wait for the response headers (body not read).

        Returns the streaming response and the seconds the upstream took to answer with
        headers. The caller must ``aclose()`` the response.

        A request that provably never reached the upstream is sent again, once: it went out
        on a pooled (reused) connection that the upstream had closed, which failed before
        any byte of a response (the keep-alive race of RFC 9112 §9.3.1: the server closed
        an idle connection as the client reused it). A fresh connection's failure, or any
        timeout, is never retried.

        Raises: UpstreamUnavailable, UpstreamTimeout.
        """
        started = time.perf_counter()
        for attempt in (1, 2):
            connection = _ConnectionTrace()
            request = self.client.build_request(
                method, url, headers=headers, content=content,
                extensions={"trace": connection.trace},
            )
            try:
                response = await self.client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise UpstreamTimeout(f"upstream timed out: {type(exc).__name__}") from exc
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if attempt == 1 and not connection.opened:
                    logger.info(
                        "upstream_retry_stale_connection",
                        extra={"fields": {"error": type(exc).__name__}},
                    )
                    continue
                raise UpstreamUnavailable(f"upstream unreachable: {type(exc).__name__}") from exc
            except httpx.TransportError as exc:
                raise UpstreamUnavailable(f"upstream unreachable: {type(exc).__name__}") from exc
            return response, time.perf_counter() - started
        raise AssertionError("unreachable")

    async def probe(self, timeout_s: float) -> bool:
        """True when ``GET {upstream_url}/models`` answers with any status below 500."""
        try:
            response = await self.client.get(self.base_url + "/models", timeout=timeout_s)
        except httpx.HTTPError:
            return False
        return response.status_code < 500


async def raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body as it arrives, undecoded (``Content-Encoding`` kept as is).

    Raises: UpstreamTimeout (idle longer than ``idle_timeout_s``), UpstreamStreamBroken.
    """
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.TimeoutException as exc:
        raise UpstreamTimeout("upstream stream idle timeout") from exc
    except httpx.TransportError as exc:
        raise UpstreamStreamBroken(f"upstream stream broke: {type(exc).__name__}") from exc


async def read_decoded(response: httpx.Response) -> bytes:
    """The whole response body, ``Content-Encoding`` decoded.

    Raises: UpstreamTimeout, UpstreamStreamBroken.
    """
    try:
        return await response.aread()
    except httpx.TimeoutException as exc:
        raise UpstreamTimeout("upstream body idle timeout") from exc
    except httpx.TransportError as exc:
        raise UpstreamStreamBroken(f"upstream body broke: {type(exc).__name__}") from exc
