"""The bridge takes what models write (selection/clients/bridge_calls.py), on every acting
API, plain and streamed: a bridge call in a wrong shape with one reading reaches the client
at once as the real call (no hidden refusal round), a meta-tool called through the bridge is
run, a refusal teaches the valid shape; each repair and refusal is counted by kind in the
metrics and named in the request's decision line. Real servers on loopback: the proxy under
uvicorn in front of the scripted upstream (``benchmarks/support/upstream.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.conversations import client_calls
from tests.support.logs import Lines
from tests.support.turn_apis import (
    CASES,
    IDS,
    LOADED,
    REAL,
    Bench,
    Call,
    Servers,
    bench,
    load,
    turn_servers,
)

COOKIE = {"name": "session", "value": "abc123"}


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"bridge": {"late_tools": "conversation"},
                       "one_round": {"late_tools": "conversation", "max_meta_rounds": 1}}) as running:
        yield running


@pytest.fixture
def run(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    return bench(servers, "bridge", request, name, stream)


def bridge_call(written: Any, call_id: str = "bridge_1") -> Call:
    """A call of the bridge whose arguments are ``written`` (JSON of it; text as it is)."""
    return Call(call_id, "call_tool", written if isinstance(written, str) else json.dumps(written))


def counted(run: Bench, family: str) -> dict[str, float]:
    """The proxy's ``toolprune_<family>_total`` counters, by ``kind``."""
    text = httpx.get(run.proxy + "/metrics", timeout=30).text
    pattern = rf'^toolprune_{family}_total{{kind="([a-z_]+)"}} ([0-9.e+]+)$'
    return {kind: float(value) for kind, value in re.findall(pattern, text, re.MULTILINE)}


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {kind: after[kind] - before.get(kind, 0.0) for kind in after if after[kind] != before.get(kind, 0.0)}


#: (shape, the bridge call's arguments as the model wrote them, the arguments the client
#: gets, the repairs counted)
SHAPES = [
    ("name-key-nested-twice-strings",
     {"tool_name": LOADED, "arguments": {"arguments": {**COOKIE, "expires": "1700000000", "httpOnly": "true"}}},
     {**COOKIE, "expires": 1700000000, "httpOnly": True}, {"name_key", "arguments_nested", "string_values"}),
    ("python-literal-arguments", {"name": LOADED, "arguments": str(COOKIE)}, COOKIE, {"broken_json"}),
    ("nested-bridge-spelled-name",
     {"name": "call_tool", "arguments": {"name": "mcp__playwright__browser_cookie_set", "input": COOKIE}},
     COOKIE, {"nested_bridge", "name_spelling", "arguments_key"}),
    ("broken-json", '{"name": "browser_cookie_set" "arguments": {"name": "session", "value": "abc123"}}',
     COOKIE, {"broken_json"}),
]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
@pytest.mark.parametrize(("shape", "written", "arguments", "repairs"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_shape_with_one_reading_reaches_the_client_without_a_refusal_round(
    run: Bench, log_lines: Lines, shape: str, written: Any, arguments: dict[str, Any], repairs: set[str]
) -> None:
    before = counted(run, "bridge_repairs")
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply(calls=(bridge_call(written),)))
    answer = run.post()
    assert (answer.status, answer.calls, answer.ending) == (200, [LOADED], "calls")
    calls = client_calls(run.api.name, answer.raw, run.stream)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [("bridge_1", LOADED, arguments)]
    assert b"call_tool" not in answer.raw
    assert len(run.bodies()) == 2  # the load round and the bridge call's: no refusal round
    assert grown(before, counted(run, "bridge_repairs")) == dict.fromkeys(repairs, 1.0)
    line = log_lines.wait_for("pruning_decision", run.sent()[0].header("x-request-id") or "")
    assert [(entry["made"], set(entry["repairs"])) for entry in line["bridge"]] == [(LOADED, repairs)]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_meta_tool_called_through_the_bridge_is_run(run: Bench, log_lines: Lines) -> None:
    """``call_tool {"name": "load_tools", …}``: the proxy loads, delivers the definition in
    the hidden result, and the model's next bridge call reaches the client."""
    run.script(run.api.reply(calls=(bridge_call({"name": "load_tools", "arguments": {"names": [LOADED]}},
                                                "bridge_0"),)),
               run.api.reply(calls=(bridge_call({"name": LOADED, "arguments": COOKIE}),)))
    answer = run.post()
    assert (answer.status, answer.calls) == (200, [LOADED])
    first, second = run.bodies()
    ((call_id, result),) = run.api.results(second)
    assert call_id == "bridge_0"
    assert [tool["name"] for tool in json.loads(result)["tools"]] == [LOADED]
    line = log_lines.wait_for("pruning_decision", run.sent()[0].header("x-request-id") or "")
    assert [entry["repairs"] for entry in line["bridge"]] == [["meta_tool"], []]
    assert [event["tool"] for event in line["meta"]] == ["load_tools"]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_tool_of_the_block_called_through_the_bridge_is_its_real_call(run: Bench) -> None:
    before = counted(run, "bridge_repairs")
    run.script(run.api.reply(calls=(bridge_call({"name": REAL, "arguments": {"scale": "css"}}),)))
    answer = run.post()
    assert (answer.status, answer.calls) == (200, [REAL])
    assert REAL in run.api.offered(run.bodies()[0]) and len(run.bodies()) == 1
    assert grown(before, counted(run, "bridge_repairs")) == {"block_tool": 1.0}


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_refusal_teaches_the_valid_shape_and_is_counted(run: Bench, log_lines: Lines) -> None:
    """Arguments nested under a key the tool does not have: refused, answered with the
    model's own values in the valid shape, never the malformed one; counted by kind."""
    before = counted(run, "bridge_refusals")
    written = {"name": LOADED, "arguments": COOKIE, "cookie": {"arguments": COOKIE}}
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply(calls=(bridge_call(written),)),
               run.api.reply("I could not set it."))
    answer = run.post()
    assert (answer.status, answer.text, answer.calls) == (200, "I could not set it.", [])
    third = run.bodies()[2]
    (_, (call_id, refusal)) = run.api.results(third)
    taught = json.loads(refusal)
    assert call_id == "bridge_1" and "'cookie' is not a parameter" in taught["error"]
    assert taught["call_it_so"] == {"name": LOADED, "arguments": COOKIE}
    assert '"cookie"' not in json.dumps(taught["call_it_so"])
    assert grown(before, counted(run, "bridge_refusals")) == {"stray_keys": 1.0}
    line = log_lines.wait_for("pruning_decision", run.sent()[0].header("x-request-id") or "")
    assert line["bridge"] == [{"refused": "stray_keys", "repairs": []}]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_refusal_past_the_last_round_is_told_as_a_call_not_made(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    """The rounds spent, a bridge call that could not be read ends the answer: the client
    is told the call was not made, not that the model asked to load tools."""
    run = bench(servers, "one_round", request, name, stream)
    written = {"name": LOADED, "arguments": COOKIE, "cookie": {"arguments": COOKIE}}
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply(calls=(bridge_call(written),)))
    answer = run.post()
    assert (answer.status, answer.calls) == (200, [])
    assert "through call_tool" in answer.text and "the call was not made" in answer.text
    assert "load more tools" not in answer.text
    assert len(run.sent()) == 2
