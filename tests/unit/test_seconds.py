"""Choices made in seconds on a server of known speed (selection/choosing/seconds.py) and
the speeds learned from a server's answers (proxy/servers/speeds.py).

The profiles are the published single-stream figures of
``benchmarks/support/hardware_profiles.py`` (tokens per second)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from config.settings import Settings
from proxy.servers.speeds import MIN_TIMED_S, RoundTiming, SpeedBook
from selection.catalog.catalog import parse_tools
from selection.choosing.seconds import (
    Ranked,
    ServerSpeed,
    bridge_call_s,
    delivered_count,
    first_block_count,
    search_round_s,
    session_odds,
    turn_odds,
    worth,
)
from selection.delivery import proactive_delivery
from selection.ranking.pipeline import Ranking, lexical_ranking

NPU = ServerSpeed(300, 10)  # decode-slow: Ryzen AI NPU (FastFlowLM)
IGPU = ServerSpeed(273, 16)
APPLE = ServerSpeed(505, 49)  # prefill-slow relative to decode: Apple M3 Max (Metal)
H100 = ServerSpeed(3500, 134)


def ranked(tokens: list[int], step: float = 0.02, best: float = 0.7) -> list[Ranked]:
    """Candidates best first, the first scoring ``best``, each ``step`` below the one
    before (score units)."""
    return [Ranked(rank, best - step * (rank - 1), step * (rank - 1), cost)
            for rank, cost in enumerate(tokens, 1)]


#: 24 candidates of the GitHub MCP server's mean size.
CANDIDATES = ranked([280] * 24, step=0.01)


def test_a_request_costs_prefill_decode_and_a_fixed_part() -> None:
    assert NPU.prefill_s(600) == 2.0 and NPU.decode_s(30) == 3.0
    assert search_round_s(NPU) == pytest.approx(24 / 10 + 0.05)
    assert bridge_call_s(APPLE) == pytest.approx(12 / 49)


def test_worth_weighs_the_chance_against_the_cost() -> None:
    assert worth(0.5, 1.0, 1.0) and not worth(0.5, 0.9, 1.0)
    assert worth(0.2, 4.0, 1.0) and not worth(0.2, 3.9, 1.0)


def odds(rank: int, score: float, gap: float) -> float:
    return turn_odds(Ranked(rank, score, gap, 280))


def test_odds_fall_with_the_rank_and_the_gap_rise_with_the_score_and_a_session() -> None:
    by_rank = [odds(rank, 0.6, 0.05) for rank in range(2, 12)]
    assert by_rank == sorted(by_rank, reverse=True) and by_rank[-1] > 0
    by_gap = [odds(2, 0.6, gap) for gap in (0.0, 0.02, 0.1, 0.3)]
    assert by_gap == sorted(by_gap, reverse=True)
    by_score = [odds(1, score, 0.0) for score in (0.2, 0.4, 0.6, 0.8)]
    assert by_score == sorted(by_score)
    tools = ranked([280] * 11, step=0.01)
    assert all(session_odds(tool) > turn_odds(tool) for tool in tools)
    # what benchmarks/turn_odds.py measured on MetaTool and Seal-Tools: a best tool
    # scoring 0.7 is needed ~3 times in 4, one scoring 0.2 about one time in 9; a second
    # one at 0.68 about as often as not
    assert 0.7 < odds(1, 0.7, 0.0) < 0.8 and 0.08 < odds(1, 0.2, 0.0) < 0.15
    assert 0.4 < odds(2, 0.68, 0.02) < 0.6
    # scores far apart or none: no chance, no overflow
    assert odds(2, -500.0, 500.0) == 0.0 and odds(2, float("-inf"), float("inf")) == 0.0


def test_a_decode_slow_server_gets_the_larger_first_block() -> None:
    npu, igpu, apple, h100 = (first_block_count(s, CANDIDATES) for s in (NPU, IGPU, APPLE, H100))
    assert npu > igpu > apple >= 1
    assert h100 == npu  # the same prefill:decode ratio (~27–30) weighs the same
    assert first_block_count(ServerSpeed(300, 1), CANDIDATES) > npu  # decode crawls


def test_the_seconds_add_to_the_token_plans_top_k_and_never_take_from_it() -> None:
    apple, npu = first_block_count(APPLE, CANDIDATES), first_block_count(NPU, CANDIDATES)
    assert first_block_count(APPLE, CANDIDATES, least=apple + 3) == apple + 3
    assert first_block_count(NPU, CANDIDATES, least=apple) == npu > apple


def test_small_tools_earn_their_place_sooner_than_large_ones() -> None:
    assert first_block_count(APPLE, ranked([60] * 24)) > first_block_count(APPLE, ranked([600] * 24))


def test_a_turn_delivers_its_best_missing_tool_where_the_search_costs_more() -> None:
    assert delivered_count(NPU, ranked([280] * 3, step=0.1)) == 2
    assert delivered_count(APPLE, ranked([280] * 3, step=0.1)) == 1
    assert delivered_count(NPU, ranked([60] * 3, step=0.1)) == 3  # small definitions
    assert delivered_count(NPU, [Ranked(5, 0.4, 0.3, 280)]) == 0  # far down the ranking
    assert delivered_count(ServerSpeed(50, 500), ranked([280])) == 0  # prefill crawls


def test_a_model_whose_search_rounds_cost_more_gets_more_before_it_asks() -> None:
    """A model that reasons before its search call (hundreds of tokens a round) makes a
    spared search worth more prefill: a larger first block, more delivered; one whose calls
    are terse, less."""
    reasoning, terse = ServerSpeed(505, 49, 400), ServerSpeed(505, 49, 12)
    assert search_round_s(reasoning) == pytest.approx(400 / 49 + 0.05)
    assert (first_block_count(reasoning, CANDIDATES) > first_block_count(APPLE, CANDIDATES)
            > first_block_count(terse, CANDIDATES))
    likely = ranked([280] * 3, step=0.1, best=0.6)
    assert [delivered_count(speed, likely) for speed in (reasoning, APPLE, terse)] == [2, 1, 0]
    assert reasoning.shown()["search_call_tokens"] == 400


def test_a_second_tool_scored_like_the_first_is_delivered_with_it() -> None:
    """Two tools the ranking cannot tell apart are about as likely to be the one needed:
    the second earns its prefill where one far below the first does not; where the best
    tools all score low, none is matched with confidence."""
    assert delivered_count(NPU, ranked([280] * 3, step=0.01, best=0.2)) == 0
    assert delivered_count(APPLE, ranked([280] * 2, step=0.01)) == 2
    assert delivered_count(APPLE, ranked([280] * 2, step=0.1)) == 1
    assert delivered_count(NPU, ranked([280] * 3, step=0.01)) == 3
    assert delivered_count(NPU, ranked([280] * 3, step=0.3)) == 1


def timing(**answer: object) -> RoundTiming:
    round_ = RoundTiming(sent=0.0)
    round_.seen(answer, 0.0, streamed=False)
    return round_


def test_speeds_are_the_throughput_of_the_timings_a_server_reports() -> None:
    book = SpeedBook(Settings())
    book.observe("m", timing(timings={"prompt_n": 1000, "prompt_ms": 500.0,
                                      "predicted_n": 20, "predicted_ms": 1000.0}))
    book.observe("m", timing(timings={"prompt_n": 3000, "prompt_ms": 500.0,
                                      "predicted_n": 60, "predicted_ms": 1000.0}))
    book.observe("m", timing(timings={"prompt_n": 1, "prompt_ms": 900.0}))  # too short: left out
    speed = book.speed("m")
    assert (speed.prefill_tps, speed.decode_tps) == (4000.0, 40.0)
    assert (speed.prefill_source, speed.decode_source) == ("timings", "timings")
    assert book.speed("other").prefill_tps is None
    assert set(book.shown()) == {"m"}


def test_without_timings_a_streamed_answer_is_timed_when_it_lasts() -> None:
    book = SpeedBook(Settings())
    answer = RoundTiming(sent=10.0)
    answer.seen({"choices": []}, 10.0 + 2.0, streamed=True)
    answer.seen({"usage": {"prompt_tokens": 1200, "completion_tokens": 41,
                           "prompt_tokens_details": {"cached_tokens": 200}}}, 16.0, streamed=True)
    book.observe("m", answer)
    speed = book.speed("m")
    assert (speed.prefill_tps, speed.decode_tps) == (500.0, 10.0)
    assert speed.prefill_source == "answers"
    quick = RoundTiming(sent=0.0)
    quick.seen({"usage": {"prompt_tokens": 5000, "completion_tokens": 500}}, MIN_TIMED_S / 2,
               streamed=True)
    fresh = SpeedBook(Settings())
    fresh.observe("m", quick)  # a scripted server's instant answer says nothing of speed
    assert fresh.speed("m").prefill_tps is None


def test_timings_replace_what_the_proxy_timed_and_settings_fill_what_is_unknown() -> None:
    book = SpeedBook(Settings(prefill_tokens_per_s=900.0, decode_tokens_per_s=30.0))
    assert book.speed("m").prefill_source == "TOOLPRUNE_PREFILL_TOKENS_PER_S"
    book.observe("m", timing(timings={"prompt_n": 600, "prompt_ms": 1000.0}))
    speed = book.speed("m")
    assert (speed.prefill_tps, speed.prefill_source) == (600.0, "timings")
    assert (speed.decode_tps, speed.decode_source) == (30.0, "TOOLPRUNE_DECODE_TOKENS_PER_S")


def test_timings_no_server_could_report_are_left_out_and_nothing_raises() -> None:
    """An integer too large for a float, or a speed beyond any hardware's, says nothing:
    the window keeps what the server reported sensibly."""
    book = SpeedBook(Settings())
    book.observe("m", timing(timings={"prompt_n": 3000, "prompt_ms": 1000.0,
                                      "predicted_n": 30, "predicted_ms": 1000.0}))
    book.observe("m", timing(timings={"prompt_n": 10**400, "prompt_ms": 1,
                                      "predicted_n": 10**400, "predicted_ms": 10**400}))
    book.observe("m", timing(timings={"prompt_n": 1e308, "prompt_ms": 1e-308,
                                      "predicted_n": 1e30, "predicted_ms": 1}))
    book.observe("m", timing(timings={"prompt_n": 4000, "prompt_ms": 1e-6,
                                      "predicted_n": 5000, "predicted_ms": 1.0}))
    speed = book.speed("m")
    assert (speed.prefill_tps, speed.decode_tps) == (3000.0, 30.0)
    streamed = RoundTiming(sent=0.0)
    streamed.seen({"choices": []}, 1.0, streamed=True)
    streamed.seen({"usage": {"prompt_tokens": 10**400, "completion_tokens": 10**400}}, 2.0,
                  streamed=True)
    SpeedBook(Settings()).observe("m", streamed)  # read, not raised


def test_a_models_search_rounds_are_the_tokens_it_wrote_in_them() -> None:
    """The mean of the rounds that only searched: ``timings``' count, else ``usage``'s;
    a round of the client's own calls, and one that says no count, leave it as it was.
    Shared as a window another replica adopts."""
    book = SpeedBook(Settings())
    assert book.speed("m").search_call_tokens is None
    searching = timing(timings={"predicted_n": 180, "predicted_ms": 9000.0})
    searching.search_round = True
    book.observe("m", searching)
    book.observe("m", timing(timings={"predicted_n": 900, "predicted_ms": 9000.0}))
    counted = timing(usage={"prompt_tokens": 900, "completion_tokens": 60})
    counted.search_round = True
    book.observe("m", counted)  # timings are the better source: usage's count is left out
    uncounted = timing(choices=[])
    uncounted.search_round = True
    book.observe("m", uncounted)
    speed = book.speed("m")
    assert speed.search_call_tokens == 180.0 and speed.shown()["search_call_tokens"] == 180.0
    assert speed.prefill_tps is None  # a count alone says nothing of speed
    other = SpeedBook(Settings())
    answered = timing(usage={"output_tokens": 44})  # Responses and Messages name it so
    answered.search_round = True
    other.observe("n", answered)
    assert other.speed("n").search_call_tokens == 44.0
    for answer in ({"timings": {"predicted_n": 10**400}}, {"timings": {"predicted_n": 200_000}},
                   {"usage": {"output_tokens": 1e12}}):  # counts no model writes in a round
        impossible = timing(**answer)
        impossible.search_round = True
        other.observe("n", impossible)
    assert other.speed("n").search_call_tokens == 44.0
    assert book.summary("m")["search_call"] == [180.0, 1.0, "timings"]
    replica = SpeedBook(Settings(), share=KeptSummaries({"m": book.summary("m")}))
    assert asyncio.run(replica.known("m")).search_call_tokens == 180.0


class KeptSummaries:
    """Another replica's summaries (:class:`proxy.servers.speeds.SpeedShare`), in memory."""

    def __init__(self, kept: dict[str, dict[str, Any]]) -> None:
        self.kept = kept

    async def publish(self, model: str, summary: dict[str, Any]) -> None:
        self.kept[model] = summary

    async def fetch(self, model: str) -> dict[str, Any] | None:
        return self.kept.get(model)


@pytest.mark.parametrize("value", [True, "true", "always"])
def test_proactive_loads_reads_its_boolean_form(value: object) -> None:
    assert Settings(proactive_loads=value).proactive_loads == "always"
    assert Settings(proactive_loads=False).proactive_loads == "never"
    assert Settings().proactive_loads == "auto"


def test_a_turn_gets_nothing_before_asking_when_the_model_holds_its_best_tool() -> None:
    """Delivered before the model asks: the missing tools ranked above every tool the
    model holds (it searches only when what it needs is not among them)."""
    catalog = parse_tools([{"type": "function", "function": {
        "name": name, "description": name, "parameters": {"type": "object", "properties": {}}}}
        for name in ("held", "above", "below")])
    ranking = Ranking(np.array([0.6, 0.9, 0.5], dtype=np.float32))
    assert proactive_delivery(["above", "below"], "auto", catalog, ranking, NPU, None,
                              held=["held"]) == ("above",)
    ranking = Ranking(np.array([0.95, 0.9, 0.5], dtype=np.float32))  # the held tool is best
    assert proactive_delivery(["above", "below"], "auto", catalog, ranking, NPU, None,
                              held=["held"]) == ()
    assert proactive_delivery(["above", "below"], "always", catalog, ranking, NPU, None,
                              held=["held"]) == ("above", "below")
    assert proactive_delivery(["above"], "auto", catalog, ranking, None, None) == ()


def test_a_new_turn_gets_its_runner_up_where_the_ranking_cannot_tell_them_apart() -> None:
    """Of the missing tools, the best and one scored almost as well are delivered before
    the model asks on a decode-slow server; one scored far below is left to a search.
    Definitions of the GitHub server's mean size (~280 tokens)."""
    catalog = parse_tools([{"type": "function", "function": {
        "name": name, "description": f"{name} " + "the tool's purpose " * 80,
        "parameters": {"type": "object", "properties": {}}}}
        for name in ("held", "best", "close", "far")])
    ranking = Ranking(np.array([0.3, 0.62, 0.6, 0.2], dtype=np.float32))
    names = ["best", "close", "far"]
    assert proactive_delivery(names, "auto", catalog, ranking, NPU, None,
                              held=["held"]) == ("best", "close")
    ranking = Ranking(np.array([0.3, 0.62, 0.31, 0.2], dtype=np.float32))  # far below the best
    assert proactive_delivery(names, "auto", catalog, ranking, NPU, None,
                              held=["held"]) == ("best",)
    # BM25's scores alone (the index being built) are not what the odds were fitted on
    lexical = lexical_ranking(np.array([0.3, 1.0, 0.98, 0.2], dtype=np.float32))
    assert proactive_delivery(names, "auto", catalog, lexical, NPU, None, held=["held"]) == ()
