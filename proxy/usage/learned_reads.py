"""The usage log's ``learned`` table read back (read-only): the embedder its query vectors
are of, the promoted states by catalogue, every learning attempt's report and a summary
of them (``toolprune usage report``, ``toolprune serve``'s start). Written by
:mod:`proxy.usage.learning`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from proxy.log import get_logger
from proxy.usage.reader import connect_read_only
from selection.learning import LearnedState, LearnedStateError, decode_state

logger = get_logger("learning")


def read_embedder(path: Path | str) -> str | None:
    """The id of the embedder whose query vectors the log holds (None: none, or an older
    log). Raises sqlite3.Error, FileNotFoundError."""
    connection = connect_read_only(path)
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = 'query_embedder'").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        connection.close()
    return None if row is None else str(row[0])


def read_states(path: Path | str, embedder: str) -> dict[str, LearnedState]:
    """The promoted state in use per catalogue (its latest promotion). A corrupt or foreign
    one is skipped with one log line; none for an older log."""
    connection = connect_read_only(path)
    try:
        rows = connection.execute(
            "SELECT catalog, state FROM learned l WHERE promoted = 1 AND version = "
            "(SELECT MAX(version) FROM learned WHERE catalog = l.catalog AND promoted = 1)"
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        connection.close()
    states: dict[str, LearnedState] = {}
    for catalog, blob in rows:
        try:
            states[catalog] = decode_state(bytes(blob), catalog=catalog, embedder=embedder)
        except LearnedStateError as error:
            logger.warning(
                "learned_state_ignored",
                extra={"fields": {"catalog": catalog, "reason": str(error), "db": str(path)}},
            )
    return states


def read_reports(path: Path | str) -> list[dict]:
    """Every learning attempt's report, newest first (empty for an older log)."""
    connection = connect_read_only(path)
    try:
        rows = connection.execute(
            "SELECT report FROM learned ORDER BY ts DESC, version DESC"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        connection.close()
    return [json.loads(row[0]) for row in rows]


def summarise(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per catalogue (most recent first): the promotion in use (``in_use``, or None) and
    the last attempt (``last``), from :func:`read_reports`' newest-first list."""
    rows: dict[str, dict[str, Any]] = {}
    for report in reports:
        row = rows.setdefault(report["catalog"], {"catalog": report["catalog"], "in_use": None,
                                                  "last": report})
        if report.get("promoted") and row["in_use"] is None:
            row["in_use"] = report
    return list(rows.values())
