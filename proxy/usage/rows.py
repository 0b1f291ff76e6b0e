"""The rows one served acting request adds to the usage log (tables in
:mod:`proxy.usage.writer`): the request, its catalogue's tool sizes (once per catalogue),
every real tool call it shows (in its history or its response) with its status, only
with ``store_vectors`` the query's vector (float16: what learning reads, instead of text)
and the request's ranking (:mod:`selection.learning.logged_ranking`: what learning's guard replays),
and only with ``store_text`` example texts."""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from proxy.turn.identity import log_id
from proxy.turn.turn import Turn
from proxy.usage.history import HistoryCall, history_calls, last_user_text
from proxy.usage.records import FORWARDED, HISTORY, LOADED, MISS
from selection.learning import encode_ranking
from selection.types import Catalog, canonical_json


@dataclass(frozen=True)
class ActingEvent:
    """One served acting request, as queued by :meth:`proxy.usage.writer.UsageLog.record`:
    what the writer needs of it, extracted on the request path, so the queue never holds a
    request body (a locked database must not keep whole requests alive). ``catalog`` is
    kept only while the catalogue's tool sizes may not be written yet."""

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
    history: tuple[HistoryCall, ...]
    user_text: str | None  # only with store_text and response calls
    messages: int
    response_read: bool
    query: bytes | None = None  # float16 query vector, only with store_vectors
    ranking: bytes | None = None  # selection.learning.logged_ranking, only with store_vectors

    @classmethod
    def of(
        cls, turn: Turn, decision: str, ts: float, *, store_text: bool, written: set[str],
        store_vectors: bool = False,
    ) -> ActingEvent:
        """Extract ``turn``'s fields; ``written``: catalogue fingerprints already stored;
        ``store_vectors``: keep the query's vector (float16 bytes) and its ranking."""
        messages = turn.body.get("messages")
        messages = messages if isinstance(messages, list) else []
        text_names = set(turn.plan.catalog.names) if turn.plan.text is not None else None
        history = history_calls(messages, text_names)
        if not store_text:
            history = [replace(call, user_text=None) for call in history]
        fingerprint = turn.plan.catalog.fingerprint
        return cls(
            ts=ts,
            decision=decision,
            number=turn.plan.selection.state.turn,
            forwarded=tuple(tool.name for tool in turn.plan.selection.tools),
            meta_events=tuple(turn.meta_events),
            response_calls=tuple(turn.response_calls),
            conversation=log_id(turn.conversation),
            catalog_fingerprint=fingerprint,
            catalog=None if fingerprint in written else turn.plan.catalog,
            path=turn.path,
            offered=turn.offered,
            schema_bytes_saved=turn.plan.schema_bytes_saved(),
            rounds=turn.rounds,
            history=tuple(history),
            user_text=last_user_text(messages) if store_text and turn.response_calls else None,
            messages=len(messages),
            response_read=decision == "pruned" and turn.plan.native is not None,
            query=(
                np.asarray(turn.query_vector, dtype=np.float16).tobytes()
                if store_vectors and turn.query_vector is not None
                else None
            ),
            ranking=_ranking(turn) if store_vectors and turn.query_vector is not None else None,
        )


def _ranking(turn: Turn) -> bytes | None:
    """The turn's unboosted scores as :func:`~selection.learning.logged_ranking.encode_ranking`
    keeps them, with the tools its response called; None when it was not ranked by its
    whole index (still being built: not the ranking its catalogue gets)."""
    ranking = turn.plan.ranking
    if ranking is None or ranking.partial or ranking.lexical_only:
        return None
    values = ranking.without("learned")
    called = [p for name in turn.response_calls if (p := turn.plan.catalog.index_of(name)) is not None]
    return encode_ranking(values, called)


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
        "forwarded, schema_bytes_saved, meta_calls, meta_loaded, rounds, query, ranking) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            event.query,
            event.ranking,
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
        _insert_call(db, event.ts, conversation, catalog, call.tool, number, status,
                     "history", call.key, call.user_text, store_text)
    user_text = event.user_text
    for name in event.response_calls:
        status = LOADED if name in loaded else FORWARDED if name in forwarded else MISS
        _insert_call(db, event.ts, conversation, catalog, name, event.number, status,
                     "response", None, user_text, store_text)
    previous[conversation] = PreviousRequest(
        turn=event.number,
        forwarded=forwarded,
        response_read=event.response_read,
        messages=event.messages,
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
