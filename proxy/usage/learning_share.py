"""Learned states shared through Redis by every replica (``TOOLPRUNE_STATE_URL`` with
``TOOLPRUNE_LEARN``, docs/learning.md "Where it lives"): each promotion is published, and
each replica installs what the others promoted.

Keys, under the state store's prefix (``TOOLPRUNE_STATE_KEY_PREFIX``) and per embedder
(:func:`embedder_tag`, a hash of its id: states of another embedder are never read):

- ``{prefix}learned:v1:{tag}:{catalog}``: the state of one catalogue fingerprint, the bytes
  of :func:`selection.learning.learned.encode_state` (its header names the catalogue, the embedder
  and the version), up to 1.5 MB;
- ``{prefix}learned:v1:{tag}``: a hash, catalogue fingerprint → version of its state, so a
  replica learns what changed in one small round trip, without scanning the keyspace (the
  conversations' keys are there too).

Publishing is a compare-and-set, one Lua script run atomically by Redis
(:data:`PUBLISH_SCRIPT`): the state and its version are written only when the version is
newer than the one Redis holds, so of two replicas promoting at once the newer state stays,
whatever the order of their writes. No TTL: a state is bounded per catalogue and stays in
use until a newer one is promoted (a TTL would make replicas that start later lose it, and
restart the versions). Deleting the keys deletes it once no running replica holds it: a
refresh publishes again the states in memory that Redis lacks (so Redis needs no
persistence).

Failures never reach a request (nothing here is on the request path) and never stop
learning: Redis down or slow (each command bounded by ``timeout_s``) leaves the states in
memory as they are, with one log line when Redis becomes unavailable and one when it
recovers (as :mod:`selection.redis_state` logs); a value that cannot be read, or that
belongs to another embedder or catalogue, is skipped with one log line per catalogue and
version (it is not fetched again until its version changes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import ResponseError

from proxy.log import get_logger
from proxy.state.redis import REDIS_FAILURES, RedisCalls, get_string, redis_client
from selection.learning import (
    LearnedState,
    LearnedStateError,
    LearnedStates,
    decode_state,
    encode_state,
)

#: Format of the keys and values; part of every key.
FORMAT_VERSION = "v1"
#: Least budget of one command, seconds: a state may be 1.5 MB, and nothing waits for it.
TRANSFER_TIMEOUT_S = 2.0
#: Connections of one process (publishing and refreshing take turns).
MAX_CONNECTIONS = 2

#: KEYS[1]: the state's key, KEYS[2]: the index hash; ARGV: catalogue, version, state
#: bytes. Writes both only when the version is newer than the index's; returns
#: ``{written (0 or 1), version held before}``. An index of another Redis type, or a held
#: version that is not a number, is overwritten (it is unreadable, not newer).
PUBLISH_SCRIPT = """
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', KEYS[2]) end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
local held = raw and tonumber(raw) or 0
if held >= tonumber(ARGV[2]) then return {0, held} end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {1, held}
"""

logger = get_logger("learning")

T = TypeVar("T")


class _Unavailable(Exception):
    """Redis failed one command (logged on the transition)."""


def embedder_tag(embedder: str) -> str:
    """A short stable name of embedder id ``embedder`` for keys (its ids may be long, or
    hold a URL): 16 hex digits of its BLAKE2b hash."""
    return hashlib.blake2b(embedder.encode("utf-8"), digest_size=8).hexdigest()


class SharedStates:
    """The learned states of one embedder in the Redis at ``url`` (module docstring).

    ``url``: as ``TOOLPRUNE_STATE_URL``; ``embedder``: the id of the embedder whose states
    are read and written; ``key_prefix``: ``TOOLPRUNE_STATE_KEY_PREFIX``; ``timeout_s``: the
    most one command may take, at least :data:`TRANSFER_TIMEOUT_S`. Nothing connects until
    the first command; an invalid URL raises ValueError here.
    """

    def __init__(
        self, url: str, *, embedder: str, key_prefix: str = "toolprune:",
        timeout_s: float = TRANSFER_TIMEOUT_S,
    ) -> None:
        self.embedder = embedder
        timeout_s = max(timeout_s, TRANSFER_TIMEOUT_S)
        self._client, self.endpoint = redis_client(
            url, timeout_s=timeout_s, max_connections=MAX_CONNECTIONS
        )
        #: The hash of catalogue fingerprint → version; each state's key extends it.
        self.index_key = f"{key_prefix}learned:{FORMAT_VERSION}:{embedder_tag(embedder)}"
        self._publish = self._client.register_script(PUBLISH_SCRIPT)
        self._calls = RedisCalls(self.endpoint, timeout_s, logger,
                                 ("learned_states_unavailable", "learned_states_recovered"))
        self._fetched: dict[str, int] = {}  # catalogue → the index's version last fetched
        self._index_unreadable = False

    def key(self, catalog: str) -> str:
        """The Redis key of ``catalog``'s state."""
        return f"{self.index_key}:{catalog}"

    async def publish(self, state: LearnedState) -> bool:
        """Write ``state`` unless Redis holds a state of the same or a higher version for
        its catalogue; whether it was written (False also when Redis failed: logged).
        Raises ValueError for a state of another embedder."""
        try:
            return await self._write(state)
        except _Unavailable:
            return False

    async def _write(self, state: LearnedState) -> bool:
        if state.embedder != self.embedder:
            raise ValueError("learned state of another embedder")
        raw = encode_state(state)
        written, held = await self._call("publish", lambda: self._publish(
            keys=[self.key(state.catalog), self.index_key],
            args=[state.catalog, state.version, raw],
        ))
        fields = {"catalog": state.catalog, "version": state.version, "held": int(held),
                  "bytes": len(raw), "endpoint": self.endpoint}
        logger.info("learned_state_published" if written else "learned_state_not_published",
                    extra={"fields": fields})
        return bool(written)

    async def versions(self) -> dict[str, int]:
        """Catalogue fingerprint → version of the state Redis holds (entries that are not
        a number left out). Raises _Unavailable."""
        index = await self._call("refresh", self._read_index)
        versions = {}
        for catalog, version in index.items():
            try:
                versions[catalog.decode("utf-8")] = int(version)
            except ValueError:  # not a number, or not text: unreadable, never newer
                continue
        return versions

    async def refresh(self, learned: LearnedStates) -> int:
        """Install in ``learned`` the states Redis holds with a higher version than the
        one in memory, and publish those of ``learned`` newer than Redis's (a promotion
        made while Redis was down, or a Redis restarted empty); how many were installed.
        Never raises: Redis failing ends the refresh, with what it installed so far kept
        (module docstring)."""
        installed = 0
        try:
            held = await self.versions()
            in_memory = {state.catalog: state.version for state in learned.states()}
            for catalog, version in held.items():
                if version <= in_memory.get(catalog, 0) or self._fetched.get(catalog) == version:
                    continue
                key = self.key(catalog)
                raw = await self._call("refresh", lambda k=key: get_string(self._client, k))
                self._fetched[catalog] = version
                state = self._decode(catalog, version, raw)
                if state is not None and learned.install_if_newer(state):
                    installed += 1
                    logger.info("learned_state_installed", extra={"fields": {
                        "catalog": catalog, "version": state.version, "source": "redis",
                        "endpoint": self.endpoint}})
            for state in learned.states():
                if state.version > held.get(state.catalog, 0):
                    await self._write(state)
        except _Unavailable:
            pass
        return installed

    async def aclose(self) -> None:
        """Close the client and its connections."""
        await self._client.aclose()

    def _decode(self, catalog: str, version: int, raw: bytes | None) -> LearnedState | None:
        if raw is None:  # deleted since the index was read: nothing to install
            return None
        try:
            return decode_state(raw, catalog=catalog, embedder=self.embedder)
        except LearnedStateError as error:
            logger.warning("learned_state_ignored", extra={"fields": {
                "catalog": catalog, "version": version, "reason": str(error),
                "source": "redis", "endpoint": self.endpoint}})
            return None

    async def _read_index(self) -> dict[bytes, bytes]:
        """``HGETALL`` of the index; an index of another Redis type reads as empty (one
        log line; the next publication replaces it)."""
        try:
            index: dict[bytes, bytes] = await self._client.hgetall(self.index_key)
        except ResponseError as error:
            if not str(error).startswith("WRONGTYPE"):
                raise
            if not self._index_unreadable:
                self._index_unreadable = True
                logger.warning("learned_index_ignored", extra={"fields": {
                    "key": self.index_key, "reason": "not a hash", "endpoint": self.endpoint}})
            return {}
        self._index_unreadable = False
        return index

    async def _call(self, operation: str, command: Callable[[], Awaitable[T]]) -> T:
        try:
            return await self._calls.run(operation, command)
        except REDIS_FAILURES as error:
            raise _Unavailable from error


async def shared_report(
    url: str, *, embedder: str, key_prefix: str = "toolprune:",
    timeout_s: float = TRANSFER_TIMEOUT_S,
) -> dict[str, Any]:
    """What Redis holds for ``embedder``, for ``toolprune usage report``: ``{"endpoint",
    "versions": {catalogue fingerprint: version}}``, or ``{"endpoint", "error":
    "unavailable"}`` when Redis does not answer (logged). Never raises but ValueError for
    an invalid URL."""
    shared = SharedStates(url, embedder=embedder, key_prefix=key_prefix, timeout_s=timeout_s)
    try:
        return {"endpoint": shared.endpoint, "versions": await shared.versions()}
    except _Unavailable:
        return {"endpoint": shared.endpoint, "error": "unavailable"}
    finally:
        await shared.aclose()
