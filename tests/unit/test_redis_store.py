"""RedisStateStore on its own: configuration, errors, and (marked ``redis``) a real
``redis-server`` — round trip, TTL, format, atomic writes, slow/down Redis and recovery."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import pytest
import redis
from pydantic import ValidationError

from benchmarks.support.redis_server import (
    REDIS_SERVER,
    SKIP_REASON,
    RedisServer,
    redis_server,
)
from benchmarks.support.servers import free_port
from config.settings import Settings
from proxy.components import build_state_store
from proxy.state.redis import RedisStateStore
from proxy.state.store import MemoryStateStore
from selection.choosing.state import ConversationState, LoadedTool
from selection.errors import StateStoreError

F = TypeVar("F", bound=Callable[..., Any])


def needs_redis(test: F) -> F:
    """Marks a test ``redis`` and skips it when there is no redis-server binary."""
    return pytest.mark.redis(pytest.mark.skipif(REDIS_SERVER is None, reason=SKIP_REASON)(test))


def state(*names: str, turn: int = 1) -> ConversationState:
    return ConversationState(
        {n: LoadedTool(100.0 + i, 200.0 + i) for i, n in enumerate(names)}, turn, 0
    )


# --- without a server -------------------------------------------------------------------


def test_settings_select_the_store() -> None:
    assert isinstance(build_state_store(Settings()), MemoryStateStore)
    assert Settings(state_url="").state_url is None  # TOOLPRUNE_STATE_URL= keeps memory
    with pytest.raises(ValidationError):
        Settings(state_url="http://127.0.0.1:6379")
    store = build_state_store(
        Settings(state_url="redis://127.0.0.1:6390/2", state_key_prefix="fleet-a:", state_ttl_s=60)
    )
    assert isinstance(store, RedisStateStore)
    assert store.key("c1") == "fleet-a:state:v1:c1" and store.ttl_ms == 60_000
    assert store.endpoint == "127.0.0.1:6390"


def test_the_password_is_not_in_the_endpoint() -> None:
    store = RedisStateStore("redis://:s3cret@10.0.0.1:6379/0", ttl_s=1)
    assert "s3cret" not in store.endpoint


def test_an_invalid_url_fails_at_start_up() -> None:
    with pytest.raises(ValueError):
        RedisStateStore("redis://127.0.0.1:notaport/0", ttl_s=1)


async def test_unreachable_redis_raises_state_store_error_fast() -> None:
    store = RedisStateStore(f"redis://127.0.0.1:{free_port()}/0", ttl_s=60, timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(StateStoreError) as caught:
        await store.get("c1")
    with pytest.raises(StateStoreError):
        await store.put("c1", state("a"))
    assert not await store.ping()
    assert time.monotonic() - started < 3 * 0.5 + 1.0
    assert caught.value.reason == "state_store_error"
    await store.aclose()


# --- against redis-server ---------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@pytest.fixture
async def store(server: RedisServer) -> AsyncIterator[RedisStateStore]:
    created = RedisStateStore(server.url, ttl_s=3600, key_prefix="t:", timeout_s=0.5)
    yield created
    await created.aclose()


@needs_redis
async def test_round_trip_key_and_ttl(server: RedisServer, store: RedisStateStore) -> None:
    assert await store.get("c1") is None
    await store.put("c1", state("a", "b", turn=3))
    got = await store.get("c1")
    assert got == state("a", "b", turn=3)
    assert list(got.loaded) == ["a", "b"]  # admission order survives
    raw = redis.Redis(port=server.port)
    assert raw.get("t:state:v1:c1") == state("a", "b", turn=3).to_json().encode()
    assert 3_590_000 < raw.pttl("t:state:v1:c1") <= 3_600_000
    raw.pexpire("t:state:v1:c1", 1000)
    await store.put("c1", state("a"))  # a write resets the TTL
    assert raw.pttl("t:state:v1:c1") > 3_590_000
    raw.close()


@needs_redis
async def test_unreadable_values_read_as_no_state(
    server: RedisServer, store: RedisStateStore
) -> None:
    raw = redis.Redis(port=server.port)
    corrupt = [b"\xff not json", b'{"loaded":[],"turn":1e999,"meta_calls":0}', b"[" * 100_000]
    for value in corrupt:
        raw.set("t:state:v1:bad", value)
        assert await store.get("bad") is None, value[:40]
        await store.put("bad", state("x"))  # the next write replaces it
        assert await store.get("bad") == state("x")
    raw.delete("t:state:v1:bad")
    raw.hset("t:state:v1:bad", "a", "b")  # another type at the key (WRONGTYPE to GET)
    assert await store.get("bad") is None
    await store.put("bad", state("x"))
    assert await store.get("bad") == state("x")
    raw.close()


@needs_redis
async def test_key_prefixes_separate_fleets(server: RedisServer, store: RedisStateStore) -> None:
    other = RedisStateStore(server.url, ttl_s=3600, key_prefix="other:", timeout_s=0.5)
    await store.put("c1", state("a"))
    assert await other.get("c1") is None
    await other.aclose()


@needs_redis
async def test_concurrent_writes_from_two_replicas_are_atomic(server: RedisServer) -> None:
    a = RedisStateStore(server.url, ttl_s=60, timeout_s=2)
    b = RedisStateStore(server.url, ttl_s=60, timeout_s=2)
    written = [state(*[f"tool_{i}_{j}" for j in range(30)], turn=i) for i in range(40)]
    await asyncio.gather(*((a if i % 2 else b).put("shared", s) for i, s in enumerate(written)))
    final = await a.get("shared")
    assert final in written  # one whole write, never a mix of two
    await asyncio.gather(a.aclose(), b.aclose())


@needs_redis
async def test_a_paused_redis_costs_about_one_timeout_then_recovers(server: RedisServer) -> None:
    store = RedisStateStore(server.url, ttl_s=60, timeout_s=0.3)
    await store.put("c1", state("a"))  # a pooled connection exists
    server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StateStoreError):
            await store.get("c1")
        assert time.monotonic() - started < 0.3 + 0.7
    finally:
        server.resume()
    assert await store.get("c1") == state("a")  # the next operation works again
    await store.aclose()


@needs_redis
async def test_killed_then_restarted_redis_is_used_again_by_the_same_store(
    server: RedisServer,
) -> None:
    store = RedisStateStore(server.url, ttl_s=60, timeout_s=0.5)
    await store.put("c1", state("a"))
    server.kill()
    with pytest.raises(StateStoreError):
        await store.get("c1")
    with pytest.raises(StateStoreError):
        await store.put("c1", state("b"))
    server.start()  # same port, empty (no persistence)
    assert await store.get("c1") is None  # the first operation after the restart succeeds
    await store.put("c1", state("b"))
    assert await store.get("c1") == state("b")
    await store.aclose()
