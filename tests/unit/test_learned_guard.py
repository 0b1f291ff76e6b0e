"""selection.learning.guard: the held-back replay (boost and centring counted) and the
choice of gain and centring, which must beat the state in use and spare the requests
whose tools the teaching folds never called."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from selection.catalog.catalog import parse_tools
from selection.learning.guard import Fold, HeldBack, base_scores, judge, recalls
from selection.learning.learned import Evidence, LearnedIndex, learn
from selection.learning.logged_ranking import LoggedRanking

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
    assert recalls(held, base_scores(held, CATALOG, best_scores, None, None), CATALOG, None, 1).tolist() == [0.0]
    boosted = LearnedIndex.bind(candidate(("b", query)), CATALOG)
    assert recalls(held, base_scores(held, CATALOG, best_scores, boosted, None), CATALOG, boosted, 1).tolist() == [1.0]
    # Traffic that all leans towards "a": taking its mean off brings "b" up, no boost needed.
    leaning = candidate(("c", unit(1, 0, 0.2)), ("c", unit(1, 0, -0.2)))
    centred = LearnedIndex.bind(replace(leaning, gain=0.0, centering=0.5), CATALOG)
    assert recalls(held, base_scores(held, CATALOG, best_scores, centred, None), CATALOG, centred, 1).tolist() == [1.0]


def logged(*scores: float) -> LoggedRanking:
    """A ranking the proxy logged: these scores for "a", "b", "c"."""
    return LoggedRanking(np.arange(3), np.asarray(scores, dtype=np.float32), top=3)


def test_the_replay_ranks_as_the_proxy_logged_not_by_the_dense_part_alone() -> None:
    # The dense part alone puts "b" first, but the proxy's ranking (BM25, names, groups)
    # put "a" first and missed "b": the boost that brings "b" is a gain.
    query = unit(0.9, 1, 0)
    missed = HeldBack(query, ("b",), untouched=False, ranking=logged(0.9, 0.5, 0.1))
    folds = [Fold(candidate(("b", query)), [missed] * 3)] * 2
    verdict = judge(folds, None, CATALOG, best_scores, 1)
    assert (verdict.before, verdict.after) == (0.0, 1.0) and verdict.better
    # Without the logged ranking the replay would see nothing to gain.
    plain = [Fold(fold.candidate, [replace(missed, ranking=None)] * 3) for fold in folds]
    assert judge(plain, None, CATALOG, best_scores, 1).before == 1.0
    # and the other way round: a tool the proxy found needs no boost, whatever the dense part.
    found = HeldBack(unit(1, 0.9, 0), ("b",), untouched=False, ranking=logged(0.5, 0.9, 0.1))
    assert judge([Fold(folds[0].candidate, [found] * 3)], None, CATALOG, best_scores, 1).before == 1.0


def test_a_candidate_centring_otherwise_moves_the_logged_ranking_by_its_dense_part() -> None:
    query = unit(1, 0.9, 0)
    held = [HeldBack(query, ("b",), untouched=False, ranking=logged(0.9, 0.8, 0.1))]
    leaning = candidate(("c", unit(1, 0, 0.2)), ("c", unit(1, 0, -0.2)))
    centred = LearnedIndex.bind(replace(leaning, gain=0.0, centering=0.5), CATALOG)
    (row,) = base_scores(held, CATALOG, best_scores, centred, None)
    change = best_scores(centred.center(query.reshape(1, -1))) - best_scores(query.reshape(1, -1))
    assert np.allclose(row, logged(0.9, 0.8, 0.1).scores + change)
    (same,) = base_scores(held, CATALOG, best_scores, centred, centred)  # logged so centred
    assert np.array_equal(same, logged(0.9, 0.8, 0.1).scores)


def test_a_sure_gain_is_not_vetoed_by_a_larger_noisier_one() -> None:
    # Gain 0.5 brings the "b" of four requests and moves nothing else; gain 2 also
    # brings the far "c" of three more, but pushes out the "a" of two others: a larger
    # mean (+0.56 against +0.44) within two standard errors of chance. The sure one wins.
    state = candidate(("b", unit(0, 1, 0)), ("c", unit(0, 0, 1)))
    sure = HeldBack(unit(0, 1, 0), ("b",), untouched=False, ranking=logged(0.9, 0.6, 0.0))
    far = HeldBack(unit(0, 0, 1), ("c",), untouched=False, ranking=logged(0.9, 0.0, -0.5))
    pushed = HeldBack(unit(0, 0.6, 0.8), ("a",), untouched=False, ranking=logged(0.9, 0.5, 0.3))
    verdict = judge([Fold(state, [sure] * 4 + [far] * 3 + [pushed] * 2)], None, CATALOG,
                    best_scores, 1)
    assert verdict.better and (verdict.gain, verdict.centering) == (0.5, 0.0)
    assert verdict.after == pytest.approx(6 / 9)


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
