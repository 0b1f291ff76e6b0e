"""A client that searches its own deferred tools, with tools delivered in the conversation
(``TOOLPRUNE_LATE_TOOLS=conversation``): the tool its search finds is not added to the
block; the search result the upstream reads where the search stands carries its
definition, and the model calls it through the ``call_tool`` bridge, the client getting the
call under the found tool's name. Chat Completions with a plain search function and a
deferred-tool menu in the system prompt (Qwen Code's way; the request shapes of
``tests/integration/test_client_deferral.py``), plain and streamed. Real servers on
loopback: the proxy under uvicorn in front of the scripted upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Chat, Upstream
from config.settings import Settings
from proxy.app import create_app
from tests.integration.test_client_deferral import CORE, DEFERRED, FOUND, _chat
from tests.support.conversations import answered, client_calls
from tests.support.turn_apis import APIS

CHAT = APIS["chat"]
ARGUMENTS = {"key": "theme", "value": "dark"}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream()
    with serve_in_thread(upstream.app) as origin:
        settings = Settings(upstream_url=origin + "/v1", max_tools=6, top_k=4,
                            index_timeout_s=300.0, late_tools="conversation")
        with serve_in_thread(create_app(settings), server_header=False) as proxy:
            yield upstream, proxy


def post(proxy: str, body: dict[str, Any], test: str) -> httpx.Response:
    response = httpx.post(proxy + CHAT.path, json=body, timeout=300,
                          headers={"Authorization": f"Bearer {test}"})
    assert response.status_code == 200, response.text[:500]
    return response


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_tool_the_clients_search_found_is_delivered_where_the_result_stands(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, stream: bool
) -> None:
    upstream, proxy = servers
    upstream.drain(CHAT.suffix)
    since = len(upstream.requests)
    test = request.node.name
    post(proxy, _chat(stream, found=False), test)
    bridged = {"id": "b1", "name": "call_tool",
               "arguments": json.dumps({"name": FOUND["name"], "arguments": ARGUMENTS})}
    upstream.script(Chat(tool_calls=[bridged]))
    searched = _chat(stream, found=True)
    answer = post(proxy, searched, test)
    first, second = (r.json() for r in CHAT.sent(upstream, since))
    # The block stays: the client's CORE, its search function, then the bridge.
    assert CHAT.offered(second) == CHAT.offered(first) == [
        *(tool["name"] for tool in CORE), "tool_search", "call_tool"]
    # The search result keeps the found tool's whole definition: it is not in the block.
    assert json.dumps(FOUND["parameters"]) in second["messages"][-1]["content"]
    (call,) = client_calls("chat", answer.content, stream)
    assert (call.id, call.name, json.loads(call.arguments)) == ("b1", FOUND["name"], ARGUMENTS)
    # The client runs the found tool; its next request is forwarded as the upstream saw it.
    upstream.script(Chat(content="Stored."))
    post(proxy, answered("chat", searched, [call], "ok"), test)
    third = CHAT.sent(upstream, since)[-1].json()
    assert CHAT.offered(third) == CHAT.offered(first)
    assert third["messages"][: len(second["messages"])] == second["messages"]
    written = third["messages"][len(second["messages"])]["tool_calls"][0]["function"]
    assert written["name"] == "call_tool"
    assert json.loads(written["arguments"]) == {"name": FOUND["name"], "arguments": ARGUMENTS}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_bridge_call_of_a_tool_the_menu_defers_is_the_clients_call_by_that_name(
    servers: tuple[Upstream, str], request: pytest.FixtureRequest, stream: bool
) -> None:
    """The model calls a tool of the deferred-tool menu through the bridge before the
    client's search revealed it (the proxy has no definition of it): the client gets the
    call by that name, as it runs a registered tool whether or not it was revealed, and
    its next request writes the call back as the bridge call the model made."""
    upstream, proxy = servers
    upstream.drain(CHAT.suffix)
    since = len(upstream.requests)
    test = request.node.name
    menu_tool = DEFERRED[5]["name"]
    bridged = {"id": "b2", "name": "call_tool",
               "arguments": json.dumps({"name": menu_tool, "arguments": ARGUMENTS})}
    upstream.script(Chat(tool_calls=[bridged]))
    body = _chat(stream, found=False)
    answer = post(proxy, body, test)
    (call,) = client_calls("chat", answer.content, stream)
    assert (call.id, call.name, json.loads(call.arguments)) == ("b2", menu_tool, ARGUMENTS)
    assert len(CHAT.sent(upstream, since)) == 1  # no refusal round
    upstream.script(Chat(content="Done."))
    post(proxy, answered("chat", body, [call], "ok"), test)
    first, second = (r.json() for r in CHAT.sent(upstream, since))
    written = second["messages"][len(first["messages"])]["tool_calls"][0]["function"]
    assert written["name"] == "call_tool"
    assert json.loads(written["arguments"]) == {"name": menu_tool, "arguments": ARGUMENTS}
