"""A counted session's seconds on a hardware profile, whole and per user turn.

A session is its model requests in the order they reached the upstream, each a row
``{"turn", "status", "evaluated", "generated", "client"}`` (``benchmarks.long_session_runs``):
its user turn (1-based), llama-server's status, evaluated prompt tokens, generated
tokens, and the index of the client request it serves (the proxy's hidden rounds serve
the client request that started them; directly each request is its own). A request's
seconds are :func:`~benchmarks.support.hardware_profiles.request_seconds`; a row refused
or not counted (no ``generated``) leaves the session's seconds unknown (None).

**A user turn's wait** is what the user waits for the first token of each answer the
client gets in that turn, summed over the turn's client requests: for each, its rounds
before the last whole (a hidden round's prefill, decode and fixed cost) and its last
round's prefill and fixed cost (the first token follows). **A turn's seconds** are all
its requests' seconds: the waits, and the generation of each answer the client gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from benchmarks.support.hardware_profiles import Profile, first_token_seconds, request_seconds

Row = Mapping[str, Any]


def row_seconds(row: Row, profile: Profile) -> float | None:
    """One request's seconds (None: refused, or its generated tokens not counted)."""
    if row.get("status") != 200 or row.get("evaluated") is None or row.get("generated") is None:
        return None
    return request_seconds(row["evaluated"], row["generated"], profile)


def session_seconds(rows: Iterable[Row], profile: Profile) -> float | None:
    """The session's seconds: every request's, summed (None: one is unknown)."""
    total = 0.0
    for row in rows:
        seconds = row_seconds(row, profile)
        if seconds is None:
            return None
        total += seconds
    return total


def total_of(rows: Iterable[Row], key: str) -> int | None:
    """``key`` (``evaluated``, ``generated``) summed over the rows (None: one lacks it)."""
    values = [row.get(key) for row in rows]
    return None if any(value is None for value in values) else sum(values)  # type: ignore[misc]


@dataclass(frozen=True)
class TurnSeconds:
    """One user turn on a profile: the user's ``wait_s`` for first tokens and its
    ``total_s`` (seconds; None: a request of the turn is unknown)."""

    turn: int
    wait_s: float | None
    total_s: float | None


def _client_wait(rounds: list[Row], profile: Profile) -> float | None:
    before = [row_seconds(row, profile) for row in rounds[:-1]]
    last = rounds[-1]
    if None in before or last.get("status") != 200 or last.get("evaluated") is None:
        return None
    return sum(before) + first_token_seconds(last["evaluated"], profile)  # type: ignore[arg-type]


def turn_seconds(rows: list[Row], profile: Profile) -> list[TurnSeconds]:
    """Each user turn's wait and seconds (module docstring), in turn order; consecutive
    rows serving the same client request are its rounds (a row without ``client`` is its
    own)."""
    turns: dict[int, list[list[Row]]] = {}
    keyed = [(row["client"] if row.get("client") is not None else f"own {index}", row)
             for index, row in enumerate(rows)]
    for _, group in groupby(keyed, key=lambda pair: pair[0]):
        rounds = [row for _, row in group]
        turns.setdefault(int(rounds[0]["turn"]), []).append(rounds)
    out = []
    for turn in sorted(turns):
        waits = [_client_wait(rounds, profile) for rounds in turns[turn]]
        total = session_seconds([row for rounds in turns[turn] for row in rounds], profile)
        out.append(TurnSeconds(turn, None if None in waits else sum(waits), total))  # type: ignore[arg-type]
    return out
