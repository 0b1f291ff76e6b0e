"""Learning from the usage log (``toolprune learn``, ``toolprune serve`` on a schedule,
``toolprune eval --learn-from``): read the evidence, learn a state per catalogue
(:mod:`selection.learning.learned`), promote it only when it ranks a held-back slice of the log
better than the state in use, and keep states and reports in the log's own file.

Evidence: every real call of the log with status ``forwarded``, ``loaded`` or ``miss``,
paired with the query vector of the request it answered (same conversation hash, turn
and catalogue; ``requests.query``, stored only with ``TOOLPRUNE_LEARN``), for every
catalogue holding the called tool with the same definition.

Guard: conversations are split by a hash of their id into :data:`HELD_BACK_FOLDS`
slices; each slice in turn is held back, and a candidate learned from the other slices
is replayed on its requests through the proxy's ranking as the log keeps it
(``requests.ranking``; re-centred and boosted by the candidate:
:mod:`selection.learning.guard`) next to the state in use (none: the unlearned ranking),
so every request is judged by a state that never saw it (cross-validation: a log of a
few dozen requests still proves something). Only a candidate whose recall@k is surely
higher (by two standard errors) and that spares the requests whose tools its slices
never called is promoted, learned again from all the evidence with the gain and
centering that won; otherwise the state in use stays (rolled back). The state
in use was learned from the held-back requests too, so the comparison favours it: a
candidate must beat it on requests only the state in use has seen. Each attempt is
recorded in the ``learned`` table with its report.

Bad input degrades to unlearned selection with one log line: an older log without query
vectors, vectors of another embedder, a corrupt or foreign stored state, a catalogue
whose definitions are gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from proxy.log import get_logger
from proxy.usage.learned_reads import read_states
from proxy.usage.reader import connect_read_only, read_definitions
from proxy.usage.schema import open_database
from selection.learning import (
    STATUS_WEIGHTS,
    Evidence,
    Fold,
    HeldBack,
    LearnedState,
    LearnedStates,
    LoggedRanking,
    LoggedRankingError,
    decode_ranking,
    encode_state,
    judge,
    learn,
)
from selection.types import Catalog, CatalogError, Embedder, SelectionError, parse_tools

logger = get_logger("learning")


class LearningEngine(Protocol):
    """What learning needs of selection's engine (``Selector.engine``): its embedder's
    id, the learned states it applies (None: learning is off) and a catalogue's dense
    index (``index_for``: the index and the seconds spent embedding; raises EmbedderError)."""

    embedder: Embedder
    learned: LearnedStates | None

    async def index_for(
        self, catalog: Catalog, examples: Mapping[str, Sequence[str]]
    ) -> tuple[Any, float]: ...

#: The log's conversations are split into this many held-back slices (by a hash of
#: their id); each is replayed against a candidate learned from the others.
HELD_BACK_FOLDS = 5
#: Fewest requests with evidence a pass judges (fewer prove nothing: on RestBench's
#: folds, states promoted on 5 requests lost recall@8 on cases they never saw).
MIN_HELD_BACK = 10
#: Rejected attempts whose reports are kept per catalogue.
KEPT_ATTEMPTS = 20


@dataclass(frozen=True)
class LearnOutcome:
    """One catalogue's learning attempt: evidence used, held-back recall@k (every request
    held back once) of the state in use (``before``) and of the candidates (``after``),
    the same over the ``untouched`` held-back requests (how many; their tools were never
    called in the candidate's slices), the ``gain`` and ``centering`` chosen, and whether
    it was promoted (then ``version`` is the new state's). ``reason``: ``promoted``,
    ``not_better``, ``too_little_traffic``, ``catalog_unknown``."""

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
    untouched: int = 0
    untouched_before: float = 0.0
    untouched_after: float = 0.0
    gain: float = 0.0
    centering: float = 0.0


def _bucket(conversation: str) -> int:
    return int.from_bytes(hashlib.blake2b(conversation.encode(), digest_size=4).digest(), "big")


def read_evidence(path: Path | str, embedder: str) -> dict[str, list[Evidence]]:
    """Evidence pairs by catalogue fingerprint (read-only). A call counts for every logged
    catalogue holding its tool with the same definition: a catalogue that changed keeps
    the evidence of its unchanged tools; a removed or redefined tool loses it, and a
    renamed one is not guessed. A pair carries its request's logged ranking for the
    catalogue it was logged on only (positions are that catalogue's). An older log, or
    vectors of another embedder, give none (one log line). Raises sqlite3.Error,
    FileNotFoundError."""
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
        columns = {row[1] for row in connection.execute("PRAGMA table_info(requests)")}
        ranking = "r.ranking" if "ranking" in columns else "NULL"  # logged before rankings
        rows = connection.execute(
            "SELECT t.definition, c.conversation, c.tool, c.status, c.ts, r.id, r.query, "
            f"{ranking}, r.catalog "
            "FROM calls c JOIN requests r ON r.id = ("
            " SELECT MAX(id) FROM requests WHERE conversation = c.conversation"
            " AND turn = c.turn AND catalog = c.catalog AND query IS NOT NULL) "
            "JOIN catalog_tools t ON t.catalog = c.catalog AND t.tool = c.tool "
            f"WHERE c.status IN ({', '.join('?' for _ in statuses)}) ORDER BY c.id",
            statuses,
        ).fetchall()
        members = connection.execute(
            "SELECT catalog, tool, definition FROM catalog_tools"
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
    by_tool: dict[tuple[str, str], list[tuple[Evidence, str]]] = defaultdict(list)
    for definition, conversation, tool, status, ts, request, blob, ranking, logged in rows:
        vector = np.frombuffer(blob, dtype=np.float16)
        by_tool[(tool, definition)].append(
            (Evidence(str(request), conversation, tool, status, vector, ts, ranking), logged)
        )
    evidence: dict[str, list[Evidence]] = defaultdict(list)
    for catalog, tool, definition in members:
        evidence[catalog].extend(
            pair if logged == catalog else replace(pair, ranking=None)
            for pair, logged in by_tool.get((tool, definition), ())
        )
    return {catalog: pairs for catalog, pairs in evidence.items() if pairs}


def _catalog(path: Path | str, fingerprint: str) -> Catalog | None:
    definitions = read_definitions(path, fingerprint)
    try:
        catalog = parse_tools([json.loads(text) for text in definitions.values()])
    except (CatalogError, ValueError):
        return None
    return catalog if len(catalog) else None


def _held_back(held: Sequence[Evidence], taught: set[str], n_tools: int) -> list[HeldBack]:
    grouped: dict[str, tuple[Evidence, list[str]]] = {}
    for pair in held:
        grouped.setdefault(pair.request, (pair, []))[1].append(pair.tool)
    requests = []
    for first, tools in grouped.values():
        query = np.asarray(first.vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        requests.append(HeldBack(query, tuple(dict.fromkeys(tools)), not taught & set(tools),
                                 _logged_ranking(first.ranking, n_tools)))
    return requests


def _logged_ranking(raw: bytes | None, n_tools: int) -> LoggedRanking | None:
    """A request's logged ranking, or None (not logged, or unreadable: replayed through
    the dense part)."""
    if raw is None:
        return None
    try:
        return decode_ranking(bytes(raw), n_tools)
    except LoggedRankingError:
        return None


async def learn_catalog(
    catalog: Catalog,
    fingerprint: str,
    pairs: Sequence[Evidence],
    current: LearnedState | None,
    engine: LearningEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    now: float,
) -> tuple[LearnOutcome, LearnedState | None]:
    """Learn ``fingerprint``'s candidate from ``pairs`` and judge it (module docstring):
    the outcome, and the state to promote (None: keep ``current``). Raises SelectionError
    when the catalogue cannot be indexed."""
    embedder = engine.embedder.id
    requests = len({p.request for p in pairs})
    folds = [[p for p in pairs if _bucket(p.conversation) % HELD_BACK_FOLDS == f]
             for f in range(HELD_BACK_FOLDS)]
    folds = [fold for fold in folds if fold]
    base = {"catalog": fingerprint, "tools": len(catalog), "pairs": len(pairs), "requests": requests,
                "held_back": requests, "k": k}
    if requests < MIN_HELD_BACK or len(folds) < 2:
        return LearnOutcome(**base, before=0.0, after=0.0, promoted=False,
                            reason="too_little_traffic"), None
    index, _ = await engine.index_for(catalog, examples)
    if pairs[0].vector.shape[0] != index.index.d:
        raise SelectionError("query vectors do not match the embedder's dimension")
    version = (current.version if current is not None else 0) + 1
    judged = []
    for held in folds:
        held_ids = {p.request for p in held}
        taught = [p for p in pairs if p.request not in held_ids]
        candidate = learn(taught, catalog=fingerprint, embedder=embedder, version=version,
                          created=now)
        judged.append(Fold(candidate, _held_back(held, {p.tool for p in taught}, len(catalog))))
    verdict = await asyncio.to_thread(judge, judged, current, catalog, index.best_scores, k)
    base.update(before=verdict.before, after=verdict.after, untouched=verdict.untouched,
                untouched_before=verdict.untouched_before,
                untouched_after=verdict.untouched_after)
    if not verdict.better:
        return LearnOutcome(**base, promoted=False, reason="not_better"), None
    measured = {"before": verdict.before, "after": verdict.after, "held_back": float(requests),
                "k": k}
    state = learn(pairs, catalog=fingerprint, embedder=embedder, version=version, created=now,
                  measured=measured, gain=verdict.gain, centering=verdict.centering)
    return LearnOutcome(**base, promoted=True, reason="promoted", version=version,
                        learned_tools=len(state.learned_tools), size_bytes=state.size_bytes,
                        gain=verdict.gain, centering=verdict.centering), state


def record(path: Path | str, outcome: LearnOutcome, state: LearnedState | None, now: float) -> None:
    """Write an attempt's report (and a promoted state) to the ``learned`` table, which
    keeps per catalogue the promoted state in use and the one before it, and the reports
    of the last :data:`KEPT_ATTEMPTS` rejected attempts."""
    connection = open_database(Path(path), busy_timeout_s=5.0)
    try:
        version = outcome.version
        if version is None:  # a rejected attempt: numbered below any promotion
            row = connection.execute(
                "SELECT MIN(version) FROM learned WHERE catalog = ?", (outcome.catalog,)
            ).fetchone()
            version = min(0, row[0] or 0) - 1
        connection.execute(
            "INSERT OR IGNORE INTO learned (catalog, version, ts, promoted, state, report) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (outcome.catalog, version, now, int(state is not None),
             encode_state(state) if state is not None else None,
             json.dumps({**asdict(outcome), "ts": now})),
        )
        # Bounded: the state in use and the one before it, and the last rejected attempts.
        connection.execute(
            "DELETE FROM learned WHERE catalog = ?1 AND promoted = 1 AND version < "
            "(SELECT MAX(version) FROM learned WHERE catalog = ?1 AND promoted = 1) - 1",
            (outcome.catalog,),
        )
        connection.execute(
            "DELETE FROM learned WHERE catalog = ?1 AND promoted = 0 AND version NOT IN "
            "(SELECT version FROM learned WHERE catalog = ?1 AND promoted = 0 "
            f"ORDER BY ts DESC, version LIMIT {KEPT_ATTEMPTS})",
            (outcome.catalog,),
        )
    finally:
        connection.close()


async def learn_from_log(
    path: Path | str,
    engine: LearningEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    now: float,
    publish: Callable[[LearnedState], Awaitable[object]] | None = None,
) -> list[LearnOutcome]:
    """One learning run over the whole log (module docstring): per catalogue with
    evidence, an outcome; promoted states are written to the log, installed in
    ``engine.learned`` (when set) and given to ``publish`` (when set: shared with other
    replicas, :class:`proxy.usage.learning_share.SharedStates`; it must not raise). The
    state in use is the log's, or the one in ``engine.learned`` when its version is
    higher (installed from another replica): the candidate must beat it, and its version
    follows it. Raises sqlite3.Error, FileNotFoundError."""
    embedder = engine.embedder.id
    evidence = await asyncio.to_thread(read_evidence, path, embedder)
    current = await asyncio.to_thread(read_states, path, embedder)
    if engine.learned is not None:
        for state in engine.learned.states():
            held = current.get(state.catalog)
            if held is None or state.version > held.version:
                current[state.catalog] = state
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
        await asyncio.to_thread(record, path, outcome, state, now)
        if state is not None and engine.learned is not None:
            engine.learned.install_if_newer(state)
        if state is not None and publish is not None:
            await publish(state)
        logger.info("learning_outcome", extra={"fields": asdict(outcome)})
        outcomes.append(outcome)
    return outcomes

