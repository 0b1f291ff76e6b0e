"""Tools delivered in the conversation, checked token for token on a real llama-server: a
conversation through the proxy (the scripted model loads a tool, calls it through the
``call_tool`` bridge, then answers the client's next request), each upstream request
rendered by llama-server's own chat template (``POST /apply-template``, the request's
``messages`` and ``tools``) and tokenized (``POST /tokenize``). With the block fixed and
the hidden exchange spliced back, every prompt begins with the one before it, token for
token, so llama-server's prompt cache serves all of it; with the block growing
(``TOOLPRUNE_LATE_TOOLS=block``), the second round's prompt does not begin with the first's.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use). The scripted upstream answers the rounds: SmolLM2 does not call tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.llama import llama_server
from tests.integration.test_conversation_delivery import COOKIE, bridge
from tests.support.conversations import answered, client_calls
from tests.support.turn_apis import APIS, LOADED, Servers, load, turn_servers

pytestmark = pytest.mark.real_upstream

CHAT = APIS["chat"]


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"conversation": {"late_tools": "conversation"},
                       "block": {"late_tools": "block"}}) as running:
        yield running


def tokens(llama: str, body: dict[str, Any]) -> list[int]:
    """The prompt tokens llama-server evaluates for a chat request ``body``: its template
    applied to the messages and tools, then tokenized as the server tokenizes a prompt."""
    template = httpx.post(llama + "/apply-template", timeout=120,
                          json={"messages": body["messages"], "tools": body.get("tools", [])})
    template.raise_for_status()
    tokenized = httpx.post(llama + "/tokenize", timeout=120, json={
        "content": template.json()["prompt"], "add_special": True, "parse_special": True})
    tokenized.raise_for_status()
    return tokenized.json()["tokens"]


def conversation(servers: Servers, proxy: str, test: str) -> list[dict[str, Any]]:
    """The upstream requests of a two-request conversation: the model loads ``LOADED`` and
    calls it through the bridge; the client runs it and sends its result."""
    upstream, proxies = servers
    headers = {"Authorization": f"Bearer {test}-{proxy}"}
    upstream.drain(CHAT.suffix)
    since = len(upstream.requests)
    upstream.script(CHAT.reply(calls=(load(LOADED),)), CHAT.reply(calls=(bridge(LOADED, COOKIE),)),
                    CHAT.reply("The cookie is set."), path=CHAT.suffix)
    body = CHAT.body(stream=False)
    first = httpx.post(proxies[proxy] + CHAT.path, json=body, headers=headers, timeout=300)
    calls = client_calls("chat", first.content, stream=False)
    follow = answered("chat", body, calls, json.dumps({"ok": True}))
    httpx.post(proxies[proxy] + CHAT.path, json=follow, headers=headers, timeout=300).raise_for_status()
    return [record.json() for record in CHAT.sent(upstream, since)]


def test_each_prompt_begins_with_the_one_before_it(servers: Servers, llama: str) -> None:
    bodies = conversation(servers, "conversation", "real-prefix")
    assert len(bodies) == 3
    prompts = [tokens(llama, body) for body in bodies]
    for before, after in zip(prompts, prompts[1:], strict=False):
        assert len(after) > len(before) and after[: len(before)] == before


def test_a_growing_block_breaks_the_prompt_where_the_tool_is_inserted(
    servers: Servers, llama: str
) -> None:
    first, second, _ = (tokens(llama, body) for body in conversation(servers, "block", "real-grow"))
    # The tool joins the tools, which the template renders before the messages: the
    # history after it no longer matches the cached prompt.
    assert second[: len(first)] != first
