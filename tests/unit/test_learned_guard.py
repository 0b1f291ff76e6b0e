"""selection.learned_guard: the held-back replay (boost and centring counted) and the
choice of gain and centring, which must beat the state in use and spare the requests
whose tools the teaching folds never called."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from selection.catalog import parse_tools
from selection.learned import Evidence, LearnedIndex, learn
from selection.learned_guard import Fold, HeldBack, dense_scores, judge, recalls

NAMES = ("a", "b", "c")
CATALOG = parse_tools(
    [{"type": "function", "function": {"name": n, "description": n}} for n in NAMES]
)
#: Tool vectors of the catalogue: "a" and "b" along the first two axes, "c" along the third.
TOOLS = np.eye(3, dtype=np.float32)


def best_scores(queries: np.ndarray) -> np.ndarray:
    return (np.asarray(queries, dtype=np.float32) @ TOOLS.T).max(axis=0)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def candidate(*evidence: tuple[str, np.ndarray]):
    return learn(
        [Evidence(f"r{i}", f"c{i}", tool, "loaded", vector) for i, (tool, vector) in enumerate(evidence)],
        catalog="fp", embedder="e", version=1, created=0.0,
    )


def test_recalls_count_the_boost_and_the_centring() -> None:
    query = unit(1, 0.9, 0)  # ranks "a" first, "b" second
    held = [HeldBack(query, ("b",), untouched=False)]
    assert recalls(held, dense_scores(held, best_scores, None), CATALOG, None, 1).tolist() == [0.0]
    boosted = LearnedIndex.bind(candidate(("b", query)), CATALOG)
    assert recalls(held, dense_scores(held, best_scores, boosted), CATALOG, boosted, 1).tolist() == [1.0]
    # Traffic that all leans towards "a": taking its mean off brings "b" up, no boost needed.
    leaning = candidate(("c", unit(1, 0, 0.2)), ("c", unit(1, 0, -0.2)))
    centred = LearnedIndex.bind(replace(leaning, gain=0.0, centering=0.5), CATALOG)
    assert recalls(held, dense_scores(held, best_scores, centred), CATALOG, centred, 1).tolist() == [1.0]


def test_the_best_choice_wins_and_ties_go_to_the_smaller_gain() -> None:
    query = unit(1, 0.9, 0)
    folds = [Fold(candidate(("b", query)), [HeldBack(query, ("b",), untouched=False)])] * 2
    verdict = judge(folds, None, CATALOG, best_scores, 1)
    assert verdict.better and (verdict.before, verdict.after) == (0.0, 1.0)
    assert verdict.gain == 0.5  # every gain > 0 brings "b"; the smallest is kept
    assert verdict.untouched == 0


def test_a_candidate_costing_untouched_requests_is_not_promoted() -> None:
    # The traffic called "b" for requests like q, and two held requests like q need "b"
    # (the boost brings it: recall 0 -> 1); a third needs "a", which nobody called: the
    # same boost pushes "a" out of the top 1. Better on the whole, but not promoted.
    q = unit(1, 0.9, 0)
    touched = HeldBack(q, ("b",), untouched=False)
    fold = Fold(candidate(("b", q)), [touched, touched, HeldBack(q, ("a",), untouched=True)])
    verdict = judge([fold], None, CATALOG, best_scores, 1)
    assert verdict.untouched == 1 and verdict.untouched_before == 1.0
    assert not verdict.better and verdict.after == verdict.before
    spared = judge([Fold(fold.candidate, [touched, touched])], None, CATALOG, best_scores, 1)
    assert spared.better and spared.after == 1.0  # the same candidate, nothing to spare


def test_the_state_in_use_is_the_bar() -> None:
    query = unit(1, 0.9, 0)
    state = candidate(("b", query))
    folds = [Fold(state, [HeldBack(query, ("b",), untouched=False)])]
    verdict = judge(folds, state, CATALOG, best_scores, 1)
    assert verdict.before == 1.0 and not verdict.better


def test_one_lucky_request_promotes_nothing() -> None:
    # One held request gains (its "b" is boosted in); the others, about "c", do not move.
    query = unit(1, 0.9, 0)
    others = [HeldBack(unit(0, 0, 1), ("c",), untouched=False)] * 6
    lucky = Fold(candidate(("b", query)), [HeldBack(query, ("b",), untouched=False), *others])
    verdict = judge([lucky], None, CATALOG, best_scores, 1)
    assert verdict.after > verdict.before and not verdict.better
    # Two gains in eight requests are within two standard errors of chance; four in ten are not.
    twice = Fold(lucky.candidate, [HeldBack(query, ("b",), untouched=False)] * 2 + others)
    assert not judge([twice], None, CATALOG, best_scores, 1).better
    four = Fold(lucky.candidate, [HeldBack(query, ("b",), untouched=False)] * 4 + others)
    assert judge([four], None, CATALOG, best_scores, 1).better
