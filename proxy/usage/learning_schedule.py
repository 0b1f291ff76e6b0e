"""Learning in a running proxy (``TOOLPRUNE_LEARN``): the promoted states of the usage
log installed at start, and the schedule of ``TOOLPRUNE_LEARN_INTERVAL_S``
(:func:`proxy.usage.learning.learn_from_log` on a timer)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from proxy.log import get_logger
from proxy.usage.learning import learn_from_log, read_states
from selection.engine import SelectionEngine
from selection.errors import SelectionError
from selection.learned import LearnedStates
from selection.policy import Policy

logger = get_logger("learning")


def load_states(path: Path | str, learned: LearnedStates) -> int:
    """Install the promoted states of the log at ``path`` in ``learned``; how many. A log
    that cannot be read installs none, with one log line."""
    try:
        states = read_states(path, learned.embedder)
    except (OSError, sqlite3.Error) as error:
        logger.warning(
            "learned_states_unavailable",
            extra={"fields": {"error": type(error).__name__, "detail": str(error),
                              "db": str(path)}},
        )
        return 0
    for state in states.values():
        learned.install(state)
    return len(states)


async def learn_periodically(
    path: Path | str,
    engine: SelectionEngine,
    examples: Mapping[str, Sequence[str]],
    *,
    k: int,
    interval_s: float,
    clock: Callable[[], float] = time.time,
) -> None:
    """``toolprune serve``'s schedule: every ``interval_s`` seconds, install what other
    processes promoted, then run :func:`learn_from_log`. A failed run is logged and the
    schedule goes on (selection keeps the states it has)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            if engine.learned is not None:
                await asyncio.to_thread(load_states, path, engine.learned)
            await learn_from_log(path, engine, examples, k=k, now=clock())
        except (OSError, sqlite3.Error, SelectionError) as error:
            logger.warning(
                "learning_failed",
                extra={"fields": {"error": type(error).__name__, "detail": str(error),
                                  "db": str(path)}},
            )


def start_learning(
    path: Path, interval_s: float, engine: SelectionEngine, policy: Policy
) -> asyncio.Task[None] | None:
    """At ``toolprune serve``'s start with ``TOOLPRUNE_LEARN``: give ``engine`` the
    promoted states of the usage log at ``path`` and, with ``interval_s`` > 0, start the
    schedule (the task to cancel at shutdown; None without a schedule)."""
    engine.learned = LearnedStates(engine.embedder.id)
    if path.is_file():
        installed = load_states(path, engine.learned)
        logger.info("learned_states_loaded", extra={"fields": {"states": installed}})
    if interval_s <= 0:
        return None
    return asyncio.create_task(learn_periodically(
        path, engine, policy.examples, k=policy.top_k, interval_s=interval_s,
    ))
