"""Reading the usage log for ``toolprune usage report``: read-only connections, the
``--since`` window, the rows as :class:`proxy.usage.records.UsageData`."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from proxy.usage.records import CallRecord, ExampleRecord, RequestRecord, UsageData


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


def connect_read_only(path: Path | str) -> sqlite3.Connection:
    """A read-only connection (a report never writes, and may run as another user)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no usage database at {path}")
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)


def read_usage(path: Path | str, since: float | None = None) -> UsageData:
    """Read the log (rows at or after ``since``) for analysis. Raises FileNotFoundError
    when there is no database, sqlite3.Error when it cannot be read."""
    connection = connect_read_only(path)
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
    connection = connect_read_only(path)
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
