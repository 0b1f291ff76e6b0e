"""The upstream connection: URL mapping, the shared aiohttp session, and error mapping.

Every transport failure is turned into a :mod:`proxy.http.errors` exception here, so callers
handle one family: connect failures → :class:`UpstreamUnavailable` (502), timeouts →
:class:`UpstreamTimeout` (504), a body that breaks after the response started →
:class:`UpstreamStreamBroken`.

The client is aiohttp's (docs/measured.md, "Speed and memory": 4–5× the requests/s of the
best httpx pool setup at 32 and 200 concurrent streams on one core).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from urllib.parse import unquote

import aiohttp
from yarl import URL

from config.settings import Settings
from proxy.http.errors import (
    UpstreamResponseInvalid,
    UpstreamStreamBroken,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.http.headers import Headers, header
from proxy.log import get_logger

logger = get_logger("upstream")

#: Headers aiohttp would add to a request that lacks them; the proxy forwards the client's
#: headers and adds none of its own (``Host``, ``Content-Length`` and ``X-Request-Id`` aside).
NOT_ADDED = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
#: An idle pooled connection is closed after this many seconds: below the 5 s keep-alive of
#: llama-server (cpp-httplib) and uvicorn, so the proxy rarely reuses one the upstream is
#: closing (the retry in :meth:`Upstream.send` covers the rest).
KEEPALIVE_S = 4.0
#: Longest response header line and field the upstream may send, bytes.
MAX_HEADER_FIELD_BYTES = 65536
#: After a stream's last event, how long (seconds) and how much (bytes) the rest of its body
#: (the terminal chunk of a chunked body) may take before the connection is closed rather
#: than returned to the pool (:meth:`UpstreamResponse.drain`).
DRAIN_TIMEOUT_S = 0.5
DRAIN_LIMIT_BYTES = 64 * 1024
#: Longest pause before a retry of a failed connect, seconds.
MAX_CONNECT_RETRY_DELAY_S = 4.0


def connect_retry_delay(retry: int) -> float:
    """Seconds to wait before connect retry number ``retry`` (0-based): at once, then
    0.5 s doubling up to ``MAX_CONNECT_RETRY_DELAY_S`` (httpcore's schedule)."""
    return 0.0 if retry == 0 else min(0.5 * 2 ** (retry - 1), MAX_CONNECT_RETRY_DELAY_S)


async def _connection_opened(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: object
) -> None:
    if context.trace_request_ctx is not None:  # None: a request not sent by Upstream.send
        context.trace_request_ctx.opened = True


def create_session(settings: Settings) -> aiohttp.ClientSession:
    """The process-wide upstream session; call inside the running event loop.

    Timeouts: ``connect_timeout_s`` for a pooled connection or a new one; ``idle_timeout_s``
    for each read (the response headers, then the time between two chunks), so a long
    stream never hits a total timeout. At most ``upstream_connections`` connections, kept
    alive ``KEEPALIVE_S`` when idle. Cookies the upstream sets are never stored; response
    bodies are not decoded (``Content-Encoding`` relayed as sent, :func:`read_decoded`
    decodes). A trace marks each request that opened a new connection (for the retry of
    :meth:`Upstream.send`).
    """
    trace = aiohttp.TraceConfig(trace_config_ctx_factory=SimpleNamespace)
    trace.on_connection_create_start.append(_connection_opened)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=settings.upstream_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
        ),
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(
            total=None, connect=settings.connect_timeout_s, sock_read=settings.idle_timeout_s
        ),
        auto_decompress=False,
        skip_auto_headers=NOT_ADDED,
        trace_configs=[trace],
        max_line_size=MAX_HEADER_FIELD_BYTES,
        max_field_size=MAX_HEADER_FIELD_BYTES,
    )
    # aiohttp re-sends an idempotent request once after any reset; the proxy's own rule
    # (Upstream.send: only what provably never reached the upstream) applies to every method.
    session._retry_connection = False
    return session


class UpstreamResponse:
    """An upstream response whose status and headers have arrived (body not read).

    ``headers``: the response's headers as sent, names lower-cased. :meth:`aclose` must be
    called: it returns a fully read connection to the pool and closes any other (which
    stops the upstream's work on an abandoned stream).
    """

    __slots__ = ("_response", "status_code", "headers", "sent_at", "first_byte_at",
                 "last_byte_at", "on_close")

    def __init__(self, response: aiohttp.ClientResponse, sent_at: float | None = None) -> None:
        self._response = response
        self.status_code = response.status
        self.headers: Headers = [(name.lower(), value) for name, value in response.raw_headers]
        #: ``time.perf_counter()`` when the request was sent, when its body's first byte
        #: and the last byte read so far arrived (None: none yet).
        self.sent_at = time.perf_counter() if sent_at is None else sent_at
        self.first_byte_at: float | None = None
        self.last_byte_at: float | None = None
        #: Called once by :meth:`aclose` (:class:`proxy.http.request_log.RequestLog`).
        self.on_close: Callable[[UpstreamResponse], None] | None = None

    def _read(self, chunk: bytes) -> None:
        """Note the time of a body chunk (the empty one: the body's end)."""
        now = time.perf_counter()
        if self.first_byte_at is None:
            self.first_byte_at = now
        self.last_byte_at = now

    def header(self, name: bytes) -> bytes | None:
        """First value of ``name`` (lower-case), or ``None``."""
        return header(self.headers, name)

    async def drain(self) -> None:
        """The body's last event was read (an SSE stream's ``[DONE]``): read what is left of
        it, within :data:`DRAIN_TIMEOUT_S` and :data:`DRAIN_LIMIT_BYTES`, so a body that ends
        there returns its connection to the pool (aiohttp releases a connection only once
        its response was read to the end) instead of :meth:`aclose` closing it. Upstreams
        write ``[DONE]`` and the body's end apart (llama-server's chunked writer does), and
        every streamed request opened a new connection. Never raises."""
        left = DRAIN_LIMIT_BYTES
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while left > 0 and (chunk := await self._response.content.readany()):
                    left -= len(chunk)
                    self._read(chunk)
        except (TimeoutError, aiohttp.ClientError):
            pass

    async def aclose(self) -> None:
        self._response.close()
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close(self)


def _header_text(value: bytes) -> str:
    """A header name or value as aiohttp takes it (it writes text as UTF-8)."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def is_normalised(raw_path: bytes) -> bool:
    """Whether a request path (as sent, percent-encoded or not) is a normalised absolute
    path: it starts with ``/`` and, percent-decoded, has no ``.`` or ``..`` segment, no
    empty segment (``//``; a trailing ``/`` aside) and no backslash. Only such paths are
    forwarded (RFC 3986 §6.2.2.3: a server may resolve dot segments the proxy did not,
    and ``//host`` reads as an authority), so what reaches the upstream stays under its
    base URL or origin as :meth:`Upstream.url_for` maps it."""
    path = unquote(raw_path.decode("latin-1"))
    if not path.startswith("/") or "\\" in path:
        return False
    segments = path[1:].split("/")
    inner, last = segments[:-1], segments[-1]
    return all(segment not in ("", ".", "..") for segment in inner) and last not in (".", "..")


class Upstream:
    """Sends requests to the configured upstream and maps its failures.

    ``/v1/<rest>`` maps to ``{upstream_url}/<rest>``; any other path maps to the same
    path on the upstream's origin (llama-server's ``/health``, ``/tokenize``, ``/props``).
    Paths are checked first (:func:`is_normalised`; the app answers 400 otherwise).
    """

    def __init__(self, settings: Settings, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.base_url = settings.upstream_url
        self.connect_retries = settings.connect_retries
        parsed = URL(self.base_url)
        self.origin = str(parsed.origin())

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
    ) -> tuple[UpstreamResponse, float]:
        """Send a request and wait for the response headers (body not read).

        Returns the response and the seconds the upstream took to answer with headers.
        The caller must ``aclose()`` the response.

        A failed connect is tried again up to ``connect_retries`` times. A request that
        provably never reached the upstream is sent again, once: it went out on a pooled
        (reused) connection that the upstream had closed, which failed before any byte of a
        response (the keep-alive race of RFC 9112 §9.3.1: the server closed an idle
        connection as the client reused it). A fresh connection's failure, or any timeout,
        is never retried.

        Raises: UpstreamUnavailable, UpstreamTimeout.
        """
        started = time.perf_counter()
        target = URL(url, encoded=True)
        pairs = [(_header_text(name), _header_text(value)) for name, value in headers]
        connect_failures = 0
        stale_retried = False
        while True:
            connection = SimpleNamespace(opened=False)
            try:
                response = await self.session.request(
                    method, target, headers=pairs, data=content or None,
                    allow_redirects=False, trace_request_ctx=connection,
                )
            except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
                raise UpstreamTimeout(f"upstream timed out: {type(exc).__name__}") from exc
            except aiohttp.ClientConnectorError as exc:
                if connect_failures < self.connect_retries:
                    await asyncio.sleep(connect_retry_delay(connect_failures))
                    connect_failures += 1
                    continue
                raise UpstreamUnavailable(f"upstream unreachable: {type(exc).__name__}") from exc
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if not stale_retried and not connection.opened:
                    stale_retried = True
                    logger.info(
                        "upstream_retry_stale_connection",
                        extra={"fields": {"error": type(exc).__name__}},
                    )
                    continue
                raise UpstreamUnavailable(
                    f"upstream closed the connection before answering: {type(exc).__name__}"
                ) from exc
            except aiohttp.ClientError as exc:
                raise UpstreamUnavailable(f"upstream unreachable: {type(exc).__name__}") from exc
            return UpstreamResponse(response, started), time.perf_counter() - started

    async def probe(self, timeout_s: float) -> bool:
        """True when ``GET {upstream_url}/models`` answers with any status below 500."""
        try:
            async with self.session.get(
                self.base_url + "/models", timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                return response.status < 500
        except (TimeoutError, aiohttp.ClientError):
            return False


async def raw_chunks(response: UpstreamResponse) -> AsyncIterator[bytes]:
    """The response body as it arrives, undecoded (``Content-Encoding`` kept as is).

    Raises: UpstreamTimeout (idle longer than ``idle_timeout_s``), UpstreamStreamBroken.
    """
    content = response._response.content
    while True:
        try:
            chunk = await content.readany()
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise UpstreamTimeout("upstream stream idle timeout") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamStreamBroken(f"upstream stream broke: {type(exc).__name__}") from exc
        if not chunk:
            return
        response._read(chunk)
        yield chunk


async def read_decoded(response: UpstreamResponse) -> bytes:
    """The whole response body, ``Content-Encoding`` (gzip, deflate or none) decoded.

    Raises: UpstreamTimeout, UpstreamStreamBroken, UpstreamResponseInvalid (another
    encoding, or a body that does not decode).
    """
    body = b"".join([chunk async for chunk in raw_chunks(response)])
    return decoded(body, response.header(b"content-encoding"))


def decoded(body: bytes, content_encoding: bytes | None) -> bytes:
    """A body as its ``Content-Encoding`` (gzip, deflate or none) leaves it decoded.

    Raises: UpstreamResponseInvalid (another encoding, or a body that does not decode).
    """
    encoding = (content_encoding or b"identity").strip().lower()
    if encoding in (b"", b"identity"):
        return body
    if encoding not in (b"gzip", b"x-gzip", b"deflate"):
        raise UpstreamResponseInvalid(
            f"upstream body has unsupported Content-Encoding {encoding.decode('latin-1')!r}"
        )
    try:
        # wbits 32+15: a gzip or zlib header, detected; raw deflate as some servers send it
        return zlib.decompress(body, 32 + zlib.MAX_WBITS)
    except zlib.error:
        try:
            return zlib.decompress(body, -zlib.MAX_WBITS)
        except zlib.error as exc:
            raise UpstreamResponseInvalid("upstream body does not decode") from exc
