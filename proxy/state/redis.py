"""Conversation state in Redis, shared by every proxy replica (``TOOLPRUNE_STATE_URL``).

One key per conversation, ``{key_prefix}state:v1:{conversation_id}``, holding the state's
JSON (:meth:`ConversationState.to_json`). A write is one ``SET key value PX ttl``: atomic per
conversation (a reader sees the whole old state or the whole new one) and it resets the
TTL, so a conversation expires ``ttl_s`` after its last write, as in the in-memory store.
Concurrent turns of one conversation on two replicas: the last write wins (what is lost is
stickiness, which the history's pins make up for). ``v1`` names the value's format, so a
rolling upgrade to another format starts conversations afresh instead of misreading them.

Failures never reach the client: every Redis error, refused connection or timeout becomes
:class:`~selection.errors.StateStoreError`, which the proxy answers by forwarding the full
catalogue. Each operation is bounded by ``timeout_s`` in total (socket connect and read
timeouts, plus an overall deadline), and redis-py's own retries are reduced to one immediate
retry on a broken connection (its default of ten retries with back-off would hold a request
for seconds while Redis is down). Recovery is automatic: redis-py's connection pool drops
dead connections and reconnects on the next operation, so the first request after Redis
returns is served from Redis again. Transitions (unavailable, recovered) are logged once each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from selection.types import ConversationState, StateStoreError

#: Format of the stored value; part of every key.
FORMAT_VERSION = "v1"
#: Default budget of one operation, seconds (``TOOLPRUNE_REDIS_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = 0.25
#: Connections per proxy process; one carries one command at a time (tens of µs on a LAN).
DEFAULT_MAX_CONNECTIONS = 64

logger = logging.getLogger("toolprune.state")

T = TypeVar("T")


def redis_client(url: str, *, timeout_s: float, max_connections: int) -> tuple[Redis, str]:
    """An asyncio Redis client for ``url`` (see :class:`RedisStateStore`) whose commands
    each wait at most ``timeout_s`` for a pooled connection, to connect and to read, and
    retry once at once on a broken connection; and where it connects, for logs (host and
    port or socket path, never the password). Nothing connects here; an invalid URL raises
    ValueError."""
    # A bounded pool that makes a burst wait for a free connection (within the
    # operation's budget) instead of failing; the URL's query string may override
    # (``?max_connections=256``).
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout_s,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        # One immediate retry on a broken connection (e.g. pooled before Redis
        # restarted); none on timeouts, which would double a slow Redis's cost.
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )
    kwargs = pool.connection_kwargs
    endpoint = str(kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}")
    return Redis.from_pool(pool), endpoint


async def get_string(client: Redis, key: str) -> bytes | None:
    """``GET key`` (None: no such key); a key of another type (a hash, a list: WRONGTYPE)
    reads as an unreadable value, ``b""``, not as Redis failing, so the next ``SET``
    replaces it. Raises RedisError."""
    try:
        value: bytes | None = await client.get(key)
    except ResponseError as error:
        if str(error).startswith("WRONGTYPE"):
            return b""
        raise
    return value


#: What a Redis command that did not answer raises (redis-py's errors, sockets, deadlines).
REDIS_FAILURES = (RedisError, OSError, TimeoutError)


class RedisCalls:
    """Runs the commands of one Redis client, each within ``timeout_s`` seconds, and logs
    on ``log`` once per change that ``endpoint`` stopped answering (warning ``events[0]``,
    with the operation and the error's type) or answers again (info ``events[1]``)."""

    def __init__(
        self, endpoint: str, timeout_s: float, log: logging.Logger, events: tuple[str, str]
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._log = log
        self._events = events
        self._available = True

    async def run(self, operation: str, command: Callable[[], Awaitable[T]]) -> T:
        """``command()``'s result. Raises what it raised (:data:`REDIS_FAILURES`), or
        TimeoutError past ``timeout_s``."""
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await command()
        except REDIS_FAILURES as error:
            if self._available:
                self._available = False
                self._log.warning(self._events[0], extra={"fields": {
                    "store": "redis", "endpoint": self.endpoint, "operation": operation,
                    "error": type(error).__name__}})
            raise
        if not self._available:
            self._available = True
            self._log.info(self._events[1], extra={"fields": {
                "store": "redis", "endpoint": self.endpoint}})
        return result


class RedisStateStore:
    """:class:`~selection.choosing.state.StateStore` in Redis; see the module docstring.

    ``url``: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://…`` (TLS) or
    ``unix:///path/to/socket``. ``ttl_s``: a conversation's state expires this long after
    its last write. ``timeout_s``: the most one operation may take (waiting for a pooled
    connection included). ``max_connections``: pool size (a burst beyond it waits). Nothing
    connects until the first operation; an invalid URL raises ValueError here.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl_s: float,
        key_prefix: str = "toolprune:",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if ttl_s <= 0 or timeout_s <= 0:
            raise ValueError("ttl_s and timeout_s must be positive")
        self._prefix = f"{key_prefix}state:{FORMAT_VERSION}:"
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._client, endpoint = redis_client(
            url, timeout_s=timeout_s, max_connections=max_connections
        )
        #: Where Redis is, for logs (never the password).
        self.endpoint = endpoint
        self._calls = RedisCalls(
            endpoint, timeout_s, logger, ("state_store_unavailable", "state_store_recovered")
        )

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    def key(self, conversation_id: str) -> str:
        """The Redis key of a conversation's state."""
        return self._prefix + conversation_id

    async def get(self, conversation_id: str) -> ConversationState | None:
        """The stored state, or None when absent, expired or unreadable (a value in another
        format, or of another Redis type, is overwritten by the next write). Raises
        StateStoreError."""
        raw = await self._call("get", lambda: get_string(self._client, self.key(conversation_id)))
        if raw is None:
            return None
        try:
            return ConversationState.from_json(raw)
        except ValueError as error:
            logger.warning(
                "state_unreadable",
                extra={"fields": {"store": "redis", "error": str(error)[:200]}},
            )
            return None

    async def put(self, conversation_id: str, state: ConversationState) -> None:
        """Replace the state and reset its TTL, in one ``SET … PX``. Raises StateStoreError."""
        value = state.to_json()
        await self._call(
            "put", lambda: self._client.set(self.key(conversation_id), value, px=self._ttl_ms)
        )

    async def ping(self) -> bool:
        """Whether Redis answers within the timeout (never raises)."""
        try:
            return bool(await self._call("ping", self._client.ping))
        except StateStoreError:
            return False

    async def aclose(self) -> None:
        """Close the client and its connection pool."""
        await self._client.aclose()

    async def _call(self, operation: str, command: Callable[[], Awaitable[T]]) -> T:
        try:
            return await self._calls.run(operation, command)
        except REDIS_FAILURES as error:
            detail = f"redis {operation} failed: {type(error).__name__}: {error}"
            raise StateStoreError(detail[:500]) from error
