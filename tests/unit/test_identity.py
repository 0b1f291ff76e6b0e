"""Conversation keys: a client's X-Conversation-Id never names one of the proxy's own keys."""

from __future__ import annotations

from proxy.turn.identity import conversation_id
from selection.catalog.catalog import parse_tools
from selection.choosing.prefix import prefix_key

TOOLS = [{"type": "function", "function": {"name": "get_me", "description": "Who am I."}}]
BODY = {"model": "m", "messages": [{"role": "system", "content": "S"},
                                   {"role": "user", "content": "hi"}]}


def test_a_header_naming_the_agents_key_does_not_reach_the_agents_block() -> None:
    catalog = parse_tools(TOOLS)
    agent = prefix_key("m", "S", catalog.fingerprint)
    assert agent.startswith("agent:")
    assert conversation_id(agent.encode(), BODY, catalog.fingerprint) != agent
    derived = conversation_id(None, BODY, catalog.fingerprint)
    assert conversation_id(derived.encode(), BODY, catalog.fingerprint) != derived


def test_the_same_header_is_the_same_conversation() -> None:
    catalog = parse_tools(TOOLS)
    assert conversation_id(b"c-1", BODY, catalog.fingerprint) == conversation_id(b"c-1", {}, catalog.fingerprint)
    assert conversation_id(b"c-1", BODY, catalog.fingerprint) != conversation_id(b"c-2", BODY, catalog.fingerprint)
