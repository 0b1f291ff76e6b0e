"""The rules of an acting turn, one test each, parametrised over the three APIs (Chat
Completions, Responses, Messages), plain and streamed: a rule that holds on one API only
fails here.

Meta rounds are hidden and re-issued; the round limit ends the turn with a note that
says whether the last round loaded anything; a meta-call mixed with a real call loads for
the next turn; a round cut by the output limit never runs its meta-call; unreadable
meta-call arguments are explained to the model; the decision log admits every tool of the
turn; a dry run changes nothing a later request sees. Real servers on loopback, shared by the module (one embedder load, one index): the
proxy under uvicorn in front of the scripted upstream (``benchmarks/support/upstream.py``);
each test has a credential of its own, so no state crosses tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.support.fault_matrix import proves
from tests.support.logs import Lines
from tests.support.turn_apis import (
    CASES,
    IDS,
    LOADED,
    LOADED_LATER,
    REAL,
    Bench,
    Call,
    Servers,
    bench,
    load,
    turn_servers,
)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"default": {}, "limit": {"max_meta_rounds": 1}}) as running:
        yield running


@pytest.fixture
def run(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    """The test's bench on the default proxy (``name``, ``stream``: the test's parameters)."""
    return bench(servers, "default", request, name, stream)


@pytest.fixture
def limited(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    """The test's bench on the proxy allowing one meta round."""
    return bench(servers, "limit", request, name, stream)


def hidden(raw: bytes) -> None:
    """The client was shown no meta-call."""
    assert b"load_tools" not in raw and b"meta_1" not in raw, raw[-600:]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_meta_round_is_hidden_and_the_request_re_issued(run: Bench) -> None:
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply("done"))
    answer = run.post()
    assert (answer.status, answer.text, answer.calls, answer.ending) == (200, "done", [], "stop")
    hidden(answer.raw)
    first, second = run.bodies()
    assert LOADED not in run.api.offered(first) and run.api.offered(first)[-1] == "load_tools"
    assert LOADED in run.api.offered(second)
    ((call_id, result),) = run.api.results(second)
    assert call_id == "meta_1" and json.loads(result)["loaded"] == [LOADED]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_after_the_last_meta_round_the_loads_wait_for_the_next_turn(limited: Bench) -> None:
    run = limited
    run.script(
        run.api.reply(calls=(load(LOADED),)),
        run.api.reply(calls=(load(LOADED_LATER, call_id="meta_2"),)),  # past the limit
        run.api.reply("next turn"),
    )
    headers = {"X-Conversation-Id": "limit"}
    answer = run.post(headers)
    assert answer.status == 200 and answer.calls == [] and answer.ending == "stop"
    assert "after 1 tool-loading round(s)" in answer.text  # an empty answer says why
    assert "The tools it loaded are offered from the next request on." in answer.text
    hidden(answer.raw)
    assert len(run.sent()) == 2  # no third round
    assert "load_tools" not in run.api.offered(run.bodies()[1])  # the limit: not offered
    run.post(headers)
    assert LOADED_LATER in run.api.offered(run.bodies()[2])


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_last_meta_round_that_loads_nothing_is_not_said_to_load(limited: Bench) -> None:
    run = limited
    run.script(
        run.api.reply(calls=(load(LOADED),)),
        run.api.reply(calls=(load("no_such_tool", call_id="meta_2"),)),  # past the limit
    )
    answer = run.post()
    assert answer.status == 200 and answer.calls == [] and answer.ending == "stop"
    assert "It loaded no new tool" in answer.text
    assert "offered from the next request on" not in answer.text


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_meta_call_beside_a_real_call_loads_for_the_next_turn(run: Bench) -> None:
    run.script(run.api.reply(calls=(load(LOADED), Call("c_real", REAL, "{}"))),
               run.api.reply("again"))
    headers = {"X-Conversation-Id": "mixed"}
    answer = run.post(headers)
    assert (answer.status, answer.calls, answer.ending) == (200, [REAL], "calls")
    hidden(answer.raw)
    assert len(run.sent()) == 1
    run.post(headers)
    assert LOADED in run.api.offered(run.bodies()[1])


@proves(
    fault="a hidden meta-call cut off by the output limit (`length`, `max_tokens`, `incomplete`)",
    phase="inside a hidden meta-call",
    client="every API, plain and streamed: the API's cut ending, no meta-call, a note that the call was not run; the call is never run nor re-issued",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_round_cut_by_the_output_limit_never_runs_its_meta_call(run: Bench) -> None:
    run.script(run.api.reply(calls=(load(LOADED),), cut=True), run.api.reply("again"))
    headers = {"X-Conversation-Id": "cut"}
    answer = run.post(headers)
    assert (answer.status, answer.calls, answer.ending) == (200, [], "cut")
    assert "cut off" in answer.text and "not run" in answer.text
    hidden(answer.raw)
    assert len(run.sent()) == 1  # not re-issued
    run.post(headers)
    assert LOADED not in run.api.offered(run.bodies()[1])  # nothing was loaded


@proves(
    fault="a hidden meta-call whose arguments are not a JSON object (cut off, invented text)",
    phase="inside a hidden meta-call",
    client="every API: the answer of the re-issue; the model was shown the call with `{}` and a result whose `error` says what was wrong",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_meta_call_with_unreadable_arguments_is_told_why(run: Bench) -> None:
    broken = Call("meta_1", "load_tools", '{"names": ["browser_coo')
    run.script(run.api.reply(calls=(broken,)), run.api.reply("done"))
    answer = run.post()
    assert (answer.status, answer.text) == (200, "done")
    second = run.bodies()[1]
    (call,) = run.api.exchanged(second)
    assert (call.id, json.loads(call.arguments)) == ("meta_1", {})  # valid JSON re-issued
    ((_, result),) = run.api.results(second)
    assert json.loads(result)["error"].startswith("the arguments were cut off or are not valid JSON")


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_the_decision_log_admits_every_tool_of_the_turn(run: Bench, log_lines: Lines) -> None:
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply("done"))
    run.post()
    first = run.sent()[0]
    line = log_lines.wait_for("pruning_decision", first.header("x-request-id") or "")
    selected = [tool for tool in run.api.offered(first.json()) if tool != "load_tools"]
    assert set(line["admitted"]) == {*selected, LOADED} and line["admitted"][-1] == LOADED
    assert line["rounds"] == 1


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_dry_run_changes_nothing_a_later_request_sees(run: Bench, log_lines: Lines) -> None:
    headers = {"X-Conversation-Id": "dry"}
    assert run.post({**headers, "X-Tool-Pruning": "dry-run"}).status == 200
    assert len(run.api.offered(run.bodies()[0])) == 69  # forwarded whole
    run.post(headers)
    line = log_lines.wait_for("pruning_decision", run.sent()[1].header("x-request-id") or "")
    # The first turn of a new conversation, not started from the dry run's block.
    assert (line["decision"], line["turn"], line["block"]) == ("pruned", 1, None)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_top_k_that_covers_the_catalogue_says_it_was_forwarded_whole_and_why(
    run: Bench, log_lines: Lines
) -> None:
    """``X-Tool-Pruning-Top-K: 10000`` on 69 tools: pruning would save nothing, so the
    catalogue goes whole (``small_catalog``), and the response and the log say so: every
    tool forwarded, and the rule that kept it whole."""
    response = httpx.post(run.proxy + run.api.path, json=run.api.body(run.stream), timeout=300,
                          headers={**run.credential, "X-Tool-Pruning-Top-K": "10000"})
    assert response.status_code == 200
    assert response.headers["x-tool-pruning-tools"] == "69/69"
    assert response.headers["x-tool-pruning-small-catalog"] == "no_saving"
    (sent,) = run.bodies()
    assert len(run.api.offered(sent)) == 69
    line = log_lines.wait_for("pruning_decision", response.headers["x-request-id"])
    assert (line["decision"], line["reason"], line["top_k"]) == ("small_catalog", "no_saving", 10000)
    assert (line["offered"], line["forwarded"]) == (69, 69)


def client_tools(run: Bench, body: dict) -> int:
    """The client's tools an upstream request offered (the meta-tool left out)."""
    return len([name for name in run.api.offered(body) if name not in ("load_tools", "search_tools")])


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_the_tools_header_counts_the_tools_the_answer_was_produced_with(
    run: Bench, log_lines: Lines
) -> None:
    """After a hidden ``load_tools`` round, ``X-Tool-Pruning-Tools`` of a plain response
    counts the re-issued round's tools (written after the last round). A stream's headers
    leave with its first event, before the model asked for more: they count the first
    round's, and the stream says the answer's count in an SSE comment before its end; the
    decision line's ``forwarded`` is the answer's count too."""
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply("done"))
    response = httpx.post(run.proxy + run.api.path, json=run.api.body(run.stream), timeout=300,
                          headers=run.credential)
    first, second = run.bodies()
    before, after = client_tools(run, first), client_tools(run, second)
    assert after == before + 1  # the loaded tool
    header = response.headers["x-tool-pruning-tools"]
    comment = f": x-tool-pruning-tools: {after}/69\n\n".encode()
    if run.stream:
        assert header == f"{before}/69" and comment in response.content
        assert response.content.count(b": x-tool-pruning-tools") == 1
    else:
        assert header == f"{after}/69"
    line = log_lines.wait_for("pruning_decision", response.headers["x-request-id"])
    assert (line["forwarded"], line["rounds"]) == (after, 1)
