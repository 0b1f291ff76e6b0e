"""Selecting from bare score arrays, for tests of the selector and what builds on it."""

from __future__ import annotations

import numpy as np

from selection.ranking.pipeline import Ranking
from selection.ranking.signals.registry import Signals


def ranked(
    scores: np.ndarray | None, *, named: np.ndarray | None = None,
    boost: np.ndarray | None = None,
) -> Ranking | None:
    """``scores`` as a turn's ranking (None: no ranking), with the tools a one-intent
    request names and the learned boost when given."""
    return None if scores is None else Ranking.of(scores, named=named, boost=boost)


#: The knobs of a test engine's signals: dense, groups and learned ranking with both
#: expansions, BM25 and name match off (their weights 0, no named tools), so a test's
#: scores are the embedder's cosines.
PLAIN = {"lexical_weight": 0.0, "name_weight": 0.0, "named_only": False}
PLAIN_SIGNALS = Signals.from_values(PLAIN)


def signals(**knobs: object) -> Signals:
    """:data:`PLAIN_SIGNALS` with ``knobs`` (setting name → value) changed."""
    return Signals.from_values({**PLAIN, **knobs})
