"""Proactive delivery (``TOOLPRUNE_PROACTIVE_LOADS``, tools delivered in the conversation):
a new user turn whose best tools the conversation's block lacks gets them before the model
asks, as a meta-call the proxy makes itself, answered in the first round's request after
the user's message; the block stays; the next request is forwarded with that exchange in
its place. Off, the first round is the client's history alone. Chat Completions, plain and
streamed; real servers on loopback (the proxy under uvicorn, the scripted upstream).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.integration.test_conversation_delivery import send
from tests.support.turn_apis import APIS, Bench, Servers, bench, turn_servers

#: A second user turn whose best tool (``browser_cookie_set``) the first turn's block lacks.
COOKIES = "Now set a session cookie named theme with the value dark for example.com"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"proactive": {"late_tools": "conversation", "proactive_loads": True},
                       "waiting": {"late_tools": "conversation"}}) as running:
        yield running


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_new_user_turns_missing_tools_are_delivered_before_the_model_asks(
    servers: Servers, request: pytest.FixtureRequest, stream: bool
) -> None:
    run: Bench = bench(servers, "proactive", request, "chat", stream)
    chat = APIS["chat"]
    run.script(chat.reply("The screenshot is taken."))
    body = chat.body(stream)
    send(run, body)
    follow = {**body, "messages": [*body["messages"],
                                   {"role": "assistant", "content": "The screenshot is taken."},
                                   {"role": "user", "content": COOKIES}]}
    run.script(chat.reply("Setting it."), chat.reply("Done."))
    assert send(run, follow).text == "Setting it."
    first, second = run.bodies()
    assert chat.offered(second) == chat.offered(first)  # the block stays
    (call,) = chat.exchanged(second)  # the proxy's own call, after the user's message
    assert call.name == "load_tools" and "browser_cookie_set" in json.loads(call.arguments)["names"]
    assert second["messages"][-3]["content"] == COOKIES
    ((_, result),) = chat.results(second)
    assert "browser_cookie_set" in [tool["name"] for tool in json.loads(result)["tools"]]
    # The next request holds the exchange where it stood.
    again = {**follow, "messages": [*follow["messages"], {"role": "assistant", "content": "Setting it."},
                                    {"role": "user", "content": "Thanks, that is all for today"}]}
    send(run, again)
    third = run.bodies()[-1]
    assert third["messages"][: len(second["messages"])] == second["messages"]


def test_without_proactive_loads_the_model_asks_first(
    servers: Servers, request: pytest.FixtureRequest
) -> None:
    run: Bench = bench(servers, "waiting", request, "chat", False)
    chat = APIS["chat"]
    run.script(chat.reply("The screenshot is taken."), chat.reply("Setting it."))
    body = chat.body(False)
    send(run, body)
    send(run, {**body, "messages": [*body["messages"],
                                    {"role": "assistant", "content": "The screenshot is taken."},
                                    {"role": "user", "content": COOKIES}]})
    assert chat.exchanged(run.bodies()[-1]) == []
