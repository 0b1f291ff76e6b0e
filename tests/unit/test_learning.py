"""proxy.usage.learning with the usage log's own writer and a deterministic embedder: the
evidence read back, the guard (promoted only when the held-back replay improves, rolled
back otherwise), the states kept in the log's file, the boost applied by the engine, and
bad input (older log, foreign embedder, corrupt state) degrading to unlearned selection."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from proxy.turn.turn import Turn
from proxy.usage.learned_reads import read_reports, read_states, summarise
from proxy.usage.learning import KEPT_ATTEMPTS, learn_catalog, learn_from_log, read_evidence, record
from proxy.usage.learning_schedule import load_states
from proxy.usage.schema import open_database
from proxy.usage.writer import UsageLog
from selection.catalog.catalog import parse_tools
from selection.choosing.block_order import SelectedTool, Selection
from selection.choosing.state import ConversationState
from selection.learning.learned import decode_state
from selection.learning.logged_ranking import decode_ranking
from selection.learning.states import LearnedStates
from selection.ranking.pipeline import Ranking
from tests.support.turns import planned_turn
from tests.unit.test_engine import FakeEmbedder, bag, engine_for

#: Tools whose descriptions share no vocabulary word with the requests below, so the
#: unlearned ranking cannot find ``gamma_tool`` for an "alpha" request.
TOOLS = [
    {"type": "function", "function": {"name": name, "description": description}}
    for name, description in [
        ("beta_tool", "beta beta"), ("gamma_tool", "delta"), ("omega_tool", "omega"),
        ("other_tool", "beta omega"),
    ]
]
CATALOG = parse_tools(TOOLS)


def served_turn(
    conversation: str, query: str, calls: list[str], forwarded: list[str], catalog=CATALOG
) -> Turn:
    state = ConversationState()
    state.turn = 1
    selection = Selection(
        tools=tuple(SelectedTool(name, "semantic") for name in forwarded), admitted=(),
        evicted=(), left_out=(), state=state,
    )
    # Ranked while its catalogue was being indexed: the usage log keeps no ranking of it
    # (the guard replays the cosines), unless a test ranks it (:func:`ranked`).
    ranking = Ranking(np.zeros(len(catalog), np.float32), partial=True, query_vector=bag(query))
    turn = planned_turn({"messages": [{"role": "user", "content": query}]}, catalog, selection,
                        ranking=ranking, conversation=conversation)
    turn.response_calls = calls
    return turn


def write_log(path: Path, turns: list[Turn], embedder: str | None = "fake") -> None:
    usage = UsageLog(path, embedder=embedder)
    for turn in turns:
        usage.record(turn, "pruned")
    assert usage.flush(10.0)
    assert usage.close(10.0)
    assert usage.dropped == 0


def alpha_traffic(n: int) -> list[Turn]:
    """Requests about "alpha" whose tool is gamma_tool (missed by the ranking)."""
    return [served_turn(f"c{i}", "alpha query", ["gamma_tool"], ["beta_tool"]) for i in range(n)]


def ranked(turn: Turn, scores: list[float], boost: list[float] | None = None) -> Turn:
    """``turn`` as ranked by the proxy: its fused scores, ``boost`` the learned part."""
    learned = None if boost is None else np.asarray(boost, dtype=np.float32)
    ranking = Ranking.of(np.asarray(scores, dtype=np.float32), boost=learned)
    turn.plan = replace(turn.plan, ranking=replace(ranking, query_vector=turn.query_vector,
                                                   partial=False))
    return turn


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.message for r in caplog.records if r.levelno >= logging.WARNING]


def learn_once(path: Path, engine) -> list:
    return asyncio.run(learn_from_log(path, engine, {}, k=1, now=100.0))


def test_vectors_are_stored_as_float16_without_text(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(2))
    with sqlite3.connect(db) as connection:
        (blob,) = connection.execute("SELECT query FROM requests LIMIT 1").fetchone()
        assert np.frombuffer(blob, dtype=np.float16).tolist() == pytest.approx(
            bag("alpha query").tolist(), abs=1e-3
        )
        assert connection.execute("SELECT COUNT(*) FROM examples").fetchone() == (0,)
    assert b"alpha query" not in db.read_bytes()
    evidence = read_evidence(db, "fake")
    assert [(e.tool, e.status) for e in evidence[CATALOG.fingerprint]] == [("gamma_tool", "miss")] * 2


def test_without_learning_no_vector_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, [ranked(turn, [0.9, 0.1, 0.5, 0.3]) for turn in alpha_traffic(1)],
              embedder=None)
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT query, ranking FROM requests").fetchall() == [
            (None, None)
        ]


def test_the_proxys_ranking_is_logged_without_its_boost_for_the_guard(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    turn = ranked(alpha_traffic(1)[0], [0.9, 0.1, 0.5, 0.3], boost=[0.0, 0.0, 0.4, 0.0])
    write_log(db, [turn])
    (pair,) = read_evidence(db, "fake")[CATALOG.fingerprint]
    ranking = decode_ranking(pair.ranking, len(CATALOG))
    assert np.allclose(ranking.values(len(CATALOG)), [0.9, 0.1, 0.1, 0.3], atol=1e-3)


def test_a_helpful_state_is_promoted_kept_in_the_log_and_applied(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(12))
    engine = engine_for(FakeEmbedder())
    engine.learned = LearnedStates("fake")
    (outcome,) = learn_once(db, engine)
    assert outcome.promoted and outcome.version == 1
    assert (outcome.before, outcome.after) == (0.0, 1.0)
    stored = read_states(db, "fake")[CATALOG.fingerprint]
    assert stored.learned_tools == ["gamma_tool"]
    assert summarise(read_reports(db))[0]["in_use"]["version"] == 1

    async def rank() -> list[str]:
        scores = await engine.score(CATALOG, {}, ["alpha query"])
        return [CATALOG.tools[i].name for i in np.argsort(-scores.values)]

    assert asyncio.run(rank())[0] == "gamma_tool"
    fresh = LearnedStates("fake")
    assert load_states(db, fresh) == 1 and fresh.get(CATALOG.fingerprint) is not None


def test_a_state_that_does_not_help_is_rolled_back(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    # Each request's tool is one the ranking already puts first: nothing to gain.
    write_log(db, [served_turn(f"c{i}", "omega", ["omega_tool"], ["omega_tool"]) for i in range(12)])
    engine = engine_for(FakeEmbedder())
    engine.learned = LearnedStates("fake")
    (outcome,) = learn_once(db, engine)
    assert not outcome.promoted and outcome.reason == "not_better"
    assert read_states(db, "fake") == {} and len(engine.learned) == 0
    assert summarise(read_reports(db))[0]["last"]["reason"] == "not_better"


def test_too_little_traffic_is_not_judged(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(1))
    (outcome,) = learn_once(db, engine_for(FakeEmbedder()))
    assert outcome.reason == "too_little_traffic" and not outcome.promoted


def test_vectors_of_another_embedder_are_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(12), embedder="old-model")
    with caplog.at_level(logging.WARNING, logger="toolprune.learning"):
        assert learn_once(db, engine_for(FakeEmbedder())) == []
    assert warnings(caplog) == ["learning_skipped"]
    # The writer of a new embedder erases the old vectors.
    write_log(db, [], embedder="fake")
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT COUNT(query) FROM requests").fetchone() == (0,)


def test_a_log_of_the_version_before_rankings_is_still_learned_from(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, [ranked(turn, [0.9, 0.1, 0.5, 0.3]) for turn in alpha_traffic(12)])
    with sqlite3.connect(db) as connection:  # version 2: query vectors, no rankings
        connection.execute("ALTER TABLE requests DROP COLUMN ranking")
    evidence = read_evidence(db, "fake")[CATALOG.fingerprint]
    assert len(evidence) == 12 and all(pair.ranking is None for pair in evidence)
    (outcome,) = learn_once(db, engine_for(FakeEmbedder()))  # replayed by the cosine part
    assert outcome.promoted


def test_an_older_log_is_read_and_migrated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "usage.db"
    with sqlite3.connect(db) as connection:  # version 1's requests table: no query column
        connection.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema_version', '1'), ('query_embedder', 'fake');"
            "CREATE TABLE requests (id INTEGER PRIMARY KEY, ts REAL NOT NULL, decision TEXT NOT NULL,"
            " reason TEXT, conversation TEXT, catalog TEXT, turn INTEGER, path TEXT, offered INTEGER,"
            " forwarded INTEGER, schema_bytes_saved INTEGER, meta_calls INTEGER NOT NULL DEFAULT 0,"
            " meta_loaded TEXT, rounds INTEGER);"
            "CREATE TABLE calls (id INTEGER PRIMARY KEY, ts REAL NOT NULL, conversation TEXT NOT NULL,"
            " catalog TEXT, tool TEXT NOT NULL, turn INTEGER NOT NULL, status TEXT NOT NULL,"
            " source TEXT NOT NULL, call_key TEXT);"
        )
    with caplog.at_level(logging.WARNING, logger="toolprune.learning"):
        assert read_evidence(db, "fake") == {}
        assert read_states(db, "fake") == {}
    assert warnings(caplog) == ["learning_skipped"]
    open_database(db, 1.0).close()
    write_log(db, alpha_traffic(1))
    assert len(read_evidence(db, "fake")[CATALOG.fingerprint]) == 1


def test_a_corrupt_or_foreign_state_is_ignored_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(12))
    engine = engine_for(FakeEmbedder())
    learn_once(db, engine)
    with sqlite3.connect(db) as connection:
        (blob,) = connection.execute("SELECT state FROM learned WHERE promoted = 1").fetchone()
        connection.execute(
            "INSERT INTO learned VALUES ('other-catalogue', 1, 0, 1, ?, '{}')", (blob,)
        )
        connection.execute("INSERT INTO learned VALUES (?, 9, 0, 1, x'00ff', '{}')",
                           (CATALOG.fingerprint,))
    assert decode_state(bytes(blob)).catalog == CATALOG.fingerprint
    with caplog.at_level(logging.WARNING, logger="toolprune.learning"):
        assert read_states(db, "fake") == {}
    assert warnings(caplog) == ["learned_state_ignored"] * 2


def test_a_changed_catalogue_keeps_the_evidence_of_its_unchanged_tools(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, [ranked(turn, [0.9, 0.1, 0.5, 0.3]) for turn in alpha_traffic(2)])
    changed_catalog = parse_tools([
        {"type": "function", "function": {"name": "gamma_tool", "description": "delta"}},
        {"type": "function", "function": {"name": "beta_tool", "description": "beta now"}},
        {"type": "function", "function": {"name": "new_tool", "description": "omega"}},
    ])
    # traffic of the new catalogue on its redefined tool
    write_log(db, [served_turn("n1", "beta", ["beta_tool"], ["beta_tool"], changed_catalog)])
    evidence = read_evidence(db, "fake")
    assert [e.tool for e in evidence[CATALOG.fingerprint]] == ["gamma_tool"] * 2
    # gamma_tool is unchanged: its evidence carries over; the redefined beta_tool's own.
    assert sorted(e.tool for e in evidence[changed_catalog.fingerprint]) == [
        "beta_tool", "gamma_tool", "gamma_tool"
    ]
    # a ranking is a catalogue's positions: it goes with the evidence of its own only
    assert all(e.ranking is not None for e in evidence[CATALOG.fingerprint])
    assert all(e.ranking is None for e in evidence[changed_catalog.fingerprint])


def test_the_learned_table_stays_bounded(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    write_log(db, alpha_traffic(12))
    outcome, state = asyncio.run(learn_catalog(
        CATALOG, CATALOG.fingerprint, read_evidence(db, "fake")[CATALOG.fingerprint], None,
        engine_for(FakeEmbedder()), {}, k=1, now=0.0,
    ))
    assert state is not None
    for version in (1, 2, 3):
        record(db, replace(outcome, version=version), replace(state, version=version), version)
    rejected = replace(outcome, version=None, promoted=False, reason="not_better")
    for attempt in range(KEPT_ATTEMPTS + 5):
        record(db, rejected, None, 10.0 + attempt)
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT promoted, COUNT(*), MIN(version) FROM learned "
                                  "GROUP BY promoted ORDER BY promoted").fetchall()
    assert rows == [(0, KEPT_ATTEMPTS, -(KEPT_ATTEMPTS + 5)), (1, 2, 2)]
    assert read_states(db, "fake")[CATALOG.fingerprint].version == 3
