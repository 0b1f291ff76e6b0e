"""The third round's ranking variants (benchmarks/selection_lever_variants.py) do what the
benchmarks/README.md table says they measured, and undo their patches."""

from __future__ import annotations

import numpy as np
import pytest

import selection.engine
import selection.evaluation.scoring
from benchmarks.selection_lever_variants import (
    VARIANTS,
    BestMeanMix,
    Centred,
    HubPenalty,
    Rocchio,
    chunked_texts,
    rewrite_locators,
    variant,
)
from selection.catalog import parse_tools
from selection.index import ToolIndex, tool_texts


def _tool(description: str):
    definition = {"type": "function", "function": {
        "name": "write_file", "description": description,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }}
    return parse_tools([definition]).tools[0]


def _unit(rows: list[list[float]]) -> np.ndarray:
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("text", "typed", "named"),
    [
        ("save it in /root/markdown/bitcoin.md now", "save it in a file now",
         "save it in the file bitcoin.md now"),
        ("Run recon on www.baidu.com. Report", "Run recon on a web page Report",
         "Run recon on the web page baidu.com. Report"),
        # a URL runs to the next space (a trailing comma goes with it)
        ("see https://www.youtube.com/watch?v=x1, ok", "see a web page ok",
         "see the web page youtube.com ok"),
        ("open C:\\Users\\me\\a.txt", "open a file", "open the file a.txt"),
        ("ratio 3/4 and and/or", "ratio 3/4 and and/or", "ratio 3/4 and and/or"),
    ],
)
def test_rewrite_locators_names_paths_and_urls_by_kind(text: str, typed: str, named: str) -> None:
    assert rewrite_locators(text, keep_name=False) == typed
    assert rewrite_locators(text, keep_name=True) == named


def test_chunked_texts_adds_the_first_sentence_and_bounded_chunks() -> None:
    long = "Write or append to file contents. " + " ".join(
        f"Rule {i} says to chunk files in pieces of thirty lines always." for i in range(20)
    )
    tool = _tool(long)
    base = tool_texts(tool)
    texts = chunked_texts(tool, chunks=3)
    assert texts[0] == base[0] and texts[-1] == base[-1]
    assert texts[1] == "write file: Write or append to file contents."
    assert len(texts) == len(base) + 1 + 3
    assert chunked_texts(_tool("One sentence only."), chunks=3) == tool_texts(_tool("One sentence only."))


def test_centred_scores_drop_the_direction_every_tool_shares() -> None:
    tools = _unit([[1, 1, 0], [1, 0, 1], [1, 0.1, 0.1]])
    query = _unit([[1, 1, 0.05]])
    state = Centred(1.0).prepare(tools, np.arange(3))
    scores = Centred(1.0).score(state, query)
    assert scores.shape == (1, 3)
    assert int(np.argmax(scores)) == 0
    # the tool nearest the direction every tool shares scores lower once centred
    assert scores[0, 2] < (query @ tools.T)[0, 2]


def test_hub_penalty_lowers_texts_in_dense_neighbourhoods() -> None:
    tools = _unit([[1, 0, 0], [1, 0.05, 0], [1, 0, 0.05], [0, 1, 0]])
    penalty = HubPenalty(0.5, k=2)
    state = penalty.prepare(tools, np.arange(4))
    scores = penalty.score(state, _unit([[1, 1, 0]]))
    raw = _unit([[1, 1, 0]]) @ tools.T
    assert scores[0, 3] - raw[0, 3] > scores[0, 0] - raw[0, 0]


def test_best_mean_mix_scores_a_tool_by_its_best_and_mean_text() -> None:
    tools = _unit([[1, 0], [0, 1], [1, 1]])
    owners = np.array([0, 0, 1])
    query = _unit([[1, 0]])
    scores = BestMeanMix(0.5).score(BestMeanMix(0.5).prepare(tools, owners), query)
    assert scores.shape == (1, 3)
    assert scores[0, 0] == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
    assert scores[0, 2] == pytest.approx(np.sqrt(0.5))


def test_rocchio_moves_each_part_towards_its_best_texts() -> None:
    tools = _unit([[1, 0, 0], [0.9, 0.4, 0], [0, 0, 1]])
    query = _unit([[1, 0.1, 0], [0, 0.1, 1]])
    feedback = Rocchio(1.0, m=1)
    scores = feedback.score(feedback.prepare(tools, np.arange(3)), query)
    raw = query @ tools.T
    assert scores[0, 0] > raw[0, 0]  # part 0 moved onto its best text
    assert scores[1, 2] > raw[1, 2]
    whole = Rocchio(1.0, m=1, first_only=True)
    assert np.allclose(whole.score(tools, query)[1], raw[1])


def test_variants_patch_one_step_and_restore_it() -> None:
    texts, best, parts = selection.engine.tool_texts, ToolIndex.best_scores, selection.evaluation.scoring.query_parts
    with variant("locators-name+first-sentence"):
        assert selection.engine.tool_texts is not texts
        assert selection.evaluation.scoring.query_parts is not parts
        assert ToolIndex.best_scores is best
        assert selection.evaluation.scoring.query_parts(
            [{"role": "user", "content": "save it to /root/a/b.md"}]
        ) == ["save it to the file b.md"]
    with variant("centred"):
        assert ToolIndex.best_scores is not best
    with variant("defaults"):
        assert ToolIndex.best_scores is best
    assert (selection.engine.tool_texts, ToolIndex.best_scores,
            selection.evaluation.scoring.query_parts) == (texts, best, parts)
    with pytest.raises(KeyError):
        with variant("nope"):
            pass
    assert "defaults" in VARIANTS


def test_a_patched_index_scores_every_tool_by_its_best_text() -> None:
    import faiss  # noqa: F401  (ToolIndex.build needs it)

    vectors = _unit([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    index = ToolIndex.build(vectors, [0, 0, 1], 2)
    query = _unit([[0, 1, 0.1]])
    with variant("mix-0.75"):
        mixed = index.best_scores(query)
    plain = index.best_scores(query)
    assert mixed.shape == plain.shape == (2,)
    assert mixed[0] < plain[0]  # the mean of its two texts pulls tool 0 down
    assert mixed[1] == pytest.approx(plain[1])
