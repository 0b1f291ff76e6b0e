"""The machinery of ``benchmarks/agent_sessions.py --long`` without llama-server or a CLI:
the scripted task's turns and the stub's results (benchmarks/support/long_task.py,
github_results.py), the scripted model calling a tool again in a later turn and twice in
one turn, each turn's "task done", where the forwarded block changed and whether the
client changed it (benchmarks/support/session_blocks.py), and the figures at the
checkpoints (benchmarks/long_session_runs.py, long_session_report.py)."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.agent_session_runs import FLATTENED
from benchmarks.long_session_report import evaluated_rows, fact_rows, render
from benchmarks.long_session_runs import NOT_RUN, LongResult, turn_results
from benchmarks.support.agent_behaviour import AgentBehaviour
from benchmarks.support.agent_clients import MODES, AgentRun
from benchmarks.support.agent_sessions import Session
from benchmarks.support.github_mcp import CANNED, canned_result, catalog_tools
from benchmarks.support.long_task import LONG_SESSION, checkpoints
from benchmarks.support.recording_relay import Exchange
from benchmarks.support.session_blocks import block_changes
from benchmarks.support.upstream import Chat, Recorded

SCHEMAS = {tool["name"]: tool["inputSchema"] for tool in catalog_tools()}


def test_the_long_task_has_distinct_turns_whose_needs_move_across_the_catalogue() -> None:
    turns = LONG_SESSION.turns
    assert len(turns) >= 12
    prompts = [turn.prompt for turn in turns]
    assert not any(a != b and a in b for a in prompts for b in prompts)
    steps = LONG_SESSION.steps()
    assert len(steps) == len({json.dumps([s.tool, s.arguments], sort_keys=True) for s in steps})
    for step in steps:
        assert set(step.arguments) <= set(SCHEMAS[step.tool]["properties"]), step.tool
    families = {step.tool for step in steps}
    assert {"list_pull_requests", "search_issues", "get_job_logs", "list_commits",
            "list_releases"} <= families


def test_the_stubs_results_are_large_deterministic_and_summarised_on_their_first_line() -> None:
    texts = [canned_result(step.tool, step.arguments) for step in LONG_SESSION.steps()]
    assert texts == [canned_result(step.tool, step.arguments) for step in LONG_SESSION.steps()]
    assert sum(len(text) for text in texts) > 100_000  # 45,702 SmolLM2 tokens
    # Under the clients' output limits (Qwen Code truncates a result of 25,000 characters).
    assert max(len(text) for text in texts) < 24_000 and all(
        len(text.splitlines()) < 1000 for text in texts)
    firsts = [text.splitlines()[0] for text in texts]
    assert len(set(firsts)) == len(firsts)


def test_the_two_turn_sessions_results_are_unchanged() -> None:
    assert canned_result("pull_request_read", {"method": "get_files", "owner": "octo",
                                               "repo": "widgets", "pullNumber": 4711}) \
        == CANNED["pull_request_read"]


def test_checkpoints_are_the_quarters_of_the_user_turns() -> None:
    assert checkpoints(16) == [4, 8, 12, 16]
    assert checkpoints(13) == [3, 6, 10, 13]


def _chat(messages: list[dict[str, Any]]) -> Chat:
    tools = [{"type": "function", "function": {"name": name, "parameters": SCHEMAS[name]}}
             for name in ("list_pull_requests", "pull_request_read")]
    body = {"model": "m", "messages": messages, "tools": tools}
    reply = AgentBehaviour(LONG_SESSION)(Recorded("POST", "/v1/chat/completions", "", [],
                                                  json.dumps(body).encode()))
    assert isinstance(reply, Chat)
    return reply


def _called(name: str, arguments: dict[str, Any], result: str, n: int) -> list[dict[str, Any]]:
    call = {"id": f"c{n}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": result}]


def test_a_tool_of_an_earlier_turn_is_called_again_and_twice_in_one_turn() -> None:
    second, third = LONG_SESSION.turns[1], LONG_SESSION.turns[2]
    history = [{"role": "user", "content": second.prompt},
               *_called("pull_request_read", second.steps[0].arguments, "diff…", 1),
               {"role": "assistant", "content": "Here is what I found."},
               {"role": "user", "content": third.prompt}]
    first_call = _chat(history).tool_calls
    assert first_call and json.loads(first_call[0]["arguments"])["method"] == "get_reviews"
    history += _called("pull_request_read", third.steps[0].arguments, "5 reviews", 2)
    second_call = _chat(history).tool_calls
    assert second_call and json.loads(second_call[0]["arguments"])["method"] == "get_review_comments"
    history += _called("pull_request_read", third.steps[1].arguments, "22 comments\nmore", 3)
    answer = _chat(history)
    assert answer.tool_calls is None and answer.content == "Here is what I found:\n5 reviews\n22 comments"


def _run(calls: list[dict[str, Any]], answer: str | None, code: int = 0) -> AgentRun:
    return AgentRun(MODES["opencode-default"], code, "", "", answer, calls)


def test_a_turn_is_done_when_its_calls_reached_the_server_and_its_answer_quotes_them() -> None:
    one, two = LONG_SESSION.turns[:2]
    first = [{"tool": one.steps[0].tool, "arguments": one.steps[0].arguments}]
    second = [*first, {"tool": "pull_request_read", "arguments": {"method": "get_diff"}}]
    quote = canned_result(one.steps[0].tool, one.steps[0].arguments).splitlines()[0]
    session = Session([_run(first, quote), _run(second, "…")], False, [], [])
    assert turn_results(session, LONG_SESSION) == [
        "", "no pull_request_read call with the task's arguments",
        *[NOT_RUN] * (len(LONG_SESSION.turns) - 2)]


def _exchange(path: str, body: dict[str, Any], at: float) -> Exchange:
    return Exchange(Recorded("POST", path, "", [], json.dumps(body).encode(), arrived_at=at))


def test_a_block_change_is_the_clients_only_where_its_own_request_changed() -> None:
    path = "/v1/chat/completions"
    system = [{"role": "system", "content": "agent"}]
    client = [_exchange(path, {"messages": system, "tools": [1, 2, 3]}, 1.0),
              _exchange(path, {"messages": system, "tools": [1, 2, 3]}, 2.0),
              _exchange(path, {"messages": system, "tools": [1, 2, 3, 4]}, 3.0)]
    upstream = [_exchange(path, {"tools": ["a"]}, 1.1),
                _exchange(path, {"tools": ["a", "b"]}, 1.2),  # the proxy's hidden round
                _exchange(path, {"tools": ["a", "b"]}, 2.1),
                _exchange(path, {"tools": ["a", "b", "c"]}, 3.1)]
    assert [(c.index, c.by_client) for c in block_changes(upstream, client)] == [
        (1, False), (3, True)]


def _result(via: str, evaluated: list[int], mode: str = "codex-default") -> LongResult:
    turns = list(range(1, len(evaluated) + 1))
    rows = [{"turn": turn, "status": 200, "prompt": 100 * turn, "evaluated": value,
             "tools": 3, "block_changed": turn == 2, "by_client": False}
            for turn, value in zip(turns, evaluated, strict=True)]
    return LongResult(mode, via, [""] * 16, rows)


def test_the_checkpoints_sum_the_turns_and_compare_with_the_flattened_direct_session() -> None:
    direct = _result("direct", [1000] * 16)
    flattened = _result(FLATTENED, [4000] + [100] * 15)
    proxy = _result("toolprune", [400] + [200] * 15)
    assert proxy.checkpoint_values() == [1000, 1800, 2600, 3400]
    headers, rows = evaluated_rows([direct, flattened, proxy])
    by_via = {row[1]: dict(zip(headers, row, strict=True)) for row in rows}
    assert by_via["toolprune"]["× direct @4"] == f"{1000 / 4300:.2f}×"
    assert by_via["toolprune"]["× direct"] == "0.10×"
    _, facts = fact_rows([proxy])
    assert facts[0][2:5] == ["16/16", "16", "1 (0)"]


def test_the_markdown_tables_align_the_names_left_and_the_figures_right() -> None:
    evaluated, facts = render([_result("direct", [10] * 16)], markdown=True).split("\n\n")
    header, rule, row = evaluated.splitlines()
    assert header.startswith("| client/mode | via | turn 4 |")
    assert rule.startswith("|---|---|---:|") and row.startswith("| codex-default | direct | 40 |")
    assert facts.splitlines()[2].startswith("| codex-default | direct | 16/16 |")


def test_a_refused_request_leaves_its_checkpoints_unmeasured() -> None:
    result = _result("direct", [10] * 16)
    result.requests[5]["status"] = 400
    assert result.checkpoint_values() == [40, None, None, None]


def test_a_session_that_stopped_early_is_compared_at_the_tasks_checkpoints() -> None:
    direct = _result("direct", [1000] * 16)
    stopped = _result("toolprune", [100] * 10)
    stopped.turns = [""] * 10 + [NOT_RUN] * 6
    assert stopped.checkpoint_values() == [400, 800, None, None]
    headers, rows = evaluated_rows([direct, stopped])
    by_via = {row[1]: dict(zip(headers, row, strict=True)) for row in rows}
    assert by_via["toolprune"]["× direct @8"] == "0.10×"
    assert by_via["toolprune"]["× direct @12"] == "–"
    _, facts = fact_rows([stopped])
    assert facts[0][2].startswith("10/16 (turn 11: not run")


def test_a_summary_quotes_the_tools_first_line_not_codexs_wrapper() -> None:
    turn = LONG_SESSION.turns[0]
    history = [{"role": "user", "content": turn.prompt},
               *_called("list_pull_requests", turn.steps[0].arguments,
                        "Wall time: 0.0089 seconds\nOutput:\nacme/ledger: 36 open\n#340 …", 1)]
    assert _chat(history).content == "Here is what I found:\nacme/ledger: 36 open"


def test_a_client_that_rewrites_its_history_broke_the_prefix_its_marks_and_text_blocks_did_not() -> None:
    path = "/v1/messages"
    first = [{"role": "user", "content": [{"type": "text", "text": "a",
                                           "cache_control": {"type": "ephemeral"}}]}]
    later = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    client = [_exchange(path, {"system": "s", "tools": [1], "messages": first}, 1.0),
              _exchange(path, {"system": "s", "tools": [1], "messages": later}, 2.0),
              _exchange(path, {"system": "s", "tools": [1], "messages": later[1:]}, 3.0)]
    upstream = [_exchange(path, {"tools": ["a"]}, 1.1), _exchange(path, {"tools": ["b"]}, 2.1),
                _exchange(path, {"tools": ["c"]}, 3.1)]
    assert [(c.index, c.by_client) for c in block_changes(upstream, client)] == [
        (1, False), (2, True)]
