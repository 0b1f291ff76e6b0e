"""The seconds of ``benchmarks/agent_sessions.py --long`` and ``--simulate`` without
llama-server or a CLI: the hardware profiles and a request's seconds
(benchmarks/support/hardware_profiles.py), a session's and each user turn's wait and
seconds (benchmarks/support/session_seconds.py), and the tables that compare direct, the
session oracle and toolprune per profile (benchmarks/session_seconds_report.py)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.agent_session_runs import FLATTENED
from benchmarks.long_session_runs import ORACLE, ORACLE_CALLED, LongResult, learned_via
from benchmarks.session_seconds_report import profile_rows, session_rows, wait_rows
from benchmarks.support.hardware_profiles import (
    PER_REQUEST_S,
    PROFILES,
    Profile,
    first_token_seconds,
    profile_named,
    profiles_chosen,
    request_seconds,
)
from benchmarks.support.session_seconds import session_seconds, turn_seconds

#: Round speeds, so that the expected seconds are plain to read.
EVEN = Profile("even", "a test profile", prefill_tps=1000, decode_tps=10, source="a test")


def _row(turn: int, client: int, evaluated: int, generated: int | None,
         status: int = 200, prompt: int = 0) -> dict[str, Any]:
    return {"turn": turn, "client": client, "status": status, "evaluated": evaluated,
            "generated": generated, "prompt": prompt or evaluated, "tools": 1}


def test_a_request_costs_its_prefill_its_decode_and_the_fixed_cost() -> None:
    assert request_seconds(2000, 30, EVEN) == pytest.approx(2.0 + 3.0 + PER_REQUEST_S)
    assert first_token_seconds(2000, EVEN) == pytest.approx(2.0 + PER_REQUEST_S)
    npu = profile_named("ryzen-ai-npu")
    assert request_seconds(300, 10, npu) == pytest.approx(1.0 + 1.0 + 0.05)


def test_every_profile_is_sourced_and_decodes_slower_than_it_prefills() -> None:
    assert [p.name for p in PROFILES] == ["datacenter-gpu", "consumer-gpu", "apple-m3-max",
                                          "ryzen-ai-igpu", "ryzen-ai-npu"]
    for profile in PROFILES:
        assert profile.source and 10 <= profile.prefill_tps / profile.decode_tps <= 55


def test_profiles_are_chosen_by_name_all_or_none() -> None:
    assert profiles_chosen("all") == list(PROFILES)
    assert profiles_chosen("none") == []
    assert [p.name for p in profiles_chosen("apple-m3-max,ryzen-ai-npu")] == [
        "apple-m3-max", "ryzen-ai-npu"]
    with pytest.raises(KeyError, match="known: datacenter-gpu"):
        profiles_chosen("h200")


def test_a_session_sums_its_requests_and_is_unknown_with_a_refused_or_uncounted_one() -> None:
    rows = [_row(1, 0, 1000, 10), _row(1, 1, 500, 20)]
    assert session_seconds(rows, EVEN) == pytest.approx(1.0 + 1.0 + 0.5 + 2.0 + 2 * PER_REQUEST_S)
    assert session_seconds([*rows, _row(2, 2, 0, 0, status=400)], EVEN) is None
    assert session_seconds([*rows, _row(2, 2, 100, None)], EVEN) is None


def test_a_turns_wait_holds_the_hidden_rounds_whole_and_the_last_rounds_prefill() -> None:
    rows = [
        _row(1, 0, 2000, 40),   # turn 1: the client's first request, answered with a call
        _row(1, 1, 1000, 30),   # the call's result sent back: a hidden search round …
        _row(1, 1, 500, 20),    # … then the round the client gets
        _row(2, 2, 3000, 50),   # turn 2: one request
    ]
    first, second = turn_seconds(rows, EVEN)
    hidden = 1.0 + 3.0 + PER_REQUEST_S
    assert first.turn == 1
    assert first.wait_s == pytest.approx((2.0 + PER_REQUEST_S) + hidden + (0.5 + PER_REQUEST_S))
    assert first.total_s == pytest.approx(
        (2.0 + 4.0) + hidden + (0.5 + 2.0) + 2 * PER_REQUEST_S)
    assert second.wait_s == pytest.approx(3.0 + PER_REQUEST_S)
    assert second.total_s == pytest.approx(3.0 + 5.0 + PER_REQUEST_S)


def test_a_turn_with_a_refused_round_has_no_wait() -> None:
    rows = [_row(1, 0, 100, 1, status=400), _row(1, 0, 100, 1)]
    (turn,) = turn_seconds(rows, EVEN)
    assert turn.wait_s is None and turn.total_s is None


def _result(via: str, rows: list[dict[str, Any]], mode: str = "codex-default") -> LongResult:
    return LongResult(mode, via, [""] * 2, rows)


def test_the_profile_table_compares_toolprune_with_direct_and_the_oracle() -> None:
    profile = profile_named("apple-m3-max")
    direct = _result("direct", [_row(1, 0, 505, 49)])
    flattened = _result(FLATTENED, [_row(1, 0, 5050, 49)])
    oracle = _result(ORACLE, [_row(1, 0, 1010, 49)])
    called = _result(ORACLE_CALLED, [_row(1, 0, 505, 49)])
    proxy = _result("toolprune", [_row(1, 0, 505, 49), _row(2, 1, 505, 98)])
    learned = _result(learned_via(profile), [_row(1, 0, 2020, 49, prompt=2525)])
    headers, rows = profile_rows([direct, flattened, oracle, called, proxy, learned], [profile])
    (row,) = rows
    cells = dict(zip(headers, row, strict=True))
    d, o, c = 10 + 1 + 0.05, 2 + 1 + 0.05, 1 + 1 + 0.05  # flattened direct is the reference
    t, lt = (1 + 1 + 0.05) + (1 + 2 + 0.05), 4 + 1 + 0.05
    assert cells["direct s"] == f"{d:,.1f}" and cells["oracle s"] == f"{o:,.1f}"
    assert cells["oracle × direct"] == f"{o / d:.2f}×"
    assert cells["toolprune × direct"] == f"{t / d:.2f}×"
    assert cells["toolprune × oracle"] == f"{t / o:.2f}×"
    assert cells["toolprune × called-only"] == f"{t / c:.2f}×"
    assert cells["learned × oracle"] == f"{lt / o:.2f}×"
    assert cells["learned × called-only"] == f"{lt / c:.2f}×"
    assert cells["first prompt × direct"] == f"{505 / 5050:.2f}×"
    assert cells["learned first × direct"] == f"{2525 / 5050:.2f}×"


def test_a_profile_not_learned_and_a_session_not_counted_print_dashes() -> None:
    direct = _result("direct", [_row(1, 0, 100, None)], mode="qwen-default")
    headers, rows = profile_rows([direct], [EVEN])
    cells = dict(zip(headers, rows[0], strict=True))
    assert cells["direct s"] == "–" and cells["learned s"] == "–" and cells["oracle s"] == "–"
    headers, rows = session_rows([direct], [EVEN])
    assert rows[0][2:] == ["1", "100", "–", "–"]


def test_the_wait_table_gives_the_median_and_longest_wait_and_the_median_turn() -> None:
    rows = [_row(1, 0, 1000, 10), _row(2, 1, 3000, 10), _row(3, 2, 2000, 10)]
    headers, table = wait_rows([_result("direct", rows)], [EVEN])
    assert headers[2] == "even: wait med / max · turn med"
    assert table[0][2] == "2.0 / 3.0 · 3.0"
