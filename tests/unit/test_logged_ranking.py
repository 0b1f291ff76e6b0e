"""selection.learning.logged_ranking: the proxy's ranking of a request as the usage log keeps it for
the guard of learned selection (the best tools and the called ones, the rest at the bar)."""

from __future__ import annotations

import numpy as np
import pytest

from selection.learning.logged_ranking import (
    TOP,
    LoggedRankingError,
    decode_ranking,
    encode_ranking,
)


def test_the_best_tools_and_the_called_ones_are_kept_the_rest_at_the_bar() -> None:
    values = np.linspace(1.0, 0.0, TOP + 50, dtype=np.float32)  # tool 0 best
    called = [3, TOP + 40]  # one among the best, one far below them
    raw = encode_ranking(values, called)
    assert len(raw) == 8 + 6 * (TOP + 1)
    ranking = decode_ranking(raw, len(values))
    assert ranking.top == TOP and ranking.positions[:3].tolist() == [0, 1, 2]
    assert ranking.bar == pytest.approx(values[TOP - 1], abs=1e-3)
    replayed = ranking.values(len(values))
    assert replayed[TOP + 40] == pytest.approx(values[TOP + 40], abs=1e-3)  # called: its own
    assert replayed[TOP + 10] == pytest.approx(ranking.bar)  # left out: at most the bar
    assert np.argsort(-replayed, kind="stable")[:TOP].tolist() == list(range(TOP))


def test_a_small_catalogue_is_kept_whole() -> None:
    values = np.asarray([0.2, 0.9, 0.5], dtype=np.float32)
    ranking = decode_ranking(encode_ranking(values, [0]), 3)
    assert ranking.positions.tolist() == [1, 2, 0] and ranking.top == 3
    assert np.allclose(ranking.values(3), values, atol=1e-3)


def test_bytes_that_are_no_ranking_of_the_catalogue_are_refused() -> None:
    raw = encode_ranking(np.asarray([0.2, 0.9, 0.5], dtype=np.float32), [])
    with pytest.raises(LoggedRankingError):
        decode_ranking(raw[:-1], 3)
    with pytest.raises(LoggedRankingError):
        decode_ranking(raw, 2)  # a position past the catalogue
    with pytest.raises(LoggedRankingError):
        decode_ranking(b"", 3)
    with pytest.raises(LoggedRankingError):
        encode_ranking(np.zeros(0, dtype=np.float32), [])
