"""``toolprune eval --live``, its pure parts: the outcome of a first call, the report's
counts and intervals, reading answers and the results file (the runs against a server are
in tests/integration/test_eval_live.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.cli.live_eval import ResultsFile
from proxy.cli.live_proxy import answer_costs
from proxy.cli.live_requests import _error, first_call
from selection.evaluation import Answer, Case, case_record, outcome, summarise_set
from selection.evaluation.intervals import paired_difference, wilson


def case(*requirements: tuple[str, ...], case_id: str = "c") -> Case:
    return Case(case_id, case_id, [], None, ("a", "b", "c", "d"), tuple(requirements))


@pytest.mark.parametrize(("answer", "expected"), [
    (Answer(called="a", first=frozenset({"a", "b"})), "correct"),
    (Answer(called="a", first=frozenset({"b"}), reached=frozenset({"a"})), "recovered_by_search"),
    (Answer(called="a", first=frozenset({"b"})), "recovered_by_search"),  # named in the menu
    (Answer(called="b", first=frozenset({"a", "b"})), "selection_error"),
    (Answer(called=None, first=frozenset({"b"}), reached=frozenset({"a"})), "selection_error"),
    (Answer(called="b", first=frozenset({"b"}), reached=frozenset({"c"})), "retrieval_miss"),
    (Answer(called=None, first=frozenset()), "retrieval_miss"),
    (Answer(called="a", error="http 500: boom", first=frozenset({"a"})), "errors"),
])
def test_each_outcome_of_a_first_call(answer: Answer, expected: str) -> None:
    assert outcome(case(("a",)), answer) == expected


def test_alternatives_and_cases_that_expect_no_call() -> None:
    either = case(("a", "d"))
    assert outcome(either, Answer(called="d", first=frozenset({"d"}))) == "correct"
    assert outcome(case(), Answer(called=None)) == "correct"
    assert outcome(case(), Answer(called="a", first=frozenset({"a"}))) == "selection_error"


def records(pairs: list[tuple[str, str]]) -> list[dict[str, object]]:
    """Case records whose direct and toolprune outcomes are ``pairs``."""
    answers = {
        "correct": Answer(called="a", first=frozenset({"a"})),
        "recovered_by_search": Answer(called="a", reached=frozenset({"a"})),
        "selection_error": Answer(called="b", first=frozenset({"a", "b"})),
        "retrieval_miss": Answer(called=None),
        "errors": Answer(error="overflow: too long"),
    }
    made = []
    for number, (direct, through) in enumerate(pairs):
        one = case(("a",), case_id=f"c{number}")
        made.append(case_record("set", one, {"direct": answers[direct], "toolprune": answers[through]}))
    return made


def test_the_report_counts_each_outcome_and_decomposes_end_to_end() -> None:
    pairs = [("correct", "correct"), ("correct", "recovered_by_search"),
             ("correct", "retrieval_miss"), ("errors", "correct"),
             ("selection_error", "selection_error"), ("correct", "errors")]
    report = summarise_set("set", records(pairs), misses=True)
    direct, through = report["direct"], report["toolprune"]
    assert [direct[o] for o in ("correct", "recovered_by_search", "selection_error",
                                "retrieval_miss", "errors")] == [4, 0, 1, 0, 1]
    assert [through[o] for o in ("correct", "recovered_by_search", "selection_error",
                                 "retrieval_miss", "errors")] == [2, 1, 1, 1, 1]
    assert through["end_to_end"] == pytest.approx(3 / 6)
    assert through["end_to_end"] == pytest.approx(through["reached"] * through["chose_right"])
    assert through["end_to_end_ci"] == list(wilson(3, 6))
    assert report["difference"]["end_to_end"] == pytest.approx(3 / 6 - 4 / 6)
    assert report["difference"]["only_toolprune_right"] == 1  # the direct overflow
    assert report["difference"]["only_direct_right"] == 2
    assert [m["id"] for m in report["misses"]] == ["c1", "c2", "c3", "c5"]
    assert report["differing"] == 4


def test_wilson_stays_inside_the_unit_interval_and_narrows_with_cases() -> None:
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    low, high = wilson(5, 10)
    assert low < 0.5 < high and high - low > wilson(50, 100)[1] - wilson(50, 100)[0]
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_the_paired_interval_moves_with_the_discordant_cases_only() -> None:
    # No discordant case among 20: Bonett-Price's interval is 0 ± z·sqrt((2/22)/22).
    same, low, high = paired_difference([True, False] * 10, [True, False] * 10)
    assert same == 0.0 and (low, high) == pytest.approx((-0.126, 0.126), abs=1e-3)
    assert paired_difference([True] * 20, [True] * 20)[1:] == (low, high)
    # 12 cases only the first got right, 2 only the second: the difference is 10/50.
    first = [True] * 48 + [False] * 2
    second = [True] * 36 + [False] * 12 + [True] * 2
    difference, low, high = paired_difference(first, second)
    assert difference == pytest.approx(0.2) and 0 < low < 0.2 < high < 0.4
    flipped = paired_difference(second, first)
    assert flipped == pytest.approx((-0.2, -high, -low))
    with pytest.raises(ValueError):
        paired_difference([True], [])


def test_reading_answers_and_their_costs() -> None:
    call = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "a", "arguments": "{}"}}]}}]}
    assert first_call(json.dumps(call).encode()) == ("a", None)
    text = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    assert first_call(json.dumps(text).encode()) == (None, None)
    assert first_call(b"<html>")[1] == "unreadable: the answer is not JSON"
    assert first_call(b'{"object": "error"}')[1] == "unreadable: the answer has no choices"
    llama = {"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
                       "n_ctx": 8192, "message": "the request exceeds the available context size"}}
    assert _error(400, json.dumps(llama).encode()).startswith("overflow: the request exceeds")
    assert _error(500, b'{"error": {"message": "boom"}}') == "http 500: boom"
    stream = (b'data: {"choices": [{"delta": {}}]}\n\n'
              b'data: {"choices": [], "usage": {"prompt_tokens": 7}, "timings": {"prompt_n": 3}}\n\n'
              b"data: [DONE]\n\n")
    assert answer_costs(stream, "text/event-stream") == ({"prompt_tokens": 7}, {"prompt_n": 3})
    assert answer_costs(b'{"usage": {"prompt_tokens": 5}}', "application/json") == (
        {"prompt_tokens": 5}, None)


def test_a_results_file_skips_a_cut_line_and_refuses_another_run(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    config = {"base_url": "http://127.0.0.1:8080/v1", "model": "m", "max_tokens": 16,
              "top_k": 8, "threshold": 0.1, "max_tools": 16}
    results = ResultsFile(path, config)
    results.add(records([("correct", "correct"), ("correct", "errors")]))
    with path.open("a") as handle:
        handle.write('{"set": "set", "id": "c9", "dire')  # an interrupted write
    again = ResultsFile(path, config)
    assert [r["id"] for r in again.records] == ["c0", "c1"]
    before = path.read_text()
    with pytest.raises(ValueError, match="other model"):
        ResultsFile(path, {**config, "model": "other"})
    assert path.read_text() == before
