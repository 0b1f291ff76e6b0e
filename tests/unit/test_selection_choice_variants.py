"""The fourth round's admission-order variants (benchmarks/selection_choice_variants.py)
order candidates as benchmarks/README.md says they measured, keep the product's choice
in fused-score order, and undo their patches."""

from __future__ import annotations

import numpy as np

import selection.evaluation.scoring
import selection.selector
from benchmarks.selection_choice_variants import (
    SIDE,
    Mmr,
    NamespaceCap,
    PartQuota,
    Picker,
    Side,
    choose_by,
    namespace,
)
from benchmarks.selection_lever_variants import variant
from selection.catalog import parse_tools
from selection.engine import SelectionEngine
from selection.ranking import RankingPolicy, choose


def _catalog(names: list[str]):
    return parse_tools([
        {"type": "function", "function": {"name": name, "description": f"does {name}"}}
        for name in names
    ])


def _unit(rows: list[list[float]]) -> np.ndarray:
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _side(scores: np.ndarray, vectors: np.ndarray, parts: np.ndarray) -> Side:
    return Side(parts, vectors, vectors, scores)


def test_greedy_order_reproduces_the_products_choice() -> None:
    catalog = _catalog([f"tool_{i}" for i in range(12)])
    scores = np.linspace(0.9, 0.3, 12).astype(np.float32)[::-1].copy()
    SIDE[id(scores)] = _side(scores, np.eye(12, dtype=np.float32), scores[None, :])
    kwargs = dict(top_k=4, threshold=0.1, exclude={"tool_3"}, policy=RankingPolicy())
    try:
        greedy = choose_by(lambda *_: Picker())(catalog, scores, **kwargs)
    finally:
        del SIDE[id(scores)]
    assert greedy == choose(catalog, scores, **kwargs)
    assert greedy.candidates[0].name == "tool_11"


def test_mmr_passes_over_a_near_duplicate_of_an_admitted_tool() -> None:
    scores = np.array([0.9, 0.85, 0.8], dtype=np.float32)
    vectors = _unit([[1, 0], [1, 0.05], [0, 1]])
    picker = Mmr(0.7, _side(scores, vectors, scores[None, :]), scores, mean=False)
    assert picker.pick([0, 1, 2], []) == 0
    assert picker.pick([1, 2], [0]) == 2  # 0.7·0.80 − 0 > 0.7·0.85 − 0.3·0.999
    assert Mmr(1.0, _side(scores, vectors, scores[None, :]), scores, False).pick([1, 2], [0]) == 1


def test_namespace_cap_defers_a_third_tool_of_one_server() -> None:
    assert namespace("github__list_issues") == "github"
    assert namespace("count_for_suivi_colis") == "suivi_colis"
    assert namespace("GET_me") is None
    catalog = _catalog(["gh__a", "gh__b", "gh__c", "fs__read", "GET_me"])
    cap = NamespaceCap(2, catalog)
    assert cap.pick([2, 3, 4], [0, 1]) == 3
    assert NamespaceCap(1, catalog).pick([1, 2, 4], [0]) == 4  # no namespace: uncapped
    assert cap.pick([2], [0, 1]) == 2  # nothing else left: the cap gives way


def test_part_quota_admits_each_parts_best_first() -> None:
    # whole query, then two parts: part 1 prefers tool 3, part 2 tool 4
    parts = np.array([
        [0.9, 0.8, 0.7, 0.5, 0.4],
        [0.9, 0.8, 0.7, 0.6, 0.1],
        [0.1, 0.1, 0.1, 0.1, 0.6],
    ], dtype=np.float32)
    scores = parts.max(axis=0)
    side = _side(scores, np.eye(5, dtype=np.float32), parts)
    quota = PartQuota(1, side, scores, [0, 1, 2, 3, 4], fused=False)
    # the best overall; part 1's best not yet in front (its own best is tool 0); part 2's
    assert quota.front == [0, 1, 4]
    assert quota.pick([1, 2, 3, 4], [0]) == 1
    assert quota.pick([2, 3], [0, 1, 4]) == 2  # then fused order
    # a part's tools come from the window only: part 2's tool 4 is outside it
    assert PartQuota(1, side, scores, [0, 1, 2, 3], fused=False).front == [0, 1, 2]


def test_choice_variants_patch_scoring_and_choice_and_restore_them() -> None:
    score, choice, parts = (SelectionEngine.score, selection.selector.choose,
                            selection.evaluation.scoring.query_parts)
    with variant("parts-2-fused"):
        assert selection.selector.choose is not choice
        assert SelectionEngine.score is not score
        assert selection.evaluation.scoring.query_parts is not parts
    assert (SelectionEngine.score, selection.selector.choose,
            selection.evaluation.scoring.query_parts) == (score, choice, parts)
