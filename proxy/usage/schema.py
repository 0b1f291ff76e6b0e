"""The usage log's SQLite schema (tables described in :mod:`proxy.usage.writer`), its
migration from older versions, and its retention (deleting rows older than the retention
window)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 3
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    conversation TEXT,
    catalog TEXT,
    turn INTEGER,
    path TEXT,
    offered INTEGER,
    forwarded INTEGER,
    schema_bytes_saved INTEGER,
    meta_calls INTEGER NOT NULL DEFAULT 0,
    meta_loaded TEXT,
    rounds INTEGER,
    query BLOB,
    ranking BLOB
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts);
CREATE INDEX IF NOT EXISTS requests_turn ON requests (conversation, turn);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    conversation TEXT NOT NULL,
    catalog TEXT,
    tool TEXT NOT NULL,
    turn INTEGER NOT NULL,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    call_key TEXT
);
CREATE INDEX IF NOT EXISTS calls_ts ON calls (ts);
CREATE UNIQUE INDEX IF NOT EXISTS calls_key ON calls (conversation, call_key)
    WHERE call_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS calls_pending ON calls (conversation, tool)
    WHERE call_key IS NULL;
CREATE TABLE IF NOT EXISTS catalog_tools (
    catalog TEXT NOT NULL,
    position INTEGER NOT NULL,
    tool TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    definition TEXT,
    ts REAL NOT NULL,
    PRIMARY KEY (catalog, tool)
);
CREATE TABLE IF NOT EXISTS examples (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    conversation TEXT NOT NULL,
    tool TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS examples_ts ON examples (ts);
CREATE TABLE IF NOT EXISTS learned (
    catalog TEXT NOT NULL,
    version INTEGER NOT NULL,
    ts REAL NOT NULL,
    promoted INTEGER NOT NULL,
    state BLOB,
    report TEXT NOT NULL,
    PRIMARY KEY (catalog, version)
);
"""
#: Columns added since version 1 (``ALTER TABLE`` on an older file): ``query`` in 2,
#: ``ranking`` in 3.
_ADDED_COLUMNS = (("requests", "query", "BLOB"), ("requests", "ranking", "BLOB"))


def apply_retention(connection: sqlite3.Connection, cutoff: float) -> None:
    """Delete rows older than ``cutoff`` (Unix seconds) and the catalogue sizes no
    remaining request uses; give the freed pages back (incremental vacuum)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for table in ("requests", "calls", "examples"):
            connection.execute(f"DELETE FROM {table} WHERE ts < ?", (cutoff,))
        connection.execute(
            "DELETE FROM catalog_tools WHERE catalog NOT IN "
            "(SELECT DISTINCT catalog FROM requests WHERE catalog IS NOT NULL) "
            "AND catalog NOT IN (SELECT DISTINCT catalog FROM calls WHERE catalog IS NOT NULL)"
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("PRAGMA incremental_vacuum")


def migrate(connection: sqlite3.Connection) -> None:
    """Bring a file of an older schema version to :data:`SCHEMA_VERSION` (columns added,
    never removed: an older reader still reads it)."""
    for table, column, kind in _ADDED_COLUMNS:
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    connection.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )


def claim_query_vectors(connection: sqlite3.Connection, embedder: str) -> None:
    """Record that query vectors are ``embedder``'s; vectors of another embedder already
    stored are erased (they cannot be compared with the new ones), and the rankings
    logged beside them (they were ranked by it)."""
    row = connection.execute("SELECT value FROM meta WHERE key = 'query_embedder'").fetchone()
    if row is not None and row[0] == embedder:
        return
    if row is not None:
        connection.execute(
            "UPDATE requests SET query = NULL, ranking = NULL WHERE query IS NOT NULL"
        )
    connection.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('query_embedder', ?)", (embedder,)
    )


def open_database(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """Open (creating it when missing) the usage log for writing: autocommit mode (the
    writer opens its own transactions), WAL journal, incremental vacuum on new files,
    the schema created. Raises ``sqlite3.Error``."""
    connection = sqlite3.connect(
        path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # new files only
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.executescript(SCHEMA)
        migrate(connection)
    except BaseException:
        connection.close()
        raise
    return connection
