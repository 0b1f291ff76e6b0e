"""A Responses ``input`` written as the upstream saw it (proxy/apis/responses/delivery.py):
the client's calls of tools outside the block written back as bridge calls, and the hidden
exchanges spliced where they stood, the client's copies of what it was shown of them taken
out, so the forwarded ``input`` extends the previous round's item for item."""

from __future__ import annotations

import json
from typing import Any

from proxy.apis.responses.delivery import bridged_call, spliced

USER = {"type": "message", "role": "user", "content": "Set a cookie"}
TEXT = {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Loading a tool.", "annotations": []}]}
LOAD = {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "meta_1",
        "name": "load_tools", "arguments": '{"names": ["cookie_set"]}'}
LOADED = {"type": "function_call_output", "call_id": "meta_1", "output": '{"loaded": ["cookie_set"]}'}
CALL = {"type": "function_call", "call_id": "b_1", "name": "call_tool",
        "arguments": '{"name": "cookie_set", "arguments": {}}'}
ANSWER = {"type": "function_call_output", "call_id": "b_1", "output": "set"}


def exchange(at: int, *items: Any, turn: int = 1) -> dict[str, Any]:
    return {"at": at, "turn": turn, "items": list(items)}


def test_what_the_client_was_shown_is_taken_out_and_the_exchange_stands_whole() -> None:
    echoed = {**TEXT, "content": [{"type": "output_text", "text": "Loading a tool."}]}  # SDK-dumped
    items = [USER, echoed, CALL, ANSWER]
    assert spliced(items, [exchange(1, TEXT, LOAD, LOADED)], None) == [
        USER, TEXT, LOAD, LOADED, CALL, ANSWER]


def test_an_echo_without_an_id_is_known_by_its_role_and_text() -> None:
    echoed = {"role": "assistant", "content": "Loading a tool."}
    assert spliced([USER, echoed, CALL], [exchange(1, TEXT, LOAD, LOADED)], None) == [
        USER, TEXT, LOAD, LOADED, CALL]


def test_a_client_that_dropped_what_it_was_shown_gets_the_exchange_all_the_same() -> None:
    assert spliced([USER, CALL, ANSWER], [exchange(1, TEXT, LOAD, LOADED)], None) == [
        USER, TEXT, LOAD, LOADED, CALL, ANSWER]


def test_a_hosted_search_the_client_sends_back_stands_once_as_the_upstream_saw_it() -> None:
    search = {"id": "fc_9", "type": "function_call", "status": "completed", "call_id": "ts_1",
              "name": "tool_search", "arguments": '{"query": "cookies"}'}
    found = {"type": "function_call_output", "call_id": "ts_1", "output": '{"found": []}'}
    translated = [{k: search[k] for k in ("type", "call_id", "name", "arguments")}, found]
    items = [USER, *translated, CALL, ANSWER]
    assert spliced(items, [exchange(1, search, found)], "tool_search") == [
        USER, search, found, CALL, ANSWER]
    # Without the hosted search's name, a meta-call is never one the client echoes.
    assert spliced(items, [exchange(1, search, found)], None) == [
        USER, search, found, *translated, CALL, ANSWER]


def test_exchanges_at_one_place_stand_in_recording_order_and_past_the_end_are_left_out() -> None:
    second = {**LOAD, "id": "fc_2", "call_id": "meta_2"}
    answered = {**LOADED, "call_id": "meta_2"}
    exchanges = [exchange(1, LOAD, LOADED), exchange(1, second, answered), exchange(3, LOAD, turn=2)]
    assert spliced([USER, CALL, ANSWER], exchanges, None) == [
        USER, LOAD, LOADED, second, answered, CALL, ANSWER]


def test_only_calls_of_tools_outside_the_block_are_written_as_bridge_calls() -> None:
    real = {"id": "fc_5", "type": "function_call", "call_id": "b_1", "name": "cookie_set",
            "arguments": '{"name": "s", "value": "v"}', "status": "completed"}
    written = bridged_call(real, {"cookie_set": "cookie_set"}.get, "call_tool")
    assert {**written, "arguments": None} == {**real, "name": "call_tool", "arguments": None}
    assert json.loads(written["arguments"]) == {"name": "cookie_set", "arguments": {"name": "s", "value": "v"}}
    assert json.loads(bridged_call(real, {"cookie_set": "set"}.get, "call_tool")["arguments"])[
        "name"] == "set"  # the name its delivery showed
    assert bridged_call(real, {}.get, "call_tool") is real
    assert bridged_call(ANSWER, {"cookie_set": "cookie_set"}.get, "call_tool") is ANSWER
