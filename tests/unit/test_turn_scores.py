"""A turn's scores read by name and its best tools (selection/choosing/turn_scores.py):
the order a stable sort of the whole array gives, from a partition."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from selection.catalog.catalog import parse_tools
from selection.choosing.turn_scores import TurnScores, best_positions


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=60), st.integers(-1, 70))
def test_the_best_are_a_stable_sorts_first(values: list[int], n: int) -> None:
    scores = np.asarray(values, dtype=np.float32) / 4  # many ties
    expected = np.argsort(-scores, kind="stable")[: max(n, 0)]
    assert best_positions(scores, n).tolist() == expected.tolist()


def test_scores_by_name_read_the_array_and_rank_as_nlargest_over_a_dict() -> None:
    catalog = parse_tools([{"type": "function", "function": {"name": f"t{i}"}} for i in range(9)])
    scores = np.asarray([0.1, 0.5, 0.5, 0.9, 0.0, 0.5, 0.9, 0.2, 0.3], dtype=np.float32)
    view = TurnScores(catalog, scores)
    as_dict = dict(zip(catalog.names, scores.tolist(), strict=True))
    assert dict(view) == as_dict and view.get("nope") is None and view["t3"] == as_dict["t3"]
    for n in range(11):
        assert view.best(n) == heapq.nlargest(n, as_dict, key=as_dict.__getitem__)
