"""Conversation keys: a client's X-Conversation-Id never names one of the proxy's own keys."""

from __future__ import annotations

from proxy.turn.identity import conversation_id, request_conversation
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


def test_a_conversation_a_response_id_names_keeps_its_credentials_key() -> None:
    """A Responses ``previous_response_id`` names the state key its conversation had (as
    the credential scoped it): the continuation is the same conversation, and another
    credential's client gets a key of its own."""
    mine = [(b"authorization", b"Bearer k-1")]
    given = request_conversation(mine, BODY, BODY["messages"], "resp:r1", "f", shared=False)
    assert request_conversation(mine, {}, [], given, "f", shared=False) == given
    theirs = request_conversation([(b"authorization", b"Bearer k-2")], {}, [], given, "f",
                                  shared=False)
    assert theirs not in (given, "resp:r1") and theirs.endswith(given)
