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
  *hash* (:func:`proxy.turn.identity.log_id`, never the id), catalogue fingerprint, turn number,
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
* ``requests.query``: only with ``store_vectors`` (``TOOLPRUNE_LEARN``): the embedder's
  vector of the request's query, float16 bytes, never its text; ``meta.query_embedder``
  names the embedder (vectors of a previous embedder are erased when it changes).
  ``requests.ranking`` beside it: the proxy's unboosted scores of the request's best tools
  and of the tools its calls used (:mod:`selection.learning.logged_ranking`), which the guard of
  learned selection replays.
* ``learned``: learned states and their promotion reports (:mod:`proxy.usage.learning`),
  so deleting the file deletes what was learned from it.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from proxy.log import RateLimitedLog, get_logger
from proxy.turn.turn import Turn
from proxy.usage.rows import ActingEvent, PreviousRequest, write_acting
from proxy.usage.schema import apply_retention, claim_query_vectors, open_database

logger = get_logger("usage")


@dataclass(frozen=True)
class _Fallback:
    ts: float
    reason: str


@dataclass(frozen=True)
class _Flush:
    done: threading.Event


_STOP = object()


class UsageLog:
    """The usage-log writer (see the module docstring).

    ``busy_timeout_s``: how long the writer waits for another connection's lock before a
    batch is dropped. ``max_pending``: events queued at most (more are dropped).
    ``embedder``: the embedder id whose query vectors are stored (None: no vectors).
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
        embedder: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.store_text = store_text
        self.embedder = embedder
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
        self._previous: OrderedDict[str, PreviousRequest] = OrderedDict()
        self._max_conversations = max_conversations
        self._next_retention = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="toolprune-usage-log", daemon=True)
        self._thread.start()

    # --- request path -------------------------------------------------------------
    def record(self, turn: Turn, decision: str) -> None:
        """Queue one served acting request (never raises, never blocks)."""
        try:
            event = ActingEvent.of(
                turn, decision, self.clock(), store_text=self.store_text,
                written=self._catalogs, store_vectors=self.embedder is not None,
            )
        except Exception:  # noqa: BLE001 - the log must never fail a request
            self._count(dropped=1)
            return
        self._put(event)

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
        events: list[ActingEvent | _Fallback] = []
        stop = False
        for item in batch:
            if item is _STOP:
                stop = True
            elif isinstance(item, _Flush):
                self._write(events)
                events = []
                item.done.set()
            elif isinstance(item, ActingEvent | _Fallback):
                events.append(item)
        self._write(events)
        return stop

    def _write(self, events: list[ActingEvent | _Fallback]) -> None:
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
                        write_acting(connection, event, previous, catalogs, self.store_text)
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

    # --- connection and retention -------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        connection = open_database(self.path, self.busy_timeout_s)
        if self.embedder is not None:
            try:
                claim_query_vectors(connection, self.embedder)
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
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
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


