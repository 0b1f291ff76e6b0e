"""Tool-text vectors kept on disk, so a catalogue seen before — by this process before a
restart, or by another worker — is indexed without embedding anything again.

One SQLite file (Python's ``sqlite3``) in a directory of its own: a row per text, keyed by
the BLAKE3 hash of the embedder's id and the text (:func:`vector_key`), its vector as
float32 bytes and when it was last used. SQLite's write-ahead log lets the workers of one
host read and write it at once (a writer waits at most :data:`BUSY_TIMEOUT_S` for
another; the file must be on a local file system). Past ``max_bytes`` of vectors, the
least recently used rows go (down to :data:`PRUNE_TO` of it). The file carries its own
``application_id`` and ``user_version``: a file that is damaged, not SQLite, or another
application's is moved aside to ``<name>.damaged`` (the last one kept) and a new one
replaces it (also when a query finds it damaged later, unless another worker replaced it
already); a row whose bytes are not a unit float32 vector is read as missing.

Every failure is the caller's :class:`~selection.errors.VectorStoreError` (a cache miss
for the engine, logged): the store never fails a request. Blocking calls: run them in a
worker thread. Serialised by a lock: one connection per store.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import blake3
import numpy as np

from selection.errors import VectorStoreError

logger = logging.getLogger("toolprune.vectors")

FILE_NAME = "tool-vectors.sqlite3"
#: ``PRAGMA application_id`` of the file: "tpvc" in ASCII.
APPLICATION_ID = 0x74707663
#: ``PRAGMA user_version``: the schema's version (another: the file is replaced).
SCHEMA_VERSION = 1
#: Seconds a write waits for another connection's (another worker's) to end.
BUSY_TIMEOUT_S = 2.0
#: Share of ``max_bytes`` the store is pruned down to once it is over.
PRUNE_TO = 0.9
#: Bytes a row costs beyond its vector (key, timestamp, b-tree), for the size bound.
ROW_OVERHEAD_BYTES = 64
#: Keys looked up in one statement (SQLite's variable limit is 32,766 or more).
LOOKUP_CHUNK = 500
#: Largest deviation from unit L2 norm a stored vector may have.
NORM_TOLERANCE = 1e-3

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors ("
    " key BLOB PRIMARY KEY, vector BLOB NOT NULL, used INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)",
)


@contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at its start (``BEGIN IMMEDIATE``: another worker's
    waits for it, up to the busy timeout), committed or rolled back."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def vector_key(embedder_id: str, text: str) -> bytes:
    """The row key of ``text``'s vector under ``embedder_id``: 32 bytes of BLAKE3."""
    return blake3.blake3(f"{embedder_id}\0{text}".encode(errors="replace")).digest()


def default_store_dir() -> Path:
    """``$XDG_CACHE_HOME/toolprune/vectors``, else ``~/.cache/toolprune/vectors``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "toolprune" / "vectors"


def _unit_vector(blob: object) -> np.ndarray | None:
    """The float32 vector stored in ``blob``, or None when it is not one of unit norm."""
    if not isinstance(blob, bytes) or not blob or len(blob) % 4:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(norm) or abs(norm - 1.0) > NORM_TOLERANCE:
        return None
    return vector


class SqliteVectorStore:
    """The store in ``directory`` (created if missing), holding at most about ``max_bytes``
    of vectors. Opens lazily, on the first call. Raises VectorStoreError from every method
    on an I/O or SQLite failure."""

    def __init__(self, directory: Path, max_bytes: int, *, clock=time.time) -> None:
        self.path = Path(directory) / FILE_NAME
        self.max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None  # the file the connection opened
        self._rows = 0  # at open, plus what this process added since (pruning recounts)

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of ``keys`` (float32 ``(d,)`` each; absent keys, and rows
        that are not unit vectors, left out), marked as used now."""
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            connection = self._open()
            try:
                for start in range(0, len(keys), LOOKUP_CHUNK):
                    chunk = list(keys[start : start + LOOKUP_CHUNK])
                    marks = ",".join("?" * len(chunk))
                    rows = connection.execute(
                        f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk
                    ).fetchall()
                    for key, blob in rows:
                        if (vector := _unit_vector(blob)) is not None:
                            found[bytes(key)] = vector
                if found:
                    with _transaction(connection):
                        connection.executemany(
                            "UPDATE vectors SET used = ? WHERE key = ?",
                            [(int(self._clock()), key) for key in found],
                        )
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc
        return found

    def put_many(self, items: Mapping[bytes, np.ndarray] | Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors (float32 ``(d,)``, unit norm) by key, replacing any there; prune
        the least recently used rows when the store is over ``max_bytes``."""
        pairs = list(items.items() if isinstance(items, Mapping) else items)
        if not pairs:
            return
        now = int(self._clock())
        rows = [(key, np.asarray(v, dtype=np.float32).tobytes(), now) for key, v in pairs]
        with self._lock:
            connection = self._open()
            try:
                with _transaction(connection):
                    connection.executemany(
                        "INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)", rows
                    )
                self._rows += len(rows)
                row_bytes = len(rows[0][1]) + ROW_OVERHEAD_BYTES
                if self._rows * row_bytes > self.max_bytes:
                    self._prune(connection, row_bytes)
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc

    def _failed(self, exc: sqlite3.Error) -> VectorStoreError:
        """The error to raise for ``exc``; a damaged file (any database error but a busy or
        locked one) is closed and set aside, so the next call starts a new one."""
        if not isinstance(exc, sqlite3.OperationalError):
            self._close_locked()
            with suppress(OSError):
                self._set_aside(exc, only=self._inode)
        return VectorStoreError(f"vector store {self.path}: {exc}")

    def _prune(self, connection: sqlite3.Connection, row_bytes: int) -> None:
        (self._rows,) = connection.execute("SELECT count(*) FROM vectors").fetchone()
        keep = int(self.max_bytes * PRUNE_TO) // row_bytes
        if self._rows * row_bytes <= self.max_bytes:
            return
        with _transaction(connection):
            connection.execute(
                "DELETE FROM vectors WHERE key IN "
                "(SELECT key FROM vectors ORDER BY used LIMIT ?)", (self._rows - keep,)
            )
        self._rows = keep

    def _open(self) -> sqlite3.Connection:
        """The connection, opened (and the file checked, or replaced) on first use."""
        if self._connection is not None:
            return self._connection
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                connection = self._connect()
            except (sqlite3.DatabaseError, _ForeignFile) as exc:
                if isinstance(exc, sqlite3.OperationalError):
                    raise
                self._set_aside(exc)
                connection = self._connect()
            stat = self.path.stat()
            self._inode = (stat.st_dev, stat.st_ino)
        except (OSError, sqlite3.Error, _ForeignFile) as exc:
            raise VectorStoreError(f"cannot open the vector store {self.path}: {exc}") from exc
        self._connection = connection
        return connection

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            with _transaction(connection):  # one worker at a time makes a new file the store
                application = connection.execute("PRAGMA application_id").fetchone()[0]
                version = connection.execute("PRAGMA user_version").fetchone()[0]
                tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if (application, version) != (APPLICATION_ID, SCHEMA_VERSION):
                    if application != 0 or version != 0 or tables:  # not a new empty file
                        raise _ForeignFile(f"application_id {application}, user_version {version}")
                    connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                for statement in _SCHEMA:
                    connection.execute(statement)
            (self._rows,) = connection.execute("SELECT count(*) FROM vectors").fetchone()
        except BaseException:
            connection.close()
            raise
        return connection

    def _set_aside(self, reason: Exception, only: tuple[int, int] | None = None) -> None:
        """Move a file that is not this store's (damaged, not SQLite, another application's)
        to ``<name>.damaged``, with its write-ahead log, so a new one can be made. ``only``:
        the file this connection opened; another one there (a worker replaced it) stays."""
        if only is not None:
            stat = self.path.stat() if self.path.exists() else None
            if stat is None or (stat.st_dev, stat.st_ino) != only:
                return
        for suffix in ("", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            if source.exists():
                os.replace(source, self.path.with_name(self.path.name + ".damaged" + suffix))
        logger.warning(
            "vector_store_replaced",
            extra={"fields": {"file": str(self.path), "reason": str(reason)[:200]}},
        )

    def _close_locked(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            self._close_locked()


class _ForeignFile(Exception):
    """The file is SQLite but not this store's (another application id or schema)."""
