"""Learned states shared by replicas through a real ``redis-server`` (issue #26).

Two replicas, each with its own usage log (SQLite, written by the log's own writer) and
its own engine, share one Redis: a promotion of one is installed by the other, whose next
promotion follows it; an older version never replaces a newer one; Redis stopped, or
holding garbage or another embedder's state, costs nothing but the sharing (one log line
each) and learning goes on. Then the same through two real proxies under uvicorn and the
real ``toolprune learn``: a state published by the command is installed by a replica at
its start and by its periodic refresh, and requests are answered once Redis is gone.
Refreshes are driven by calling them, or awaited as log lines: nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis

from benchmarks.support.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer, redis_server
from benchmarks.support.upstream import CHAT_PATH
from proxy.cli.main import main
from proxy.usage.learned_reads import read_states
from proxy.usage.learning import LearnOutcome, learn_from_log, read_evidence, record
from proxy.usage.learning_schedule import load_states, refresh_periodically
from proxy.usage.learning_share import TRANSFER_TIMEOUT_S, SharedStates
from selection.learning.learned import encode_state, learn
from selection.learning.states import LearnedStates
from tests.integration.test_learning import PLAYWRIGHT, QUESTION, TOOL, _embedder_id
from tests.integration.test_usage_log import REPLAY_SETTINGS, running_proxy, tool_names
from tests.support.logs import Lines
from tests.unit.test_engine import FakeEmbedder, engine_for
from tests.unit.test_learning import CATALOG, alpha_traffic, served_turn, write_log

pytestmark = [pytest.mark.redis, pytest.mark.skipif(REDIS_SERVER is None, reason=SKIP_REASON)]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@pytest.fixture
def info(caplog: pytest.LogCaptureFixture) -> None:
    """The proxy's info lines reach ``log_lines`` too."""
    caplog.set_level(logging.INFO, logger="toolprune")


class Replica:
    """One replica's learning: its usage log, engine and the shared Redis."""

    def __init__(self, db: Path, url: str) -> None:
        self.db = db
        self.engine = engine_for(FakeEmbedder())
        self.engine.learned = LearnedStates("fake")
        self.shared = SharedStates(url, embedder="fake")

    @property
    def learned(self) -> LearnedStates:
        assert self.engine.learned is not None
        return self.engine.learned

    async def learn(self) -> LearnOutcome:
        """A scheduled pass: the log's states, Redis's, then learning with publication."""
        load_states(self.db, self.learned)
        await self.shared.refresh(self.learned)
        (outcome,) = await learn_from_log(self.db, self.engine, {}, k=1, now=100.0,
                                          publish=self.shared.publish)
        return outcome

    async def rank(self, query: str) -> list[str]:
        scores = await self.engine.score(CATALOG, {}, [query])
        return [CATALOG.tools[i].name for i in np.argsort(-scores.values, kind="stable")]


async def test_a_promotion_of_one_replica_is_installed_by_the_other_whose_next_follows_it(
    tmp_path: Path, server: RedisServer, info: None, log_lines: Lines
) -> None:
    a, b = Replica(tmp_path / "a.db", server.url), Replica(tmp_path / "b.db", server.url)
    write_log(a.db, alpha_traffic(12))  # "alpha" requests, then gamma_tool (a miss)
    # B's agent asks "gamma" and then calls omega_tool: A's state does not help it.
    write_log(b.db, [served_turn(f"b{i}", "gamma query", ["omega_tool"], ["gamma_tool"])
                     for i in range(12)])
    assert (await b.rank("alpha query"))[0] != "gamma_tool"

    first = await a.learn()
    assert first.promoted and first.version == 1
    assert await b.shared.refresh(b.learned) == 1
    assert b.learned.get(CATALOG.fingerprint).version == 1
    assert (await b.rank("alpha query"))[0] == "gamma_tool"  # A's traffic, applied by B
    assert await b.shared.refresh(b.learned) == 0  # nothing newer

    second = await b.learn()  # judged against the fleet's v1, numbered after it
    assert second.promoted and second.version == 2 and second.before < second.after
    assert read_states(b.db, "fake")[CATALOG.fingerprint].version == 2
    assert await a.shared.refresh(a.learned) == 1
    assert a.learned.get(CATALOG.fingerprint).version == 2
    assert (await a.rank("gamma query"))[0] == "omega_tool"
    # A's next pass starts from v2 (memory), not from v1 (its own log).
    load_states(a.db, a.learned)
    assert a.learned.get(CATALOG.fingerprint).version == 2
    installed = [f["version"] for f in log_lines.events("learned_state_installed")]
    assert installed == [1, 2]
    for replica in (a, b):
        await replica.shared.aclose()


async def test_an_older_version_never_replaces_a_newer_one(
    tmp_path: Path, server: RedisServer
) -> None:
    a, b = Replica(tmp_path / "a.db", server.url), Replica(tmp_path / "b.db", server.url)
    newer = learn([], catalog=CATALOG.fingerprint, embedder="fake", version=5, created=5.0)
    older = learn([], catalog=CATALOG.fingerprint, embedder="fake", version=3, created=3.0)
    # Both replicas promote at once; whichever Redis runs first, v5 stays.
    results = await asyncio.gather(a.shared.publish(older), b.shared.publish(newer))
    assert results[1] is True
    assert await b.shared.versions() == {CATALOG.fingerprint: 5}
    assert not await a.shared.publish(older)
    # A replica holding v3 installs v5; one holding v5 never goes back to v3.
    a.learned.install(older)
    assert await a.shared.refresh(a.learned) == 1 and a.learned.get(CATALOG.fingerprint).version == 5
    assert not a.learned.install_if_newer(older)
    assert a.learned.get(CATALOG.fingerprint).version == 5
    for replica in (a, b):
        await replica.shared.aclose()


async def test_redis_stopped_costs_the_sharing_only_with_one_line(
    tmp_path: Path, server: RedisServer, info: None, log_lines: Lines
) -> None:
    a = Replica(tmp_path / "a.db", server.url)
    write_log(a.db, alpha_traffic(12))
    server.kill()
    outcome = await a.learn()  # the schedule goes on: learned, recorded, applied
    assert outcome.promoted and outcome.version == 1
    assert read_states(a.db, "fake")[CATALOG.fingerprint].version == 1
    assert (await a.rank("alpha query"))[0] == "gamma_tool"
    assert await a.shared.refresh(a.learned) == 0
    assert not await a.shared.publish(a.learned.get(CATALOG.fingerprint))
    assert len(log_lines.events("learned_states_unavailable")) == 1

    # Redis back, empty (nothing persisted): the next refresh publishes what it lacks.
    server.start()
    assert await a.shared.refresh(a.learned) == 0
    assert len(log_lines.events("learned_states_recovered")) == 1
    assert await a.shared.versions() == {CATALOG.fingerprint: 1}
    b = Replica(tmp_path / "b.db", server.url)
    assert await b.shared.refresh(b.learned) == 1
    for replica in (a, b):
        await replica.shared.aclose()


async def test_garbage_and_foreign_states_are_skipped_with_one_line_each(
    tmp_path: Path, server: RedisServer, log_lines: Lines
) -> None:
    a = Replica(tmp_path / "a.db", server.url)
    raw = redis.Redis.from_url(server.url)
    fingerprint = CATALOG.fingerprint
    raw.hset(a.shared.index_key, fingerprint, 4)
    raw.set(a.shared.key(fingerprint), b"\x00garbage")
    assert await a.shared.refresh(a.learned) == 0
    assert await a.shared.refresh(a.learned) == 0  # not fetched again: no second line
    foreign = learn([], catalog=fingerprint, embedder="other-model", version=6, created=0.0)
    raw.hset(a.shared.index_key, fingerprint, 6)
    raw.set(a.shared.key(fingerprint), encode_state(foreign))
    assert await a.shared.refresh(a.learned) == 0
    assert await a.shared.refresh(a.learned) == 0
    misplaced = learn([], catalog="another-catalogue", embedder="fake", version=7, created=0.0)
    raw.hset(a.shared.index_key, fingerprint, 7)
    raw.set(a.shared.key(fingerprint), encode_state(misplaced))
    assert await a.shared.refresh(a.learned) == 0
    reasons = [f["reason"] for f in log_lines.events("learned_state_ignored")]
    assert reasons == ["unreadable learned state: ValueError", "learned state of another embedder",
                      "learned state of another catalogue"]
    assert len(a.learned) == 0
    # An index of the wrong Redis type reads as empty (one line) until a publication.
    raw.delete(a.shared.index_key)
    raw.rpush(a.shared.index_key, b"x")
    assert await a.shared.refresh(a.learned) == 0 and await a.shared.refresh(a.learned) == 0
    assert len(log_lines.events("learned_index_ignored")) == 1
    assert not log_lines.events("learned_states_unavailable")
    write_log(a.db, alpha_traffic(12))
    assert (await a.learn()).version == 1
    assert await a.shared.versions() == {fingerprint: 1}
    raw.close()
    await a.shared.aclose()


async def test_the_periodic_refresh_installs_what_appears_later(
    tmp_path: Path, server: RedisServer, info: None, log_lines: Lines
) -> None:
    a, b = Replica(tmp_path / "a.db", server.url), Replica(tmp_path / "b.db", server.url)
    installed = asyncio.Event()
    b_learned = b.learned

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "learned_state_installed":
                installed.set()

    watch = Watch()
    logging.getLogger("toolprune").addHandler(watch)
    task = asyncio.create_task(refresh_periodically(b.shared, b_learned, interval_s=0.01))
    try:
        write_log(a.db, alpha_traffic(12))
        assert (await a.learn()).promoted
        async with asyncio.timeout(30):
            await installed.wait()
        assert b_learned.get(CATALOG.fingerprint).version == 1
    finally:
        task.cancel()
        logging.getLogger("toolprune").removeHandler(watch)
        for replica in (a, b):
            await replica.shared.aclose()


# --- two real proxies and the real command line ----------------------------------------


def test_replicas_install_what_toolprune_learn_published_and_survive_redis_going(
    tmp_path: Path, server: RedisServer, info: None, log_lines: Lines,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    db_a, db_b = tmp_path / "a.db", tmp_path / "b.db"
    shared = {"learn": True, "state_url": server.url, **REPLAY_SETTINGS}
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "tools": PLAYWRIGHT}
    with running_proxy(usage_db=db_a, **shared) as a:
        a.upstream.expect("question-a", [{"id": "q1", "name": TOOL, "arguments": "{}"}])
        assert a.post(body, "question-a").status_code == 200
        assert TOOL not in tool_names(a.upstream.requests[-2].json()["tools"])
        a.flush()
    # A's state for the Playwright catalogue from its one request, promoted by hand (one
    # request is too little for the guard), then `toolprune learn` with A's settings.
    embedder = _embedder_id(db_a)
    (fingerprint, pairs), = read_evidence(db_a, embedder).items()

    def promote(version: int) -> None:
        state = learn(pairs, catalog=fingerprint, embedder=embedder, version=version, created=0.0)
        record(db_a, LearnOutcome(fingerprint, len(PLAYWRIGHT), 1, 1, 1, 2, 0.0, 1.0, True,
                                  "promoted", version), state, float(version))
        assert main(["learn", "--db", str(db_a), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["reason"] == "too_little_traffic"

    monkeypatch.setenv("TOOLPRUNE_LEARN", "true")
    monkeypatch.setenv("TOOLPRUNE_STATE_URL", server.url)
    promote(1)
    raw = redis.Redis.from_url(server.url)
    (key,) = [k for k in raw.scan_iter("toolprune:learned:*") if k.endswith(fingerprint.encode())]
    size = raw.strlen(key)
    assert 0 < size < 20_000  # one evidence vector of 384 float16 and its header

    with running_proxy(usage_db=db_b, learn_refresh_s=0.01, **shared) as b:
        log_lines.wait_until("learned_state_installed", lambda f: f["version"] == 1)
        b.upstream.expect("question-b", [{"id": "q2", "name": TOOL, "arguments": "{}"}])
        assert b.post(body, "question-b").status_code == 200
        chats = [r for r in b.upstream.requests if r.path.endswith(CHAT_PATH)]
        assert len(chats) == 1 and TOOL in tool_names(chats[0].json()["tools"])
        log_lines.wait_until("pruning_decision", lambda f: f["reasons"].get(TOOL) == "learned")

        promote(2)  # a later promotion reaches the running replica by its refresh
        log_lines.wait_until("learned_state_installed", lambda f: f["version"] == 2)
        # The usage report says what Redis holds, and whose it is.
        assert main(["usage", "report", "--db", str(db_a), "--json", "--no-tokenize"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["learning_shared"]["versions"] == {fingerprint: 2}
        assert main(["usage", "report", "--db", str(db_b), "--no-tokenize"]) == 0
        assert f"{fingerprint[:12]} v2 (another replica's)" in capsys.readouterr().out

        server.kill()
        log_lines.wait_until("learned_states_unavailable")
        for conversation in ("question-c", "question-d"):
            b.upstream.expect(conversation, [{"id": "q3", "name": TOOL, "arguments": "{}"}])
            assert b.post(body, conversation).status_code == 200
        b.flush()
    assert len(log_lines.events("learned_states_unavailable")) == 1
    assert main(["usage", "report", "--db", str(db_a), "--no-tokenize"]) == 0
    assert f"shared through Redis at 127.0.0.1:{server.port}: unavailable" in capsys.readouterr().out
    raw.close()


async def test_a_redis_that_never_answers_costs_one_budget_per_refresh(
    tmp_path: Path, server: RedisServer, info: None, log_lines: Lines
) -> None:
    a = Replica(tmp_path / "a.db", server.url)
    state = learn([], catalog=CATALOG.fingerprint, embedder="fake", version=1, created=0.0)
    a.learned.install(state)
    server.pause()  # SIGSTOP: connections are accepted, nothing is answered
    try:
        started = asyncio.get_running_loop().time()
        assert await a.shared.refresh(a.learned) == 0
        assert not await a.shared.publish(state)
        took = asyncio.get_running_loop().time() - started
    finally:
        server.resume()
    assert took < 2 * (TRANSFER_TIMEOUT_S + 1.0)  # bounded: each command by its budget
    assert a.learned.get(CATALOG.fingerprint) is state
    assert [f["error"] for f in log_lines.events("learned_states_unavailable")] == ["TimeoutError"]
    assert await a.shared.refresh(a.learned) == 0  # answered again: it publishes what it holds
    assert log_lines.events("learned_states_recovered")
    assert await a.shared.versions() == {CATALOG.fingerprint: 1}
    await a.shared.aclose()
