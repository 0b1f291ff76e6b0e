"""The usage log (``TOOLPRUNE_USAGE_DB``): what the proxy saw, in an embedded SQLite
database (stdlib ``sqlite3``, WAL mode), for ``toolprune usage report``.

Writes are off the request path: :meth:`UsageLog.record` only puts the served turn on a
bounded queue; a daemon writer thread drains it and writes in batches, one transaction
per batch. A locked, read-only or broken database never fails or delays a request: the
writer logs the error (rate-limited), drops the batch and counts it (``dropped``); a full
queue drops too. Rows older than ``retention_days`` are deleted when the database is
opened and every ``retention_interval_s`` after, so the file never grows without bound.

Tables:

* ``requests``: per acting request (``pruned``/``dry_run``) the time, the conversation id
  *hash* (:func:`proxy.turn.log_id`, never the id), catalogue fingerprint, turn number,
  path, tools offered and forwarded, schema bytes saved, meta-calls (count and the names
  they loaded) and rounds; per fallback the time and reason.
* ``calls``: every real tool call seen, once: in the response the client got
  (``turn.response_calls``) and in request histories (assistant ``tool_calls``; on the
  text path, tools named in assistant text). ``status``: ``forwarded`` (in the
  selection), ``loaded`` (reached through a meta-tool in that request), ``miss`` (called
  but not forwarded), ``history`` (seen only in a history). A history call is matched to
  the response call it repeats by conversation and name, in order (responses carry no
  call ids here), and then keyed by its call id so it is never counted again. A new
  history call that answers a request whose response the proxy did not read (text path,
  dry run) is classified against that request's selection instead (``forwarded`` or
  ``miss``, at its turn).
* ``catalog_tools``: per catalogue fingerprint each tool's schema size (``Tool
  .size_bytes``) and canonical definition (tool schemas, no message text), written once.
* ``examples``: only with ``store_text``: the user message that preceded each real tool
  call (a candidate example utterance for that tool). Without it no message text is
  ever written.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from proxy.log import RateLimitedLog, get_logger
from proxy.turn import Turn, log_id
from selection.catalog import Catalog, canonical_json
from selection.query import content_text
from selection.text_path import text_called_tools
from selection.usage_analysis import (
    FORWARDED,
    HISTORY,
    LOADED,
    MISS,
    CallRecord,
    ExampleRecord,
    RequestRecord,
    UsageData,
)

logger = get_logger("usage")

SCHEMA_VERSION = 1
#: Longest user text kept per example (characters).
EXAMPLE_MAX_CHARS = 4000

_SCHEMA = """
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
    rounds INTEGER
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts);
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
"""


class UsageRecorder(Protocol):
    """What :class:`proxy.chat.ChatHandler` calls; must never raise nor block."""

    def record(self, turn: Turn, decision: str) -> None: ...

    def record_fallback(self, reason: str) -> None: ...


@dataclass(frozen=True)
class _Acting:
    """What the writer needs of one served turn, extracted on the request path: the queue
    never holds a request body (a locked database must not keep whole requests alive).
    ``catalog`` is kept only while the catalogue's tools may not be written yet."""

    ts: float
    decision: str
    number: int
    forwarded: tuple[str, ...]
    meta_events: tuple[Mapping[str, Any], ...]
    response_calls: tuple[str, ...]
    conversation: str  # log_id: a hash, never the id
    catalog_fingerprint: str
    catalog: Catalog | None
    path: str
    offered: int
    schema_bytes_saved: int
    rounds: int
    history: tuple[_HistoryCall, ...]
    user_text: str | None  # only with store_text and response calls
    messages: int
    response_read: bool


@dataclass(frozen=True)
class _Fallback:
    ts: float
    reason: str


@dataclass(frozen=True)
class _Flush:
    done: threading.Event


_STOP = object()


@dataclass(frozen=True)
class _Previous:
    """The last logged request of a conversation: what a new history call answers."""

    turn: int
    forwarded: frozenset[str]
    response_read: bool
    messages: int


@dataclass(frozen=True)
class _HistoryCall:
    key: str
    tool: str
    turn: int
    message: int
    user_text: str | None


def last_user_text(messages: Sequence[Any], before: int | None = None) -> str | None:
    """The text of the last ``user`` message before index ``before`` (all: None)."""
    end = len(messages) if before is None else before
    for message in reversed(messages[:end]):
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = content_text(message.get("content")).strip()
            return text[:EXAMPLE_MAX_CHARS] if text else None
    return None


def history_calls(messages: Sequence[Any], text_names: set[str] | None) -> list[_HistoryCall]:
    """Real tool calls in a request's history, in order. ``turn``: the request that made
    the call, counted as the assistant message's ordinal (one assistant message per
    request in an agent loop). Keys: the call id; else the message and call position (a
    history only grows). ``text_names``: also tools named in assistant text (text path)."""
    found: list[_HistoryCall] = []
    assistants = 0
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        assistants += 1
        named: list[tuple[str, str]] = []
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str) and name:
                call_id = call.get("id")
                key = f"id:{call_id}" if isinstance(call_id, str) and call_id else f"m{index}:{position}"
                named.append((key, name))
        function_call = message.get("function_call")
        if isinstance(function_call, Mapping) and isinstance(function_call.get("name"), str):
            named.append((f"m{index}:f", function_call["name"]))
        if text_names:
            named += [(f"m{index}:t:{name}", name) for name in text_called_tools([message], text_names)]
        if named:
            user = last_user_text(messages, index)
            found += [_HistoryCall(key, name, assistants, index, user) for key, name in named]
    return found


class UsageLog:
    """The usage-log writer (see the module docstring).

    ``busy_timeout_s``: how long the writer waits for another connection's lock before a
    batch is dropped. ``max_pending``: events queued at most (more are dropped).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        store_text: bool = False,
        retention_days: float = 30.0,
        busy_timeout_s: float = 5.0,
        max_pending: int = 10_000,
        batch_size: int = 500,
        retention_interval_s: float = 3600.0,
        log_interval_s: float = 60.0,
        max_conversations: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.store_text = store_text
        self.retention_days = retention_days
        self.busy_timeout_s = busy_timeout_s
        self.batch_size = batch_size
        self.retention_interval_s = retention_interval_s
        self.clock = clock
        self.errors = 0
        self._written = 0
        self._dropped = 0
        self._counted = threading.Condition()
        self._queue: queue.Queue[object] = queue.Queue(max_pending)
        self._errors = RateLimitedLog(logger, log_interval_s)
        self._connection: sqlite3.Connection | None = None
        self._catalogs: set[str] = set()
        self._previous: OrderedDict[str, _Previous] = OrderedDict()
        self._max_conversations = max_conversations
        self._next_retention = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="toolprune-usage-log", daemon=True)
        self._thread.start()

    # --- request path -------------------------------------------------------------
    def record(self, turn: Turn, decision: str) -> None:
        """Queue one served acting request (never raises, never blocks)."""
        try:
            event = self._extract(turn, decision)
        except Exception:  # noqa: BLE001 - the log must never fail a request
            self._count(dropped=1)
            return
        self._put(event)

    def _extract(self, turn: Turn, decision: str) -> _Acting:
        messages = turn.body.get("messages")
        messages = messages if isinstance(messages, list) else []
        text_names = set(turn.catalog.names) if turn.text is not None else None
        history = history_calls(messages, text_names)
        if not self.store_text:
            history = [replace(call, user_text=None) for call in history]
        fingerprint = turn.catalog.fingerprint
        return _Acting(
            ts=self.clock(),
            decision=decision,
            number=turn.selection.state.turn,
            forwarded=tuple(tool.name for tool in turn.selection.tools),
            meta_events=tuple(turn.meta_events),
            response_calls=tuple(turn.response_calls),
            conversation=log_id(turn.conversation),
            catalog_fingerprint=fingerprint,
            catalog=None if fingerprint in self._catalogs else turn.catalog,
            path=turn.path,
            offered=turn.offered,
            schema_bytes_saved=turn.schema_bytes_saved(),
            rounds=turn.rounds,
            history=tuple(history),
            user_text=(
                last_user_text(messages) if self.store_text and turn.response_calls else None
            ),
            messages=len(messages),
            response_read=decision == "pruned" and turn.native is not None,
        )

    def record_fallback(self, reason: str) -> None:
        """Queue one fallback (never raises, never blocks)."""
        self._put(_Fallback(self.clock(), str(reason)))

    def _put(self, event: object) -> None:
        if self._closed:
            self._count(dropped=1)
            return
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._count(dropped=1)
            self._errors.error("queue_full", "usage_log_dropped", {"reason": "queue full"})

    # --- counters and control -----------------------------------------------------
    @property
    def written(self) -> int:
        """Events written to the database."""
        return self._written

    @property
    def dropped(self) -> int:
        """Events dropped: queue full, or the database could not take them."""
        return self._dropped

    def _count(self, *, written: int = 0, dropped: int = 0) -> None:
        with self._counted:
            self._written += written
            self._dropped += dropped
            self._counted.notify_all()

    def wait_for(self, events: int, timeout: float = 10.0) -> bool:
        """Wait until ``events`` events in all were written or dropped; False when
        ``timeout`` seconds passed first."""
        with self._counted:
            return self._counted.wait_for(lambda: self._written + self._dropped >= events, timeout)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every event queued before this call was written or dropped; False
        when ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        marker = _Flush(threading.Event())
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.done.wait(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is queued, stop the writer and close the database; False when the
        writer did not finish within ``timeout`` seconds (it is a daemon thread)."""
        if not self._closed:
            self._closed = True
            try:
                self._queue.put(_STOP, timeout=timeout)
            except queue.Full:
                return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # --- writer thread ------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._open_or_log()
            while True:
                try:
                    first = self._queue.get(timeout=max(self.retention_interval_s, 1.0))
                except queue.Empty:
                    self._maybe_retain()
                    continue
                batch = [first]
                while len(batch) < self.batch_size:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stop = self._process(batch)
                if stop:
                    return
        finally:
            self._disconnect()

    def _process(self, batch: list[object]) -> bool:
        events: list[_Acting | _Fallback] = []
        stop = False
        for item in batch:
            if item is _STOP:
                stop = True
            elif isinstance(item, _Flush):
                self._write(events)
                events = []
                item.done.set()
            elif isinstance(item, _Acting | _Fallback):
                events.append(item)
        self._write(events)
        return stop

    def _write(self, events: list[_Acting | _Fallback]) -> None:
        if not events:
            return
        try:
            connection = self._connect()
            self._maybe_retain()
            previous = OrderedDict(self._previous)
            catalogs = set(self._catalogs)
            connection.execute("BEGIN IMMEDIATE")
            try:
                for event in events:
                    if isinstance(event, _Fallback):
                        connection.execute(
                            "INSERT INTO requests (ts, decision, reason) VALUES (?, 'fallback', ?)",
                            (event.ts, event.reason),
                        )
                    else:
                        self._write_acting(connection, event, previous, catalogs)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            self._previous = previous
            while len(self._previous) > self._max_conversations:
                self._previous.popitem(last=False)
            self._catalogs = catalogs
            self._count(written=len(events))
        except Exception as error:  # noqa: BLE001 - a broken database must not stop the writer
            self._fail("write", error, len(events))

    def _write_acting(
        self,
        db: sqlite3.Connection,
        event: _Acting,
        previous: OrderedDict[str, _Previous],
        catalogs: set[str],
    ) -> None:
        conversation = event.conversation
        catalog = event.catalog_fingerprint
        if catalog not in catalogs and event.catalog is not None:
            db.executemany(
                "INSERT OR IGNORE INTO catalog_tools (catalog, position, tool, size_bytes, "
                "definition, ts) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        catalog,
                        position,
                        tool.name,
                        tool.size_bytes,
                        canonical_json(tool.definition).decode("utf-8", errors="replace"),
                        event.ts,
                    )
                    for position, tool in enumerate(event.catalog.tools)
                ],
            )
            catalogs.add(catalog)
        loaded = [
            name
            for meta in event.meta_events
            for name in (meta.get("loaded") or [])
            if isinstance(name, str)
        ]
        db.execute(
            "INSERT INTO requests (ts, decision, conversation, catalog, turn, path, offered, "
            "forwarded, schema_bytes_saved, meta_calls, meta_loaded, rounds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.ts,
                event.decision,
                conversation,
                catalog,
                event.number,
                event.path,
                event.offered,
                len(event.forwarded),
                event.schema_bytes_saved,
                len(event.meta_events),
                json.dumps(loaded),
                event.rounds,
            ),
        )
        forwarded = frozenset(event.forwarded)
        before = previous.get(conversation)
        for call in event.history:
            if db.execute(
                "SELECT 1 FROM calls WHERE conversation = ? AND call_key = ?",
                (conversation, call.key),
            ).fetchone():
                continue
            pending = db.execute(
                "SELECT id FROM calls WHERE conversation = ? AND tool = ? AND call_key IS NULL "
                "ORDER BY id LIMIT 1",
                (conversation, call.tool),
            ).fetchone()
            if pending is not None:
                db.execute("UPDATE calls SET call_key = ? WHERE id = ?", (call.key, pending[0]))
                continue
            status, number = HISTORY, call.turn
            if before is not None and not before.response_read and call.message >= before.messages:
                status = FORWARDED if call.tool in before.forwarded else MISS
                number = before.turn
            self._insert_call(db, event.ts, conversation, catalog, call.tool, number, status,
                              "history", call.key, call.user_text)
        user_text = event.user_text
        for name in event.response_calls:
            status = LOADED if name in loaded else FORWARDED if name in forwarded else MISS
            self._insert_call(db, event.ts, conversation, catalog, name, event.number, status,
                              "response", None, user_text)
        previous[conversation] = _Previous(
            turn=event.number,
            forwarded=forwarded,
            response_read=event.response_read,
            messages=event.messages,
        )
        previous.move_to_end(conversation)

    def _insert_call(
        self,
        db: sqlite3.Connection,
        ts: float,
        conversation: str,
        catalog: str,
        tool: str,
        turn: int,
        status: str,
        source: str,
        key: str | None,
        user_text: str | None,
    ) -> None:
        db.execute(
            "INSERT INTO calls (ts, conversation, catalog, tool, turn, status, source, call_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (ts, conversation, catalog, tool, turn, status, source, key),
        )
        if self.store_text and user_text:
            db.execute(
                "INSERT INTO examples (ts, conversation, tool, text) VALUES (?, ?, ?, ?)",
                (ts, conversation, tool, user_text),
            )

    # --- connection and retention -------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        connection = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # new files only
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.executescript(_SCHEMA)
            connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        self._next_retention = 0.0
        return connection

    def _open_or_log(self) -> None:
        try:
            self._connect()
            self._maybe_retain()
        except Exception as error:  # noqa: BLE001
            self._fail("open", error, 0)

    def _disconnect(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except sqlite3.Error:
                pass
            self._connection = None

    def _maybe_retain(self) -> None:
        """Delete rows older than the retention period (at most once per interval)."""
        if self._connection is None or time.monotonic() < self._next_retention:
            return
        self._next_retention = time.monotonic() + self.retention_interval_s
        try:
            self.retain()
        except Exception as error:  # noqa: BLE001
            self._fail("retention", error, 0)

    def retain(self) -> None:
        """Delete what is older than ``retention_days`` now (writer thread only; from
        elsewhere use :func:`apply_retention` on a connection of its own)."""
        assert self._connection is not None
        apply_retention(self._connection, self.clock() - self.retention_days * 86400.0)
        self._catalogs.clear()

    def _fail(self, operation: str, error: Exception, events: int) -> None:
        self.errors += 1
        self._count(dropped=events)
        self._errors.error(
            operation,
            "usage_log_error",
            {
                "operation": operation,
                "error": type(error).__name__,
                "detail": str(error),
                "dropped_events": events,
                "db": str(self.path),
            },
        )
        if isinstance(error, sqlite3.Error) and operation != "retention":
            self._disconnect()  # reopen on the next batch (the file may have been fixed)


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


# --------------------------------------------------------------------------- reading


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: an ISO date or date-time (UTC unless it says otherwise), or a
    duration back from now: ``7d``, ``12h``, ``30m``, ``2w``. Unix seconds; ValueError."""
    text = text.strip()
    units = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
    if len(text) > 1 and text[-1].lower() in units:
        try:
            amount = float(text[:-1])
        except ValueError:
            amount = None
        if amount is not None:
            if amount < 0:
                raise ValueError(f"negative duration {text!r}")
            return (time.time() if now is None else now) - amount * units[text[-1].lower()]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"not an ISO date nor a duration like 7d: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _reader(path: Path | str) -> sqlite3.Connection:
    """A read-only connection (a report never writes, and may run as another user)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no usage database at {path}")
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)


def read_usage(path: Path | str, since: float | None = None) -> UsageData:
    """Read the log (rows at or after ``since``) for analysis. Raises FileNotFoundError
    when there is no database, sqlite3.Error when it cannot be read."""
    connection = _reader(path)
    try:
        cutoff = float("-inf") if since is None else since
        requests = [
            RequestRecord(
                ts=row[0], decision=row[1], reason=row[2], conversation=row[3], catalog=row[4],
                turn=row[5], path=row[6], offered=row[7], forwarded=row[8],
                schema_bytes_saved=row[9], meta_calls=row[10] or 0,
            )
            for row in connection.execute(
                "SELECT ts, decision, reason, conversation, catalog, turn, path, offered, "
                "forwarded, schema_bytes_saved, meta_calls FROM requests WHERE ts >= ? "
                "ORDER BY id",
                (cutoff,),
            )
        ]
        calls = [
            CallRecord(ts=row[0], conversation=row[1], tool=row[2], turn=row[3], status=row[4],
                       catalog=row[5])
            for row in connection.execute(
                "SELECT ts, conversation, tool, turn, status, catalog FROM calls WHERE ts >= ? "
                "ORDER BY id",
                (cutoff,),
            )
        ]
        used = {r.catalog for r in requests if r.catalog} | {c.catalog for c in calls if c.catalog}
        catalogs: dict[str, dict[str, int]] = {}
        for catalog, tool, size in connection.execute(
            "SELECT catalog, tool, size_bytes FROM catalog_tools ORDER BY catalog, position"
        ):
            if catalog in used:
                catalogs.setdefault(catalog, {})[tool] = size
        examples = [
            ExampleRecord(tool=row[0], text=row[1], conversation=row[2])
            for row in connection.execute(
                "SELECT tool, text, conversation FROM examples WHERE ts >= ? ORDER BY id",
                (cutoff,),
            )
        ]
    finally:
        connection.close()
    return UsageData(requests, calls, catalogs, examples)


def read_definitions(path: Path | str, catalog: str) -> dict[str, str]:
    """A logged catalogue's tool definitions (canonical JSON), by name, in order."""
    connection = _reader(path)
    try:
        return {
            tool: definition
            for tool, definition in connection.execute(
                "SELECT tool, definition FROM catalog_tools WHERE catalog = ? ORDER BY position",
                (catalog,),
            )
            if definition is not None
        }
    finally:
        connection.close()
