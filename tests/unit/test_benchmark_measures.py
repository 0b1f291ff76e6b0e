"""The load benchmark's rate (Little's law over the measured streams), the session
benchmark's oracle blocks, the replay's prices of a miss and of the late layout, and the
turn odds' logistic fit say what benchmarks/README.md says they measure."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.load import Result, Samples
from benchmarks.session_replay import CALL_TOOL_TOKENS, META_EXCHANGE_TOKENS, late_step, miss_cost
from benchmarks.session_script import (
    CONVERSATIONS,
    LATE_META_TOOLS,
    ORDERS,
    late_oracle_plan,
    messages_for,
    needed_tools,
    oracle_blocks,
)
from benchmarks.turn_odds import fit_logistic, log_loss
from selection.catalog.catalog import parse_tools
from selection.catalog.tokens import tool_tokens
from selection.evaluation.cases import Case
from selection.evaluation.replay import CaseOutcome
from selection.evaluation.scoring import ScoredCase


def test_rate_is_clients_over_mean_stream_time() -> None:
    result = Result("proxy", streams=200, samples=Samples(total=[4.0, 5.0, 6.0]), seconds=10.0)
    assert result.rate == pytest.approx(200 / 5.0)


def test_rate_does_not_depend_on_when_streams_end() -> None:
    """Clients in phase end their streams together; the rate is the same whatever the
    window's edges cut."""
    in_phase = Result("direct", streams=50, samples=Samples(total=[4.0] * 100), seconds=10.0)
    spread = Result("direct", streams=50, samples=Samples(total=[4.0] * 137), seconds=10.0)
    assert in_phase.rate == spread.rate == pytest.approx(12.5)


def test_cpu_per_stream_divides_by_the_streams_of_the_measured_time() -> None:
    result = Result("proxy", streams=100, samples=Samples(total=[4.0] * 10), seconds=10.0,
                    cpu_s=5.0)
    assert result.cpu_ms_per_stream == pytest.approx(1000 * 5.0 / (25.0 * 10.0))


def test_no_streams_no_rate() -> None:
    assert Result("proxy", streams=200).rate == 0.0
    assert Result("proxy", streams=200, cpu_s=1.0).cpu_ms_per_stream == 0.0


def test_needed_tools_are_the_calls_that_answer_the_turn() -> None:
    assert needed_tools("A", 0) == ["create_branch"]
    assert needed_tools("A", 2) == ["create_pull_request_review", "add_comment_to_pending_review"]
    assert needed_tools("B", len(CONVERSATIONS["B"]) - 1) == []


def test_oracle_block_grows_at_its_end_and_is_shared_by_conversations() -> None:
    order = ORDERS["short"]
    blocks = oracle_blocks(order)
    assert len(blocks) == len(order)
    for before, after in itertools.pairwise(blocks):
        assert after[: len(before)] == before  # only appended to
    # B1 (third turn) starts from A's block and adds what B needs.
    assert blocks[2] == ["create_branch", "create_pull_request", "create_issue"]
    assert blocks[-1][-1] == "add_reply_to_pull_request_comment"
    assert len(set(blocks[-1])) == len(blocks[-1]) == 7


def _definitions(order: list[tuple[str, int]]) -> dict[str, dict[str, object]]:
    """A minimal definition for every tool the session's turns call."""
    names = {name for conversation, turn in order for name in needed_tools(conversation, turn)}
    return {name: {"type": "function", "function": {"name": name}} for name in names}


def test_late_oracle_fixes_the_block_and_loads_each_tool_once_per_conversation() -> None:
    order = ORDERS["short"]
    by_name = _definitions(order)
    block, loaded = late_oracle_plan(order, by_name)
    assert [tool["function"]["name"] for tool in block] == ["create_branch", *(
        tool["function"]["name"] for tool in LATE_META_TOOLS)]
    for conversation in ("A", "B"):
        turns = [turn for c, turn in order if c == conversation]
        got = [d["function"]["name"] for turn in turns for d in loaded[(conversation, turn)]]
        needed = [name for turn in turns for name in needed_tools(conversation, turn)]
        assert got == list(dict.fromkeys(name for name in needed if name != "create_branch"))
    assert loaded[("B", 0)] == [by_name["create_issue"]]


def test_a_load_exchange_stays_where_it_was_first_sent() -> None:
    order = ORDERS["short"]
    by_name = _definitions(order)
    _, loaded = late_oracle_plan(order, by_name)
    second = messages_for("A", 1, loaded)
    third = messages_for("A", 2, loaded)
    assert third[: len(second)] == second  # the KV-cached prefix is unchanged
    assert second[-2]["tool_calls"][0]["function"]["name"] == "load_tools"
    assert second[-1]["role"] == "tool" and "create_pull_request" in second[-1]["content"]


def test_a_miss_costs_its_schemas_the_history_and_the_exchange() -> None:
    catalog = parse_tools([
        {"type": "function", "function": {"name": name, "description": f"The {name} tool."}}
        for name in ("a", "b", "c")
    ])
    case = Case("1", "conv", [], catalog, ("a", "b", "c"), (("a",), ("b", "c")))
    scored = ScoredCase(case, catalog, "select", None, [], [None, None])
    missed = CaseOutcome(scored, ["a"], [True, False], 0.0, [True, False])
    b = catalog.get("b")
    assert b is not None
    assert miss_cost(missed, history=300) == tool_tokens(b) + 300 + META_EXCHANGE_TOKENS
    served = CaseOutcome(scored, ["a", "c"], [True, True], 0.0, [True, True])
    assert miss_cost(served, history=300) == 0


def test_late_steps_pay_new_messages_and_schemas_never_the_history_again() -> None:
    catalog = parse_tools([
        {"type": "function", "function": {"name": name, "description": f"The {name} tool."}}
        for name in ("a", "b", "c", "d")
    ])

    def outcome(forwarded: list[str], needs: tuple[tuple[str, ...], ...]) -> CaseOutcome:
        case = Case("1", "conv", [], catalog, ("a", "b", "c", "d"), needs)
        scored = ScoredCase(case, catalog, "select", None, [], [None] * len(needs))
        return CaseOutcome(scored, forwarded, [], 0.0, [])

    def tokens(name: str) -> int:
        tool = catalog.get(name)
        assert tool is not None
        return tool_tokens(tool)

    have: set[str] = set()
    first = late_step(outcome(["a"], (("a",),)), have, history=100, cached_history=None, tokens=tokens)
    assert first == tokens("a") + CALL_TOOL_TOKENS + 100
    # A later step loads its new tool after 50 new tokens of messages, and the tool it
    # needs but was not given (d) in a second exchange: the 150 cached tokens are not paid.
    later = late_step(outcome(["a", "b"], (("b",), ("d",))), have, history=150,
                      cached_history=100, tokens=tokens)
    assert later == 50 + tokens("b") + tokens("d") + 2 * META_EXCHANGE_TOKENS
    assert have == {"a", "b", "d"}
    # Schemas already in the prompt are never loaded again.
    assert late_step(outcome(["b", "d"], (("d",),)), have, history=170, cached_history=150,
                     tokens=tokens) == 20


def test_the_odds_fit_recovers_the_model_that_drew_the_labels() -> None:
    """Labels drawn from a known logistic model of a gap, ln rank and a score: the fit
    finds its coefficients again, and beats a constant in log-loss."""
    rng = np.random.default_rng(0)
    n = 40_000
    gap, rank, score = rng.uniform(0, 0.5, n), rng.integers(1, 9, n), rng.uniform(0, 0.9, n)
    features = np.column_stack([np.ones(n), gap, np.log(rank), score])
    truth = np.array([-3.0, -5.0, -1.2, 6.0])
    labels = (rng.uniform(size=n) < 1 / (1 + np.exp(-features @ truth))).astype(float)
    weights = fit_logistic(features, labels)
    assert weights == pytest.approx(truth, abs=0.25)
    fitted = 1 / (1 + np.exp(-features @ weights))
    assert log_loss(fitted, labels) < log_loss(np.full(n, labels.mean()), labels)
