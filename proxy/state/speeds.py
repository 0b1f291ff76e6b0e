"""The model server's speeds shared through Redis by every replica (``TOOLPRUNE_STATE_URL``):
what one replica learned from the server's answers (:class:`proxy.servers.speeds.SpeedBook`)
plans the others' requests in seconds before they have seen an answer of their own.

One hash, ``{prefix}speeds:v1`` (``TOOLPRUNE_STATE_KEY_PREFIX``): model → JSON
``{"prefill": [tokens, seconds, source], "decode": [tokens, seconds, source]}``, the sums
of the replica's window of samples (:meth:`~proxy.servers.speeds.SpeedBook.summary`). The
last replica to write a model wins; the server's speed is one fact, whoever measured it.

Failures never reach a request: Redis down or slow (each command bounded by
``timeout_s``) leaves each replica with what it learned itself, one log line when Redis
becomes unavailable and one when it recovers; a value that cannot be read is ignored.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from proxy.state.redis import REDIS_FAILURES, RedisCalls, redis_client

#: Format of the values; part of the key.
FORMAT_VERSION = "v1"
#: Connections of one process (a fetch and a publish at once at most, per model).
MAX_CONNECTIONS = 4

logger = logging.getLogger("toolprune.state")


class SharedSpeeds:
    """Speeds in Redis (see the module docstring). ``url`` as the state store's; nothing
    connects until the first command; an invalid URL raises ValueError here."""

    def __init__(self, url: str, *, key_prefix: str, timeout_s: float) -> None:
        self._client, endpoint = redis_client(url, timeout_s=timeout_s,
                                              max_connections=MAX_CONNECTIONS)
        self._key = f"{key_prefix}speeds:{FORMAT_VERSION}"
        self._calls = RedisCalls(endpoint, timeout_s, logger,
                                 ("speed_share_unavailable", "speed_share_recovered"))

    async def publish(self, model: str, summary: dict[str, Any]) -> None:
        """Write ``model``'s summary; a failure is logged (once) and dropped."""
        value = json.dumps(summary)
        try:
            await self._calls.run("publish", lambda: self._client.hset(self._key, model, value))
        except REDIS_FAILURES:
            return

    async def fetch(self, model: str) -> dict[str, Any] | None:
        """``model``'s summary as another replica wrote it (None: none, unreadable, or
        Redis not answering)."""
        try:
            raw = await self._calls.run("fetch", lambda: self._client.hget(self._key, model))
        except REDIS_FAILURES:
            return None
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    async def aclose(self) -> None:
        await self._client.aclose()
