"""llama-server's own request fields the proxy adds (``n_cache_reuse``, ``id_slot``) on
each API's route, through the proxy in front of the scripted upstream (which answers
llama-server's ``/props`` with ``n_ctx`` and ``total_slots``). llama-server reads them on
chat completions and Responses; its Messages route drops them (its Anthropic conversion
keeps only the sampling fields), so none are sent there."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_api_adapters import (
    ASK,
    MESSAGES_TOOLS,
    RESPONSES_TOOLS,
    load,
    sent,
    tool_names,
)
from tests.integration.test_prefix_cache import (
    GITHUB,
    SYSTEM,
    DecisionLog,
    chat_bodies,
    forwarded,
)
from tests.support.api_replies import Responses


@pytest.fixture
def llama(upstream: RunningUpstream) -> RunningUpstream:
    """The upstream as llama-server with two slots (``-np 2``)."""
    upstream.upstream.n_ctx = 32768
    upstream.upstream.total_slots = 2
    return upstream


@pytest.fixture
def decisions() -> Iterator[DecisionLog]:
    log = DecisionLog()
    logging.getLogger("toolprune").addHandler(log)
    try:
        yield log
    finally:
        logging.getLogger("toolprune").removeHandler(log)


def test_responses_requests_carry_n_cache_reuse_and_the_slot_every_round(
    llama: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, readiness_timeout_s=30, slots=True)
    llama.upstream.script(
        Responses(text=None, calls=[load()]), Responses(text="done"), Responses(text="again"),
        path="/responses",
    )
    body = {"model": "m", "input": ASK, "tools": RESPONSES_TOOLS}
    headers = {"X-Conversation-Id": "r1"}
    httpx.post(proxy + "/v1/responses", json=body, headers=headers, timeout=120).raise_for_status()
    first, reissued = sent(llama, "/responses")
    assert "load_tools" in tool_names(first["tools"])  # a meta round, re-issued
    assert [(b["n_cache_reuse"], b["id_slot"]) for b in (first, reissued)] == [(64, 0), (64, 0)]
    # The client's own values are kept.
    mine = {**body, "n_cache_reuse": 16, "id_slot": 1}
    httpx.post(proxy + "/v1/responses", json=mine, headers=headers, timeout=120).raise_for_status()
    assert (sent(llama, "/responses")[-1]["n_cache_reuse"], sent(llama, "/responses")[-1]["id_slot"]) == (16, 1)


def test_messages_requests_carry_no_llama_server_fields(
    llama: RunningUpstream, start_proxy: ProxyFactory, decisions: DecisionLog
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, readiness_timeout_s=30, slots=True)
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": ASK}],
            "tools": MESSAGES_TOOLS}
    response = httpx.post(proxy + "/v1/messages", json=body, timeout=120)
    assert response.status_code == 200 and response.headers["x-tool-pruning-tools"].endswith("/69")
    (message,) = sent(llama, "/messages")
    assert "n_cache_reuse" not in message and "id_slot" not in message
    assert decisions.wait(1)[0]["slot"] is None


def ask(proxy: str, messages: list[dict[str, Any]], **fields: Any) -> None:
    body = {"model": "m", "messages": messages, "tools": GITHUB, **fields}
    httpx.post(proxy + "/v1/chat/completions", json=body, timeout=120).raise_for_status()


def test_each_conversation_keeps_its_own_slot_and_block(
    llama: RunningUpstream, start_proxy: ProxyFactory, decisions: DecisionLog
) -> None:
    proxy = start_proxy(top_k=4, threshold=0.0, readiness_timeout_s=30, index_timeout_s=300, slots=True)
    a1 = [SYSTEM, {"role": "user", "content": "Create a branch fix-login from main."}]
    b1 = [SYSTEM, {"role": "user", "content": "Open an issue about the login loop."}]
    ask(proxy, a1)
    a_block = forwarded(llama)
    ask(proxy, b1)
    # A's next turn after B's: A's slot still holds A's prompt, so A keeps its own block
    # (sharing one slot, it would take B's: "shared") and its history stays cached.
    a2 = [*a1, {"role": "assistant", "content": "Which repository?"},
          {"role": "user", "content": "Create the branch fix-login in octocat/hello-world."}]
    ask(proxy, a2)
    assert forwarded(llama) == a_block
    # A third conversation takes the least recently assigned slot (A's) and its block.
    ask(proxy, [SYSTEM, {"role": "user", "content": "List the workflow runs of main."}])
    # A client's own id_slot is kept, and the conversation's cache is the one of that slot.
    ask(proxy, [SYSTEM, {"role": "user", "content": "Star octocat/hello-world."}], id_slot=1)
    ask(proxy, [SYSTEM, {"role": "user", "content": "Fork octocat/hello-world."}], id_slot=-1)
    fields = decisions.wait(6)
    assert [body.get("id_slot") for body in chat_bodies(llama)] == [0, 1, 0, 0, 1, -1]
    assert [f["slot"] for f in fields] == [0, 1, 0, 0, 1, None]
    assert [f["block"] for f in fields] == [None, None, None, "adopted", "adopted", None]
    # B starts in an empty slot: nothing of the agent is cached there.
    assert fields[1]["expected_cached_tokens"] == 0
    assert fields[2]["cache_break"] is False
    assert 0 < fields[2]["expected_evaluated_tokens"] < fields[0]["expected_evaluated_tokens"]
    assert fields[3]["expected_cached_tokens"] > 0 and fields[4]["expected_cached_tokens"] > 0


def test_without_the_setting_no_slot_is_named(
    llama: RunningUpstream, start_proxy: ProxyFactory, decisions: DecisionLog
) -> None:
    proxy = start_proxy(top_k=4, threshold=0.0, readiness_timeout_s=30, index_timeout_s=300)
    ask(proxy, [SYSTEM, {"role": "user", "content": "Create a branch fix-login from main."}])
    ask(proxy, [SYSTEM, {"role": "user", "content": "Open an issue about the login loop."}])
    assert all("id_slot" not in body for body in chat_bodies(llama))
    assert [f["block"] for f in decisions.wait(2)] == [None, "adopted"]
    assert json.loads(json.dumps(decisions.fields[1]["slot"])) is None
