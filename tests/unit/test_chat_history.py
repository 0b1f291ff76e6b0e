"""A Chat Completions history written as the upstream saw it (proxy/apis/chat/history.py):
calls of tools outside the block written back as bridge calls, hidden exchanges spliced
back where they stood, the text a hidden round showed taken from the next answer."""

from __future__ import annotations

import json
from typing import Any

from proxy.apis.chat.history import bridged_message, spliced

USER = {"role": "user", "content": "Set the cookie"}


def assistant(content: str | None, *calls: tuple[str, str, str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in calls]
    return message


def test_a_call_of_a_tool_outside_the_block_is_written_as_the_bridge_call() -> None:
    """The bridge call names the tool by the name its delivery showed."""
    message = assistant(None, ("c1", "web__set_cookie", '{"name": "s"}'), ("c2", "in_block", "{}"))
    written = bridged_message(message, {"web__set_cookie": "set_cookie"}.get, "call_tool")
    first, second = written["tool_calls"]
    assert first["id"] == "c1" and first["function"]["name"] == "call_tool"
    assert json.loads(first["function"]["arguments"]) == {"name": "set_cookie", "arguments": {"name": "s"}}
    assert second == message["tool_calls"][1]
    assert bridged_message(USER, lambda name: name, "call_tool") is USER


def test_exchanges_stand_where_they_stood_and_their_shown_text_leaves_the_next_answer() -> None:
    hidden = [assistant("Let me look. ", ("meta_1", "load_tools", "{}")),
              {"role": "tool", "tool_call_id": "meta_1", "content": "{}"}]
    messages = [USER, assistant("Let me look. It is set."), {"role": "user", "content": "Thanks"}]
    exchanges = [{"at": 1, "turn": 1, "items": hidden},
                 {"at": 3, "turn": 2, "items": [{"role": "tool"}]}]  # this request's own: left out
    result = spliced(messages, exchanges)
    assert result == [USER, *hidden, assistant("It is set."), messages[2]]


def test_with_no_exchange_the_messages_are_the_clients() -> None:
    messages = [USER, assistant("Done.")]
    assert spliced(messages, []) is messages
