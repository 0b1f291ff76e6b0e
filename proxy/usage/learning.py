"""Learning from the usage log (``toolprune learn``, ``toolprune serve`` on a schedule,
``toolprune eval --learn-from``): read the evidence, learn a state per catalogue
(:mod:`selection.learned`), promote it only when it ranks a held-back slice of the log
better than the state in use, and keep states and reports in the log's own file.

Evidence: every real call of the log with status ``forwarded``, ``loaded`` or ``miss``,
paired with the query vector of the request it answered (same conversation hash, turn
and catalogue; ``requests.query``, stored only with ``TOOLPRUNE_LEARN``).

Guard: conversations are split by a hash of their id: one in :data:`HELD_BACK_EVERY`
is held back. A candidate learned from the others is replayed on the held-back requests
through the dense part of the proxy's scoring (the catalogue's index, plus the learned
boost: :func:`selection.learned.held_back_recall`) next to the state in use (none: the
unlearned ranking). Only a candidate with a higher recall@k is promoted, learned again
from all the evidence; otherwise the state in use stays (rolled back). Each attempt is
recorded in the ``learned`` table with its report.

Bad input degrades to unlearned selection with one log line: an older log without query
vectors, vectors of another embedder, a corrupt or foreign stored state, a catalogue
whose definitions are gone.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from proxy.log import get_logger
from proxy.usage.reader import connect_read_only, read_definitions
from proxy.usage.schema import open_database
from selection.catalog import Catalog, parse_tools
from selection.engine import SelectionEngine
from selection.errors import CatalogError, SelectionError
from selection.learned import (
    STATUS_WEIGHTS,
    Evidence,
    LearnedIndex,
    LearnedState,
    LearnedStateError,
    decode_state,
    encode_state,
    held_back_recall,
    learn,
)

logger = get_logger("learning")

#: One conversation in this many is held back to judge a candidate.
HELD_BACK_EVERY = 5
#: Fewest held-back requests a promotion needs (fewer prove nothing).
MIN_HELD_BACK = 3


@dataclass(frozen=True)
class LearnOutcome:
    """One catalogue's learning attempt: evidence used, held-back recall@k of the state in
    use (``before``) and of the candidate (``after``), and whether it was promoted (then
    ``version`` is the new state's). ``reason``: ``promoted``, ``not_better``,
    ``too_little_traffic``, ``catalog_unknown``."""

    catalog: str
    tools: int
    pairs: int
    requests: int
    held_back: int
    k: int
    before: float
    after: float
    promoted: bool
    reason: str
    version: int | None = None
    learned_tools: int = 0
    size_bytes: int = 0


def _bucket(conversation: str) -> int:
    return int.from_bytes(hashlib.blake2b(conversation.encode(), digest_size=4).digest(), "big")


def read_evidence(path: Path | str, embedder: str) -> dict[str, list[Evidence]]:
    """Evidence pairs by catalogue fingerprint (read-only). An older log, or vectors of
    another embedder, give none (one log line). Raises sqlite3.Error, FileNotFoundError."""
    connection = connect_read_only(path)
    try:
        row = connection.execute(
            "SELECT value FROM meta WHERE key = 'query_embedder'"
        ).fetchone()
        if row is None or row[0] != embedder:
            logger.warning(
                "learning_skipped",
                extra={"fields": {"reason": "no query vectors of this embedder in the usage log",
                                  "db": str(path)}},
            )
            return {}
        statuses = tuple(STATUS_WEIGHTS)
        rows = connection.execute(
            "SELECT c.catalog, c.conversation, c.tool, c.status, c.ts, r.id, r.query "
            "FROM calls c JOIN requests r ON r.id = ("
            " SELECT MAX(id) FROM requests WHERE conversation = c.conversation"
            " AND turn = c.turn AND catalog = c.catalog AND query IS NOT NULL) "
            f"WHERE c.status IN ({', '.join('?' for _ in statuses)}) ORDER BY c.id",
            statuses,
        ).fetchall()
    except sqlite3.OperationalError as error:
        if "no such column" not in str(error) and "no such table" not in str(error):
            raise
        logger.warning(
            "learning_skipped",
            extra={"fields": {"reason": "usage log of an older version", "db": str(path)}},
        )
        return {}
    finally:
        connection.close()
    evidence: dict[str, list[Evidence]] = defaultdict(list)
    for catalog, conversation, tool, status, ts, request, blob in rows:
        vector = np.frombuffer(blob, dtype=np.float16)
        evidence[catalog].append(Evidence(str(request), conversation, tool, status, vector, ts))
    return dict(evidence)


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


def _catalog(path: Path | str, fingerprint: str) -> Catalog | None:
    definitions = read_definitions(path, fingerprint)
    try:
        catalog = parse_tools([json.loads(text) for text in definitions.values()])
    except (CatalogError, ValueError):
        return None
    return catalog if len(catalog) else None


def _requests(pairs: Sequence[Evidence]) -> list[tuple[np.ndarray, list[str]]]:
    grouped: dict[str, tuple[np.ndarray, list[str]]] = {}
    for pair in pairs:
        grouped.setdefault(pair.request, (pair.vector, []))[1].append(pair.tool)
    return list(grouped.values())


async def learn_catalog(
    catalog: Catalog,
    fingerprint: str,
    pairs: Sequence[Evidence],
    current: LearnedState | None,
    engine: SelectionEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    now: float,
) -> tuple[LearnOutcome, LearnedState | None]:
    """Learn ``fingerprint``'s candidate from ``pairs`` and judge it (module docstring):
    the outcome, and the state to promote (None: keep ``current``). Raises SelectionError
    when the catalogue cannot be indexed."""
    embedder = engine.embedder.id
    held = [p for p in pairs if _bucket(p.conversation) % HELD_BACK_EVERY == 0]
    taught = [p for p in pairs if _bucket(p.conversation) % HELD_BACK_EVERY != 0]
    held_requests = _requests(held)
    requests = len({p.request for p in pairs})
    base = dict(catalog=fingerprint, tools=len(catalog), pairs=len(pairs), requests=requests,
                held_back=len(held_requests), k=k)
    if len(held_requests) < MIN_HELD_BACK or not taught:
        return LearnOutcome(**base, before=0.0, after=0.0, promoted=False,
                            reason="too_little_traffic"), None
    index, _ = await engine.index_for(catalog, examples)
    dense = []
    for vector, _tools in held_requests:
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if query.shape[1] != index.index.d:
            raise SelectionError("query vectors do not match the embedder's dimension")
        dense.append(index.best_scores(query / max(float(np.linalg.norm(query)), 1e-12)))
    version = (current.version if current is not None else 0) + 1
    candidate = learn(taught, catalog=fingerprint, embedder=embedder, version=version, created=now)
    in_use = LearnedIndex.bind(current, catalog) if current is not None else None
    before = held_back_recall(held_requests, dense, catalog, in_use, k)
    after = held_back_recall(held_requests, dense, catalog, LearnedIndex.bind(candidate, catalog), k)
    if after <= before:
        return LearnOutcome(**base, before=before, after=after, promoted=False,
                            reason="not_better"), None
    measured = {"before": before, "after": after, "held_back": float(len(held_requests)), "k": k}
    state = learn(pairs, catalog=fingerprint, embedder=embedder, version=version, created=now,
                  measured=measured)
    return LearnOutcome(**base, before=before, after=after, promoted=True, reason="promoted",
                        version=version, learned_tools=len(state.learned_tools),
                        size_bytes=state.size_bytes), state


def record(path: Path | str, outcome: LearnOutcome, state: LearnedState | None, now: float) -> None:
    """Write an attempt's report (and a promoted state) to the ``learned`` table."""
    connection = open_database(Path(path), busy_timeout_s=5.0)
    try:
        version = outcome.version
        if version is None:  # a rejected attempt: numbered below any promotion
            row = connection.execute(
                "SELECT MIN(version) FROM learned WHERE catalog = ?", (outcome.catalog,)
            ).fetchone()
            version = min(0, row[0] or 0) - 1
        connection.execute(
            "INSERT INTO learned (catalog, version, ts, promoted, state, report) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (outcome.catalog, version, now, int(state is not None),
             encode_state(state) if state is not None else None,
             json.dumps({**asdict(outcome), "ts": now})),
        )
    finally:
        connection.close()


async def learn_from_log(
    path: Path | str,
    engine: SelectionEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    now: float,
) -> list[LearnOutcome]:
    """One learning run over the whole log (module docstring): per catalogue with
    evidence, an outcome; promoted states are written to the log and installed in
    ``engine.learned`` (when set). Raises sqlite3.Error, FileNotFoundError."""
    embedder = engine.embedder.id
    evidence = read_evidence(path, embedder)
    current = read_states(path, embedder)
    outcomes = []
    for fingerprint, pairs in evidence.items():
        catalog = _catalog(path, fingerprint)
        if catalog is None:
            outcome = LearnOutcome(fingerprint, 0, len(pairs), 0, 0, k, 0.0, 0.0, False,
                                   "catalog_unknown")
            outcomes.append(outcome)
            continue
        outcome, state = await learn_catalog(
            catalog, fingerprint, pairs, current.get(fingerprint), engine, examples, k=k, now=now
        )
        record(path, outcome, state, now)
        if state is not None and engine.learned is not None:
            engine.learned.install(state)
        logger.info("learning_outcome", extra={"fields": asdict(outcome)})
        outcomes.append(outcome)
    return outcomes
