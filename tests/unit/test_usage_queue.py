"""The usage log's queue holds what the writer needs of a request, never the request:
while the database is locked, served requests' bodies are not kept alive."""

from __future__ import annotations

import gc
import sqlite3
import weakref
from pathlib import Path

import numpy as np

from config.policy import load_policy
from config.settings import Settings
from proxy.turn.turn import Turn
from proxy.usage.reader import read_usage
from proxy.usage.writer import UsageLog
from selection.catalog.catalog import parse_tools
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from tests.support.selection import ranked
from tests.support.turns import planned_turn

FLUSH_TIMEOUT_S = 30.0


class Message(dict):  # a dict that can be weakly referenced
    pass


def served_turn(marker: Message) -> Turn:
    tools = [{"type": "function", "function": {"name": f"t{i}", "description": f"tool {i}"}}
             for i in range(12)]
    body = {"model": "m", "messages": [marker], "tools": tools}
    catalog = parse_tools(tools)
    policy = load_policy(Settings())
    scores = np.linspace(0.9, 0.0, len(catalog), dtype=np.float32)
    selection = select(catalog, ranked(scores), policy, ConversationState(), TurnFacts(now=0.0))
    return planned_turn(body, catalog, selection, ranking=ranked(scores), conversation="conv")


def test_a_locked_database_does_not_keep_request_bodies_alive(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    log = UsageLog(db, busy_timeout_s=30.0)
    assert log.flush(FLUSH_TIMEOUT_S)  # the schema exists
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        marker = Message(role="user", content="x" * 1_000_000)
        alive = weakref.ref(marker)
        log.record(served_turn(marker), "pruned")
        del marker
        gc.collect()
        assert alive() is None, "the queued event keeps the request's messages alive"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert log.flush(FLUSH_TIMEOUT_S)
    assert log.close()
    (request,) = read_usage(db).requests
    assert (request.offered, request.path) == (12, "native")
