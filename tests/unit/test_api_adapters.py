"""The Responses and Messages adapters on their own: reading requests into the planner's
input, writing tool arrays, and the stream views fed with llama-server-shaped events
(no ``sequence_number``, no ``output_index``: items named by ``item_id``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.messages.adapter import (
    MessagesRequest,
    read_choice,
)
from proxy.apis.messages.adapter import (
    conversation_view as messages_view,
)
from proxy.apis.messages.stream import MessagesStream
from proxy.apis.messages.tools import is_custom, keep_cache_markers
from proxy.apis.responses.adapter import ResponsesApi, ResponsesRequest, conversation_view
from proxy.apis.responses.chains import ResponseChains
from proxy.apis.responses.stream import ResponsesStream
from proxy.apis.responses.tools import ToolLayout
from proxy.http.sse import EventSplitter
from proxy.turn.adapter import ClientOut, Reply
from proxy.turn.events import EventStreamView
from proxy.turn.turn import Turn
from selection.catalog.catalog import build_catalog, parse_flat_tools
from selection.choosing.block_order import Selection
from selection.choosing.state import ConversationState
from selection.clients.meta_tools import MetaTools
from selection.conversation.history import ToolChoice, called_tools
from selection.conversation.query import build_query
from selection.errors import NothingToPrune
from selection.plan import TurnInput
from tests.support.turns import planned_turn


def turn_with_meta(body: dict[str, Any]) -> Turn:
    """A planned turn that offered ``load_tools`` (what the relays read of it)."""
    selection = Selection((), (), (), (), ConversationState())
    meta = MetaTools("load_tools", None, ())
    return planned_turn(body, build_catalog([]), selection, meta=meta, choice=ToolChoice())


class Client:
    """The client's side of a stream view: every body byte it was sent."""

    def __init__(self) -> None:
        self.body = b""
        self.read = 0

    async def send(self, message: dict[str, Any]) -> None:
        self.body += message.get("body", b"")

    def new(self) -> list[dict[str, Any]]:
        """The JSON payloads of the events sent since the last call."""
        events = EventSplitter().feed(self.body[self.read:])
        self.read = len(self.body)
        return [json.loads(e.data) for e in events if e.data and e.data != "[DONE]"]


class StreamAnswer:
    """A round's answer as a view reads its head: 200, an event stream."""

    status_code = 200
    headers = [(b"content-type", b"text/event-stream")]

    def header(self, name: bytes) -> bytes | None:
        return dict(self.headers).get(name)


async def play(view: EventStreamView, events: list[dict[str, Any]]) -> Reply:
    """One upstream round of ``events`` through ``view``."""
    await view.start_round(StreamAnswer())  # type: ignore[arg-type]
    for data in events:
        await view.event(data["type"], data)
    return await view.end_round()


def out(client: Client) -> ClientOut:
    return ClientOut(client.send, [], lambda: None)


def responses_request(turn: Turn) -> ResponsesRequest:
    return ResponsesRequest(TurnInput(turn.body, None, [], ToolChoice()), ToolLayout(), ResponseChains())


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


async def test_responses_read_skips_hosted_tools_and_needs_function_tools() -> None:
    adapter = ResponsesApi()
    tools = [{"type": "web_search"}, {"type": "function", "name": "a", "parameters": {}}]
    read = (await adapter.read({"input": "x", "tools": tools, "conversation": {"id": "conv_9"}})).input
    assert read.native is not None and read.native.names == ["a"]
    assert read.native.others == ({"type": "web_search"},)
    assert read.conversation == "conv:conv_9"
    with pytest.raises(NothingToPrune):
        await adapter.read({"input": "x", "tools": [{"type": "web_search"}]})


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


async def test_responses_relay_hides_meta_items_named_by_item_id() -> None:
    turn = turn_with_meta({"input": "x", "tools": []})
    client = Client()
    relay = ResponsesStream(turn, out(client), responses_request(turn))
    reply = await play(relay, LLAMA_RESPONSES_ROUND)
    shown = client.new()
    assert [e["type"] for e in shown] == [
        "response.created", "response.output_item.added", "response.output_text.delta",
        "response.output_item.done",
    ]
    assert all("sequence_number" not in e and "output_index" not in e for e in shown)
    assert [(c.id, c.name, c.arguments) for c in reply.meta] == [("call_1", "load_tools", '{"names": ["x"]}')]
    assert reply.real_calls == []
    second = [{**e, "response": {**e["response"], "id": "resp_2"}} if "response" in e else e
              for e in LLAMA_RESPONSES_ROUND if e["type"] != "response.output_item.added" or e["item"]["type"] == "message"]
    last = await play(relay, second)
    assert "response.created" not in [e["type"] for e in client.new()]
    await relay.finish(last, only_meta=True)
    (completed,) = client.new()
    assert completed["response"]["id"] == "resp_1"
    assert [item["id"] for item in completed["response"]["output"]] == ["msg_1", "msg_1"]
    assert completed["response"]["usage"] == {"input_tokens": 200, "output_tokens": 14, "total_tokens": 214}


async def test_responses_relay_renumbers_output_index_and_sequence_number() -> None:
    turn = turn_with_meta({"input": "x"})
    client = Client()
    relay = ResponsesStream(turn, out(client), responses_request(turn))
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {"id": "fc_m", "type": "function_call", "name": "load_tools", "call_id": "m"}},
        {"type": "response.function_call_arguments.delta", "sequence_number": 2, "output_index": 0, "item_id": "fc_m", "delta": "{}"},
        {"type": "response.output_item.added", "sequence_number": 3, "output_index": 1,
         "item": {"id": "fc_r", "type": "function_call", "name": "real", "call_id": "r1"}},
        {"type": "response.function_call_arguments.delta", "sequence_number": 4, "output_index": 1, "item_id": "fc_r", "delta": "{}"},
    ]
    await play(relay, events)
    assert [(e["sequence_number"], e.get("output_index")) for e in client.new()] == [(0, None), (1, 0), (2, 0)]
    assert relay.first_token


async def test_messages_relay_renumbers_blocks_around_a_hidden_meta_call() -> None:
    turn = turn_with_meta({"messages": []})
    client = Client()
    relay = MessagesStream(turn, out(client), MessagesRequest(TurnInput({}, None, [], ToolChoice())))
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
    reply = await play(relay, events)
    assert [(e["type"], e.get("index")) for e in client.new()] == [
        ("message_start", None), ("content_block_start", 0), ("content_block_delta", 0),
        ("content_block_stop", 0), ("content_block_start", 1), ("content_block_stop", 1),
    ]
    assert [(c.id, json.loads(c.arguments)) for c in reply.meta] == [("t_m", {"names": ["x"]})]
    assert reply.real_calls == ["real"]
    assert reply.items[1]["input"] == {"names": ["x"]}
    await relay.finish(reply, only_meta=False)
    delta, stop = client.new()
    assert delta["delta"]["stop_reason"] == "tool_use" and stop == {"type": "message_stop"}
    assert delta["usage"] == {"input_tokens": 50, "output_tokens": 9}


def bridge_turn() -> Turn:
    """A planned turn that offered ``load_tools`` and the ``call_tool`` bridge, over one
    tool (``write_file``, ``path`` required) the block does not hold."""
    tools = [{"name": "write_file", "description": "Write a file.", "input_schema": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
    catalog = parse_flat_tools(tools, is_custom, "input_schema")
    selection = Selection((), (), (), (), ConversationState())
    meta = MetaTools("load_tools", None, (), bridge="call_tool")
    return planned_turn({"messages": []}, catalog, selection, meta=meta, choice=ToolChoice())


def bridge_block(index: int, call_id: str, arguments: str) -> list[dict[str, Any]]:
    """A bridge call's start and argument delta (no stop)."""
    start = {"type": "tool_use", "id": call_id, "name": "call_tool", "input": {}}
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": arguments}},
    ]


def text_block(index: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": index},
    ]


async def test_messages_relay_holds_blocks_behind_a_bridge_call_and_shows_the_call_it_stands_for() -> None:
    turn = bridge_turn()
    client = Client()
    relay = MessagesStream(turn, out(client), MessagesRequest(TurnInput({}, None, [], ToolChoice())))
    await relay.start_round(StreamAnswer())  # type: ignore[arg-type]
    for data in [*bridge_block(0, "b1", '{"name": "write_file", "arguments": {"path": "a"}}'),
                 *text_block(1, "Written.")]:  # a block started before the bridge call ended
        await relay.event(data["type"], data)
    assert client.new() == []  # held behind the bridge call
    await relay.event("content_block_stop", {"type": "content_block_stop", "index": 0})
    shown = client.new()
    assert [(e["type"], e["index"]) for e in shown] == [
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1), ("content_block_stop", 1),
    ]
    assert shown[0]["content_block"] == {"type": "tool_use", "id": "b1", "name": "write_file", "input": {}}
    assert json.loads(shown[1]["delta"]["partial_json"]) == {"path": "a"}
    for data in [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
                 {"type": "message_stop"}]:
        await relay.event(data["type"], data)
    reply = await relay.end_round()
    assert reply.meta == [] and reply.real_calls == ["write_file"]


@pytest.mark.parametrize("arguments", [
    '{"name": "write_file", "arguments": {}}',  # off its schema
    '{"name": "write_fil", "arguments": {"path": "a"}}',  # unknown
    '{"name": "write_file", "argu',  # cut off
])
async def test_messages_relay_hides_a_bridge_call_that_cannot_be_made(arguments: str) -> None:
    turn = bridge_turn()
    client = Client()
    relay = MessagesStream(turn, out(client), MessagesRequest(TurnInput({}, None, [], ToolChoice())))
    events = [
        *bridge_block(0, "b1", arguments),
        *text_block(1, "Hm."),  # the bridge call's stop never came: read at the round's end
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    reply = await play(relay, events)
    assert [(e["type"], e.get("index")) for e in client.new()] == [
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0),
    ]
    assert [(call.id, call.name) for call in reply.meta] == [("b1", "call_tool")]
    assert reply.real_calls == []
