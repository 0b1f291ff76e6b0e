"""SharedStates' compare-and-set on its own, against a real ``redis-server`` (the Lua
script runs in Redis: nothing else could test it): a newer version is written, the same or
an older one never, concurrent publishers leave the newest, and keys of the wrong kind are
overwritten rather than trusted. Also the in-memory side: LearnedStates installs only
newer versions."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator

import pytest
import redis

from benchmarks.support.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer, redis_server
from proxy.usage.learning_share import TRANSFER_TIMEOUT_S, SharedStates, embedder_tag
from selection.learning.learned import LearnedState, LearnedStateError, decode_state, learn
from selection.learning.states import LearnedStates
from tests.support.logs import Lines

CATALOG = "c" * 16


def state(version: int, embedder: str = "fake", catalog: str = CATALOG) -> LearnedState:
    return learn([], catalog=catalog, embedder=embedder, version=version, created=float(version))


def test_states_in_memory_are_replaced_only_by_newer_versions() -> None:
    states = LearnedStates("fake")
    assert states.install_if_newer(state(2))
    assert not states.install_if_newer(state(2)) and not states.install_if_newer(state(1))
    assert states.install_if_newer(state(3)) and states.get(CATALOG).version == 3
    with pytest.raises(LearnedStateError):
        states.install_if_newer(state(9, embedder="other"))


def test_keys_are_per_embedder_under_the_prefix_and_never_hold_its_id() -> None:
    shared = SharedStates("redis://127.0.0.1:6390/0", embedder="http:https://h/v1:m",
                          key_prefix="fleet-a:", timeout_s=0.1)
    tag = embedder_tag("http:https://h/v1:m")
    assert len(tag) == 16 and tag != embedder_tag("onnx:m")
    assert shared.index_key == f"fleet-a:learned:v1:{tag}"
    assert shared.key(CATALOG) == f"fleet-a:learned:v1:{tag}:{CATALOG}"
    assert shared._calls.timeout_s == TRANSFER_TIMEOUT_S  # a state is large: never below it
    assert shared.endpoint == "127.0.0.1:6390"


# --- with a real redis-server --------------------------------------------------------

@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    with redis_server() as running:
        yield running


@pytest.fixture
def raw(server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url)
    client.flushall()
    yield client
    client.close()


def held(raw: redis.Redis, shared: SharedStates) -> tuple[dict[bytes, bytes], int]:
    """The index hash, and the version of the state stored under the catalogue's key (the
    script writes both in one step: they always agree)."""
    value = raw.get(shared.key(CATALOG))
    return raw.hgetall(shared.index_key), decode_state(value).version if value else 0


@pytest.mark.redis
async def test_only_a_newer_version_is_written(server: RedisServer, raw: redis.Redis) -> None:
    shared = SharedStates(server.url, embedder="fake")
    try:
        assert await shared.publish(state(2))
        assert held(raw, shared) == ({CATALOG.encode(): b"2"}, 2)
        assert not await shared.publish(state(2))
        assert not await shared.publish(state(1))
        assert held(raw, shared) == ({CATALOG.encode(): b"2"}, 2)
        assert await shared.publish(state(3))
        assert held(raw, shared) == ({CATALOG.encode(): b"3"}, 3)
        assert raw.ttl(shared.key(CATALOG)) == -1 and raw.ttl(shared.index_key) == -1  # no TTL
        with pytest.raises(ValueError):
            await shared.publish(state(9, embedder="other"))
    finally:
        await shared.aclose()


@pytest.mark.redis
async def test_concurrent_publishers_leave_the_newest(
    server: RedisServer, raw: redis.Redis, log_lines: Lines, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolprune")
    replicas = [SharedStates(server.url, embedder="fake") for _ in range(2)]
    versions = list(range(1, 21))
    random.Random(7).shuffle(versions)
    try:
        written = await asyncio.gather(*(
            replicas[i % 2].publish(state(version)) for i, version in enumerate(versions)
        ))
    finally:
        for replica in replicas:
            await replica.aclose()
    assert held(raw, replicas[0]) == ({CATALOG.encode(): b"20"}, 20)
    # Each write replaced the write before it, never a newer one: the versions they
    # replaced chain from nothing (0) to 20.
    chain = sorted((f["held"], f["version"]) for f in log_lines.events("learned_state_published"))
    assert [h for h, _ in chain] == [0] + [v for _, v in chain[:-1]] and chain[-1][1] == 20
    assert len(chain) == sum(written)
    assert len(log_lines.events("learned_state_not_published")) == len(versions) - sum(written)


@pytest.mark.redis
async def test_an_unreadable_index_is_overwritten_not_trusted(
    server: RedisServer, raw: redis.Redis
) -> None:
    shared = SharedStates(server.url, embedder="fake")
    try:
        raw.hset(shared.index_key, CATALOG, "not a number")
        assert await shared.versions() == {}
        assert await shared.publish(state(1))
        assert held(raw, shared) == ({CATALOG.encode(): b"1"}, 1)
        raw.delete(shared.index_key)
        raw.set(shared.index_key, b"a string, not a hash")
        assert await shared.versions() == {}
        assert await shared.publish(state(1))
        assert held(raw, shared) == ({CATALOG.encode(): b"1"}, 1)
    finally:
        await shared.aclose()
