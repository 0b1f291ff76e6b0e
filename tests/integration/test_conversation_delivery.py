"""Tools delivered in the conversation (``TOOLPRUNE_LATE_TOOLS=conversation``), on every
acting API, plain and streamed: the block the first round forwarded stays for the
conversation; a tool loaded later reaches the model in the load result, which carries its
definition; the model calls it through the ``call_tool`` bridge and the client gets the
call under its real name; a bridge call that cannot be made goes back to the model in a
hidden round, never to the client; and the next request is forwarded as the upstream saw
the conversation (the hidden exchange in its place, the client's call written back as the
bridge call), so its prompt begins with the previous one's. Real servers on loopback: the
proxy under uvicorn in front of the scripted upstream (``benchmarks/support/upstream.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.conversations import (
    answered,
    client_calls,
    history_of,
    streamed_call_places,
    with_history,
)
from tests.support.turn_apis import (
    CASES,
    IDS,
    LOADED,
    REAL,
    Answer,
    Bench,
    Call,
    Servers,
    bench,
    load,
    turn_servers,
)

#: Arguments that fit ``browser_cookie_set``'s schema (``name`` and ``value`` required).
COOKIE = {"name": "session", "value": "abc123"}


def bridge(name: str, arguments: Any, call_id: str = "bridge_1") -> Call:
    """A ``call_tool`` call of ``name`` with ``arguments``."""
    return Call(call_id, "call_tool", json.dumps({"name": name, "arguments": arguments}))


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"bridge": {"late_tools": "conversation"}}) as running:
        yield running


@pytest.fixture
def run(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    return bench(servers, "bridge", request, name, stream)


def send(run: Bench, body: dict[str, Any]) -> Answer:
    """``body`` sent as the test's client (its credential)."""
    response = httpx.post(run.proxy + run.api.path, json=body, headers=run.credential, timeout=300)
    return run.api.read(response, run.stream)


def first_turn(run: Bench) -> tuple[dict[str, Any], Answer, list[Call]]:
    """The first request: the model loads ``LOADED``, then calls it through the bridge."""
    run.script(run.api.reply(calls=(load(LOADED),)), run.api.reply(calls=(bridge(LOADED, COOKIE),)))
    body = run.api.body(run.stream)
    answer = send(run, body)
    return body, answer, client_calls(run.api.name, answer.raw, run.stream)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_loaded_tool_is_called_through_the_bridge_and_reaches_the_client_by_name(run: Bench) -> None:
    _, answer, calls = first_turn(run)
    assert (answer.status, answer.calls, answer.ending) == (200, [LOADED], "calls")
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [("bridge_1", LOADED, COOKIE)]
    assert b"call_tool" not in answer.raw and b"load_tools" not in answer.raw
    first, second = run.bodies()
    offered = run.api.offered(first)
    assert offered == run.api.offered(second)  # the block stays as the first round sent it
    assert LOADED not in offered and offered[-2:] == ["load_tools", "call_tool"]
    ((call_id, result),) = run.api.results(second)
    delivered = json.loads(result)
    assert call_id == "meta_1" and delivered["loaded"] == [LOADED]
    assert [tool["name"] for tool in delivered["tools"]] == [LOADED]
    assert delivered["tools"][0]["parameters"]["required"] == ["name", "value"]
    assert "call_tool" in delivered["note"] and "not in your tool list" in delivered["note"]


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_the_next_request_is_forwarded_as_the_upstream_saw_the_conversation(run: Bench) -> None:
    body, _, calls = first_turn(run)
    run.script(run.api.reply("The cookie is set."))
    answer = send(run, answered(run.api.name, body, calls, "cookie set"))
    assert (answer.status, answer.text, answer.calls) == (200, "The cookie is set.", [])
    first, second, third = run.bodies()
    assert run.api.offered(third) == run.api.offered(first)
    before, after = history_of(run.api.name, second), history_of(run.api.name, third)
    assert after[: len(before)] == before  # the prompt extends the previous one
    (written,) = run.api.exchanged(with_history(run.api.name, third, after[len(before):]))
    assert (written.id, written.name) == ("bridge_1", "call_tool")
    assert json.loads(written.arguments) == {"name": LOADED, "arguments": COOKIE}


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_hidden_rounds_text_and_the_calls_after_a_bridge_call_keep_their_places(run: Bench) -> None:
    """The text a hidden round showed the client stands in the hidden exchange, not twice;
    a real call after a bridge call reaches the client after it, as the model made them."""
    run.script(run.api.reply("Loading the cookie tool. ", calls=(load(LOADED),)),
               run.api.reply(calls=(bridge(LOADED, COOKIE), Call("real_1", REAL, "{}"))))
    body = run.api.body(run.stream)
    answer = send(run, body)
    calls = client_calls(run.api.name, answer.raw, run.stream)
    assert [(c.id, c.name) for c in calls] == [("bridge_1", LOADED), ("real_1", REAL)]
    run.script(run.api.reply("Done."))
    send(run, answered(run.api.name, body, calls, "ok", text=answer.text))
    _, second, third = run.bodies()
    before, after = history_of(run.api.name, second), history_of(run.api.name, third)
    assert after[: len(before)] == before
    assert [(c.id, c.name) for c in run.api.exchanged(with_history(run.api.name, third, after[len(before):]))] == [
        ("bridge_1", "call_tool"), ("real_1", REAL)]
    assert "Loading the cookie tool." not in json.dumps(after[len(before):])


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
@pytest.mark.parametrize(("called", "arguments", "told"), [
    ("browser_cookie_sett", COOKIE, "did_you_mean"),
    (LOADED, {"name": "session"}, "problems"),
    (LOADED, "not an object", "error"),
], ids=["unknown-name", "arguments-off-schema", "arguments-not-an-object"])
def test_a_bridge_call_that_cannot_be_made_goes_back_to_the_model_not_the_client(
    run: Bench, called: str, arguments: Any, told: str
) -> None:
    run.script(run.api.reply(calls=(load(LOADED),)),
               run.api.reply(calls=(bridge(called, arguments),)),
               run.api.reply("I could not set it."))
    answer = run.post()
    assert (answer.status, answer.text, answer.calls) == (200, "I could not set it.", [])
    assert b"call_tool" not in answer.raw
    first, second, third = run.bodies()
    assert run.api.offered(third) == run.api.offered(first)
    (_, (call_id, refusal)) = run.api.results(third)
    assert call_id == "bridge_1" and told in json.loads(refusal)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_bridge_call_that_cannot_be_made_beside_a_real_call_leaves_the_real_call_alone(
    run: Bench,
) -> None:
    """The client gets the real call, first in its answer (no gap where the refused bridge
    call stood); the client's call ends the request, so no hidden round follows."""
    run.script(run.api.reply(calls=(load(LOADED),)),
               run.api.reply(calls=(bridge("browser_cookie_sett", COOKIE), Call("real_1", REAL, "{}"))))
    answer = run.post()
    assert (answer.status, answer.calls) == (200, [REAL])
    calls = client_calls(run.api.name, answer.raw, run.stream)
    assert [(c.id, c.name) for c in calls] == [("real_1", REAL)]
    if run.stream:
        assert streamed_call_places(run.api.name, answer.raw) == {0}
    assert b"call_tool" not in answer.raw and len(run.bodies()) == 2
