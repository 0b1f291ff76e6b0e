"""The rows one served acting request adds to the usage log (tables in
:mod:`proxy.usage.writer`): the request, its catalogue's tool sizes (once per catalogue),
every real tool call it shows (in its history or its response) with its status, and,
only with ``store_text``, example texts."""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.chat.identity import log_id
from proxy.chat.turn import Turn
from proxy.usage.history import history_calls, last_user_text
from proxy.usage.records import FORWARDED, HISTORY, LOADED, MISS
from selection.catalog import canonical_json


@dataclass(frozen=True)
class ActingEvent:
    """One served acting request, as queued by :meth:`proxy.usage.writer.UsageLog.record`."""

    ts: float
    turn: Turn
    decision: str
    number: int
    forwarded: tuple[str, ...]
    meta_events: tuple[Mapping[str, Any], ...]
    response_calls: tuple[str, ...]


@dataclass(frozen=True)
class PreviousRequest:
    """The last logged request of a conversation: what a new history call answers."""

    turn: int
    forwarded: frozenset[str]
    response_read: bool
    messages: int


def write_acting(
    db: sqlite3.Connection,
    event: ActingEvent,
    previous: OrderedDict[str, PreviousRequest],
    catalogs: set[str],
    store_text: bool,
) -> None:
    """Insert one acting request's rows (request, catalogue sizes once, real tool calls,
    examples when ``store_text``) in ``db``'s open transaction; update ``previous`` (the
    last request per conversation hash, most recent last) and ``catalogs`` (fingerprints
    whose sizes are stored)."""
    turn = event.turn
    conversation = log_id(turn.conversation)
    catalog = turn.catalog.fingerprint
    if catalog not in catalogs:
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
                for position, tool in enumerate(turn.catalog.tools)
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
            turn.path,
            turn.offered,
            len(event.forwarded),
            turn.schema_bytes_saved(),
            len(event.meta_events),
            json.dumps(loaded),
            turn.rounds,
        ),
    )
    messages = turn.body.get("messages")
    messages = messages if isinstance(messages, list) else []
    forwarded = frozenset(event.forwarded)
    before = previous.get(conversation)
    text_names = set(turn.catalog.names) if turn.text is not None else None
    for call in history_calls(messages, text_names):
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
        _insert_call(db, event.ts, conversation, catalog, call.tool, number, status,
                     "history", call.key, call.user_text, store_text)
    user_text = last_user_text(messages) if event.response_calls else None
    for name in event.response_calls:
        status = LOADED if name in loaded else FORWARDED if name in forwarded else MISS
        _insert_call(db, event.ts, conversation, catalog, name, event.number, status,
                     "response", None, user_text, store_text)
    previous[conversation] = PreviousRequest(
        turn=event.number,
        forwarded=forwarded,
        response_read=event.decision == "pruned" and turn.native is not None,
        messages=len(messages),
    )
    previous.move_to_end(conversation)

def _insert_call(
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
    store_text: bool,
) -> None:
    db.execute(
        "INSERT INTO calls (ts, conversation, catalog, tool, turn, status, source, call_key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (ts, conversation, catalog, tool, turn, status, source, key),
    )
    if store_text and user_text:
        db.execute(
            "INSERT INTO examples (ts, conversation, tool, text) VALUES (?, ?, ?, ?)",
            (ts, conversation, tool, user_text),
        )
