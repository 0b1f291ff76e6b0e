"""Learning in a running proxy (``TOOLPRUNE_LEARN``): the promoted states of the usage
log installed at start, the schedule of ``TOOLPRUNE_LEARN_INTERVAL_S``
(:func:`proxy.usage.learning.learn_from_log` on a timer) and, with a Redis state store,
the states of other replicas installed at start and every ``TOOLPRUNE_LEARN_REFRESH_S``
(:class:`proxy.usage.learning_share.SharedStates`)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from proxy.log import get_logger
from proxy.usage.learned_reads import read_states
from proxy.usage.learning import LearningEngine, learn_from_log
from proxy.usage.learning_share import SharedStates
from selection.learning import LearnedStates
from selection.planning import Selector
from selection.types import SelectionError

logger = get_logger("learning")


def load_states(path: Path | str, learned: LearnedStates) -> int:
    """Install the promoted states of the log at ``path`` in ``learned``, each unless the
    state in use has the same or a higher version (another replica's, from Redis); how
    many. A log that cannot be read installs none, with one log line."""
    try:
        states = read_states(path, learned.embedder)
    except (OSError, sqlite3.Error) as error:
        logger.warning(
            "learned_states_unavailable",
            extra={"fields": {"error": type(error).__name__, "detail": str(error),
                              "db": str(path)}},
        )
        return 0
    return sum(learned.install_if_newer(state) for state in states.values())


async def learn_periodically(
    path: Path | str,
    engine: LearningEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    interval_s: float,
    shared: SharedStates | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """``toolprune serve``'s schedule: every ``interval_s`` seconds, install what other
    processes promoted (in the log, then in ``shared``), then run :func:`learn_from_log`,
    publishing its promotions to ``shared``. A failed run is logged and the schedule goes
    on (selection keeps the states it has)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            if engine.learned is not None:
                await asyncio.to_thread(load_states, path, engine.learned)
                if shared is not None:
                    await shared.refresh(engine.learned)
            await learn_from_log(path, engine, examples, k=k, now=clock(),
                                 publish=shared.publish if shared is not None else None)
        except (OSError, sqlite3.Error, SelectionError) as error:
            logger.warning(
                "learning_failed",
                extra={"fields": {"error": type(error).__name__, "detail": str(error),
                                  "db": str(path)}},
            )


async def refresh_periodically(
    shared: SharedStates, learned: LearnedStates, interval_s: float
) -> None:
    """Install the states ``shared`` holds newer than ``learned``'s at once, then every
    ``interval_s`` seconds (0: once). :meth:`SharedStates.refresh` never raises: Redis
    down costs the refresh, not the task."""
    while True:
        await shared.refresh(learned)
        if interval_s <= 0:
            return
        await asyncio.sleep(interval_s)


def start_learning(
    path: Path,
    interval_s: float,
    selector: Selector,
    *,
    shared: SharedStates | None = None,
    refresh_s: float = 0.0,
) -> list[asyncio.Task[None]]:
    """At ``toolprune serve``'s start with ``TOOLPRUNE_LEARN``: give ``selector``'s engine
    the promoted states of the usage log at ``path``; with ``shared``, start installing the
    states of other replicas (at once, then every ``refresh_s`` > 0 seconds); with
    ``interval_s`` > 0, start the schedule. The tasks to cancel at shutdown."""
    engine, policy = selector.engine, selector.policy
    engine.learned = LearnedStates(engine.embedder.id)
    if path.is_file():
        installed = load_states(path, engine.learned)
        logger.info("learned_states_loaded", extra={"fields": {"states": installed}})
    tasks = []
    if shared is not None:
        tasks.append(asyncio.create_task(refresh_periodically(shared, engine.learned, refresh_s)))
    if interval_s > 0:
        tasks.append(asyncio.create_task(learn_periodically(
            path, engine, policy.examples, k=policy.top_k, interval_s=interval_s, shared=shared,
        )))
    return tasks
