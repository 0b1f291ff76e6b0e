"""benchmarks/round_trip.py tells a trip that is not the `load_tools` round trip it shows
(it runs whole in tests/integration/test_doc_examples.py, as the docs' command)."""

from __future__ import annotations

from benchmarks.round_trip import LOADED_TOOL, Round, Trip, describe, problems

CALL = {"name": LOADED_TOOL, "arguments": "{}"}
LOAD = {"name": "load_tools", "arguments": f'{{"names": ["{LOADED_TOOL}"]}}'}


def trip(first_tools: list[str], rounds: int = 2, calls: list[dict[str, str]] | None = None) -> Trip:
    both = [Round(first_tools, ["load_tools"], [], [LOAD]),
            Round([*first_tools, LOADED_TOOL], ["load_tools"], [{"role": "tool", "content": "x"}],
                  [CALL])]
    return Trip(offered=100, rounds=both[:rounds], status=200, pruning_header="2/100",
                client_tool_calls=[CALL] if calls is None else calls,
                finish_reason="tool_calls", prompt_tokens=10)


def test_the_round_trip_has_no_problem():
    good = trip(["list_pull_requests"])
    assert problems(good) == []
    text = describe(good)
    assert "hidden from the client" in text and "x-tool-pruning-tools: 2/100" in text


def test_a_tool_forwarded_from_the_start_a_missing_round_or_a_visible_meta_call_is_a_problem():
    assert problems(trip(["list_pull_requests", LOADED_TOOL])) != []
    assert problems(trip(["list_pull_requests"], rounds=1)) != []
    assert problems(trip(["list_pull_requests"], calls=[LOAD])) != []
