"""The Responses and Messages adapters on their own: reading requests into the planner's
input, writing tool arrays, and the stream relays fed with llama-server-shaped events
(no ``sequence_number``, no ``output_index``: items named by ``item_id``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.messages import MessagesAdapter, conversation_view as messages_view, read_choice
from proxy.apis.responses import ResponseChains, ResponsesAdapter, conversation_view
from proxy.apis.tools import keep_cache_markers
from proxy.chat.planner import NothingToPrune
from proxy.chat.turn import Turn
from proxy.http.sse import EventSplitter, decode
from selection.catalog import build_catalog
from selection.history import ToolChoice, called_tools
from selection.meta_tools import MetaTools
from selection.query import build_query
from selection.selector import Selection
from selection.state import ConversationState


def turn_with_meta(body: dict[str, Any]) -> Turn:
    """A planned turn that offered ``load_tools`` (what the relays read of it)."""
    selection = Selection((), (), (), (), ConversationState())
    meta = MetaTools("load_tools", None, ())
    return Turn(body, build_catalog([]), build_catalog([]), None, "c", selection, None, [],
                meta, ToolChoice(), 0)


def event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def relayed(payloads: list[bytes]) -> list[dict[str, Any]]:
    """The JSON payloads of the events in ``payloads``."""
    events = EventSplitter().feed(b"".join(payloads))
    return [json.loads(e.data) for e in events if e.data and e.data != "[DONE]"]


# --- reading requests ------------------------------------------------------------
def test_responses_view_reads_instructions_items_and_calls() -> None:
    body = {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "List my PRs"}]},
            {"type": "function_call", "call_id": "c1", "name": "list_prs", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "[]"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
        ],
    }
    view = conversation_view(body)
    assert view[0] == {"role": "system", "content": "Be brief."}
    assert called_tools(view) == ["list_prs"]
    assert build_query(view) == "List my PRs\n[]"
    assert conversation_view({"input": "hi"}) == [{"role": "user", "content": "hi"}]


def test_responses_read_skips_hosted_tools_and_needs_function_tools() -> None:
    adapter = ResponsesAdapter()
    tools = [{"type": "web_search"}, {"type": "function", "name": "a", "parameters": {}}]
    read = adapter.read({"input": "x", "tools": tools, "conversation": {"id": "conv_9"}})
    assert read.native is not None and read.native.names == ["a"]
    assert read.native.others == ({"type": "web_search"},)
    assert read.conversation == "conv:conv_9"
    with pytest.raises(NothingToPrune):
        adapter.read({"input": "x", "tools": [{"type": "web_search"}]})


def test_response_chains_map_a_streamed_id_to_its_last_round() -> None:
    chains = ResponseChains(size=2)
    chains.remember("resp_first", "conv-a", "resp_last")
    assert chains.conversation_of("resp_first") == "conv-a"
    assert chains.upstream_id("resp_first") == "resp_last"
    chains.remember("r2", "b")
    chains.remember("r3", "c")  # evicts the oldest
    assert chains.conversation_of("resp_first") == "resp:resp_first"
    assert chains.upstream_id("resp_first") == "resp_first"


def test_messages_view_pins_tool_use_and_reads_tool_results() -> None:
    body = {
        "system": [{"type": "text", "text": "You are helpful."}],
        "messages": [
            {"role": "user", "content": "Find issue 5"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "get_issue", "input": {"n": 5}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "Issue 5: crash"},
            ]},
        ],
    }
    view = messages_view(body)
    assert called_tools(view) == ["get_issue"]
    assert view[-1] == {"role": "tool", "tool_call_id": "t1", "content": "Issue 5: crash"}
    assert build_query(view) == "Find issue 5\nIssue 5: crash"


@pytest.mark.parametrize(
    ("choice", "offer_meta", "pinned"),
    [(None, True, None), ({"type": "auto"}, True, None), ({"type": "any"}, True, None),
     ({"type": "none"}, False, None), ({"type": "tool", "name": "x"}, False, "x")],
)
def test_messages_tool_choice(choice: Any, offer_meta: bool, pinned: str | None) -> None:
    read = read_choice({"tool_choice": choice} if choice else {})
    assert (read.offer_meta, read.pinned) == (offer_meta, pinned)


def test_cache_markers_stay_or_move_to_the_last_forwarded_tool() -> None:
    a, b = {"name": "a"}, {"name": "b", "cache_control": {"type": "ephemeral"}}
    c, meta = {"name": "c"}, {"name": "load_tools"}
    assert keep_cache_markers([a, b, c], [a, b, meta]) == [a, b, meta]
    moved = keep_cache_markers([a, b, c], [a, c, meta])
    assert moved[-1] == {"name": "load_tools", "cache_control": {"type": "ephemeral"}}
    assert moved[:2] == [a, c] and "cache_control" not in meta


# --- stream relays -----------------------------------------------------------------
LLAMA_RESPONSES_ROUND = [
    {"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress"}},
    {"type": "response.output_item.added", "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Loading."},
    {"type": "response.output_item.added", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "load_tools", "arguments": ""}},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"names": ["x"]}'},
    {"type": "response.output_item.done", "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Loading."}]}},
    {"type": "response.output_item.done", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "load_tools", "arguments": '{"names": ["x"]}'}},
    {"type": "response.completed", "response": {"id": "resp_1", "object": "response", "status": "completed",
     "output": [{"id": "msg_1", "type": "message"}, {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "load_tools", "arguments": '{"names": ["x"]}'}],
     "usage": {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107}}},
]


def test_responses_relay_hides_meta_items_named_by_item_id() -> None:
    turn = turn_with_meta({"input": "x", "tools": []})
    relay = ResponsesAdapter().relay(turn)
    relay.start_round()
    out = relayed([p for e in LLAMA_RESPONSES_ROUND for p in relay.feed(decode(event(e)))])
    assert [e["type"] for e in out] == [
        "response.created", "response.output_item.added", "response.output_text.delta",
        "response.output_item.done",
    ]
    assert all("sequence_number" not in e and "output_index" not in e for e in out)
    reply = relay.end_round()
    assert [(c.id, c.name, c.arguments) for c in reply.meta] == [("call_1", "load_tools", '{"names": ["x"]}')]
    assert reply.real_calls == []
    second = [{**e, "response": {**e["response"], "id": "resp_2"}} if "response" in e else e
              for e in LLAMA_RESPONSES_ROUND if e["type"] != "response.output_item.added" or e["item"]["type"] == "message"]
    relay.start_round()
    again = relayed([p for e in second for p in relay.feed(decode(event(e)))])
    assert "response.created" not in [e["type"] for e in again]
    relay.end_round()
    (completed,) = relayed([relay.finish_bytes(only_meta=True)])
    assert completed["response"]["id"] == "resp_1"
    assert [item["id"] for item in completed["response"]["output"]] == ["msg_1", "msg_1"]
    assert completed["response"]["usage"] == {"input_tokens": 200, "output_tokens": 14, "total_tokens": 214}


def test_responses_relay_renumbers_output_index_and_sequence_number() -> None:
    turn = turn_with_meta({"input": "x"})
    relay = ResponsesAdapter().relay(turn)
    relay.start_round()
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {"id": "fc_m", "type": "function_call", "name": "load_tools", "call_id": "m"}},
        {"type": "response.function_call_arguments.delta", "sequence_number": 2, "output_index": 0, "item_id": "fc_m", "delta": "{}"},
        {"type": "response.output_item.added", "sequence_number": 3, "output_index": 1,
         "item": {"id": "fc_r", "type": "function_call", "name": "real", "call_id": "r1"}},
        {"type": "response.function_call_arguments.delta", "sequence_number": 4, "output_index": 1, "item_id": "fc_r", "delta": "{}"},
    ]
    out = relayed([p for e in events for p in relay.feed(decode(event(e)))])
    assert [(e["sequence_number"], e.get("output_index")) for e in out] == [(0, None), (1, 0), (2, 0)]
    assert relay.first_token


def test_messages_relay_renumbers_blocks_around_a_hidden_meta_call() -> None:
    turn = turn_with_meta({"messages": []})
    relay = MessagesAdapter().relay(turn)
    relay.start_round()
    events = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 50, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t_m", "name": "load_tools", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"names": ["x"]}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t_r", "name": "real", "input": {}}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    out = relayed([p for e in events for p in relay.feed(decode(event(e)))])
    assert [(e["type"], e.get("index")) for e in out] == [
        ("message_start", None), ("content_block_start", 0), ("content_block_delta", 0),
        ("content_block_stop", 0), ("content_block_start", 1), ("content_block_stop", 1),
    ]
    reply = relay.end_round()
    assert [(c.id, json.loads(c.arguments)) for c in reply.meta] == [("t_m", {"names": ["x"]})]
    assert reply.real_calls == ["real"]
    assert reply.items[1]["input"] == {"names": ["x"]}
    delta, stop = relayed([relay.finish_bytes(only_meta=False)])
    assert delta["delta"]["stop_reason"] == "tool_use" and stop == {"type": "message_stop"}
    assert delta["usage"] == {"input_tokens": 50, "output_tokens": 9}
