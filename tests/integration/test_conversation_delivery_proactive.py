"""Proactive delivery (``TOOLPRUNE_PROACTIVE_LOADS``, tools delivered in the conversation):
a new user turn whose best tools the conversation's block lacks gets them before the model
asks, as a meta-call the proxy makes itself, answered in the first round's request after
the user's message; the block stays; the next request is forwarded with that exchange in
its place. Off, the first round is the client's history alone. Every acting API, plain and
streamed; real servers on loopback (the proxy under uvicorn, the scripted upstream).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.integration.test_conversation_delivery import send
from tests.support.conversations import answered, history_of, with_history
from tests.support.turn_apis import CASES, IDS, Bench, Servers, bench, turn_servers

#: A second user turn whose best tool (``browser_cookie_set``) the first turn's block lacks.
COOKIES = "Now set a session cookie named theme with the value dark for example.com"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"proactive": {"late_tools": "conversation", "proactive_loads": True},
                       "waiting": {"late_tools": "conversation"}}) as running:
        yield running


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_new_user_turns_missing_tools_are_delivered_before_the_model_asks(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    run: Bench = bench(servers, "proactive", request, name, stream)
    api = run.api
    run.script(api.reply("The screenshot is taken."))
    body = api.body(stream)
    send(run, body)
    follow = answered(name, body, [], "", text="The screenshot is taken.", ask=COOKIES)
    run.script(api.reply("Setting it."), api.reply("Done."))
    assert send(run, follow).text == "Setting it."
    first, second = run.bodies()
    assert api.offered(second) == api.offered(first)  # the block stays
    before = len(history_of(name, follow))
    (call,) = api.exchanged(with_history(name, second, history_of(name, second)[before:]))
    assert call.name == "load_tools" and "browser_cookie_set" in json.loads(call.arguments)["names"]
    ((_, result),) = api.results(with_history(name, second, history_of(name, second)[before:]))
    assert "browser_cookie_set" in [tool["name"] for tool in json.loads(result)["tools"]]
    # The next request holds the exchange where it stood.
    again = answered(name, follow, [], "", text="Setting it.", ask="Thanks, that is all for today")
    send(run, again)
    third = run.bodies()[-1]
    assert history_of(name, third)[: len(history_of(name, second))] == history_of(name, second)


@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_without_proactive_loads_the_model_asks_first(
    servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool
) -> None:
    run: Bench = bench(servers, "waiting", request, name, stream)
    api = run.api
    run.script(api.reply("The screenshot is taken."), api.reply("Setting it."))
    body = api.body(stream)
    send(run, body)
    follow = answered(name, body, [], "", text="The screenshot is taken.", ask=COOKIES)
    assert send(run, follow).text == "Setting it."
    first, second = run.bodies()
    assert api.offered(second) == api.offered(first)
    before = len(history_of(name, follow))
    assert history_of(name, second)[before:] == []  # nothing after the client's history
