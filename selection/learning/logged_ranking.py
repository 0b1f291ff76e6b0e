"""The proxy's own ranking of a request, as the usage log keeps it for learning: what the
guard of learned selection (:mod:`selection.learning.guard`) replays a candidate state
against. Pure: no I/O.

The ranking is the request's fused scores as selection got them (cosine over the query's
parts, BM25, name match, the groups' share; :class:`selection.ranking.engine.Scores`), less any
learned boost: only for the :data:`TOP` best tools and the tools its calls used, so a row
costs 6 bytes a tool (uint32 position, float16 score), 1.5 KB or so. A tool left out
scored at most the :data:`TOP`-th best; the replay puts it there, so a boost that lifts it
is counted at its most, and the guard errs towards not promoting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: Best tools whose scores a logged ranking keeps (16 × the default ``max_tools``).
TOP = 256


class LoggedRankingError(ValueError):
    """Bytes that are not a logged ranking."""


@dataclass(frozen=True)
class LoggedRanking:
    """``positions`` int64 (m,) catalogue positions, best first, then the called tools
    below the top; ``scores`` float32 (m,) their unboosted scores; ``top``: how many of
    them are the best tools; ``bar``: the least of those, the most any tool left out
    scored."""

    positions: np.ndarray
    scores: np.ndarray
    top: int

    @property
    def bar(self) -> float:
        return float(self.scores[self.top - 1])

    def values(self, n_tools: int) -> np.ndarray:
        """The scores of a catalogue of ``n_tools``, float32 ``(n_tools,)``: the kept
        ones, and :attr:`bar` for every other tool."""
        values = np.full(n_tools, self.bar, dtype=np.float32)
        values[self.positions] = self.scores
        return values


def encode_ranking(values: np.ndarray, called: Iterable[int]) -> bytes:
    """A request's ranking as bytes: ``values`` float32 ``(len(catalog),)`` its unboosted
    scores, ``called`` the catalogue positions of the tools its calls used. Layout: uint32
    count of entries, uint32 count of top entries, the entries' uint32 positions, their
    float16 scores. Raises LoggedRankingError for an empty ranking."""
    values = np.asarray(values, dtype=np.float32)
    if not len(values):
        raise LoggedRankingError("nothing ranked")
    top = np.arange(len(values))
    if len(values) > TOP:  # linear time on the request path: partition, then sort the top
        top = np.argpartition(-values, TOP - 1)[:TOP]
    top = top[np.lexsort((top, -values[top]))]  # best first, ties in catalogue order
    below = sorted(set(called) - set(top.tolist()))
    positions = np.concatenate([top, np.asarray(below, dtype=np.int64)]).astype(np.uint32)
    head = np.asarray([len(positions), len(top)], dtype=np.uint32)
    return head.tobytes() + positions.tobytes() + values[positions].astype(np.float16).tobytes()


def decode_ranking(raw: bytes, n_tools: int) -> LoggedRanking:
    """Read :func:`encode_ranking`'s bytes for a catalogue of ``n_tools``. Raises
    LoggedRankingError when they are not one of its rankings."""
    if len(raw) < 8:
        raise LoggedRankingError("logged ranking too short")
    count, top = (int(n) for n in np.frombuffer(raw[:8], dtype=np.uint32))
    if not 0 < top <= count or len(raw) != 8 + 6 * count:
        raise LoggedRankingError("logged ranking of the wrong size")
    positions = np.frombuffer(raw[8:8 + 4 * count], dtype=np.uint32).astype(np.int64)
    scores = np.frombuffer(raw[8 + 4 * count:], dtype=np.float16).astype(np.float32)
    if positions.max() >= n_tools or not np.isfinite(scores).all():
        raise LoggedRankingError("logged ranking of another catalogue")
    return LoggedRanking(positions, scores, top)
