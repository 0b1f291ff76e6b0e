"""Nothing invented reaches the client (issue #28, items 1 and 2): an upstream event stream
the proxy cannot interpret ends the client's stream with the API's own error event; a
hidden meta-call's bytes never reach the client; the proxy never fabricates a call, a
name or arguments. The same checks for Chat Completions, Responses and Messages.

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream,
which plays hand-written event streams.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.fault_matrix import proves
from tests.support.sse import parse_sse

CHAT_SHAPED: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = "Open https://example.com in the browser and take a screenshot"
#: The tail of the hidden call's arguments, which must never reach the client.
TAIL = 'rowser_drag"]}'
HEAD = '{"names": ["b'
APIS = ("chat", "responses", "messages")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
SUFFIX = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


def request_body(api: str) -> dict[str, Any]:
    if api == "chat":
        return {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": CHAT_SHAPED, "stream": True}
    if api == "responses":
        tools = [{"type": "function", **t["function"]} for t in CHAT_SHAPED]
        return {"model": "m", "input": ASK, "tools": tools, "stream": True}
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"]["parameters"]} for t in CHAT_SHAPED]
    return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": ASK}],
            "tools": tools, "stream": True}


def data(payload: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(payload).encode() + b"\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def typed(payload: dict[str, Any]) -> bytes:
    return data(payload, payload["type"])


def cut(event: bytes) -> bytes:
    """``event`` cut inside its JSON (the rest of the line lost), still framed as an event."""
    return event[: len(event) // 2] + b"\n\n"


def hidden_call_cut(api: str) -> list[bytes]:
    """A stream whose hidden ``load_tools`` call is cut by a malformed event, then goes on
    with the tail of its arguments (in a shape that, read naively, opens another call)."""
    if api == "chat":
        opening = {"index": 0, "id": "call_meta", "type": "function",
                   "function": {"name": "load_tools", "arguments": HEAD}}
        middle = chunk({"tool_calls": [{"index": 0, "function": {"arguments": "rowser_navigate"}}]})
        tail = {"index": 0, "id": "call_other", "function": {"name": "x", "arguments": TAIL}}
        return [chunk({"role": "assistant", "content": None}), chunk({"tool_calls": [opening]}),
                cut(middle), chunk({"tool_calls": [tail]}), chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    if api == "responses":
        response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
                    "model": "m", "output": []}
        item = {"id": "fc_meta", "type": "function_call", "status": "in_progress",
                "call_id": "call_meta", "name": "load_tools", "arguments": ""}
        ref = {"item_id": "fc_meta", "output_index": 0}
        events = [
            {"type": "response.created", "response": response, "sequence_number": 0},
            {"type": "response.output_item.added", "output_index": 0, "item": item, "sequence_number": 1},
            {"type": "response.function_call_arguments.delta", **ref, "delta": HEAD, "sequence_number": 2},
        ]
        broken = typed({"type": "response.function_call_arguments.delta", **ref,
                        "delta": "rowser_navigate", "sequence_number": 3})
        tail = typed({"type": "response.function_call_arguments.delta", "delta": TAIL, "sequence_number": 4})
        done = {**response, "status": "completed", "output": [{**item, "arguments": HEAD + TAIL}]}
        return [*map(typed, events), cut(broken), tail,
                typed({"type": "response.completed", "response": done, "sequence_number": 5})]
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    block = {"type": "tool_use", "id": "toolu_meta", "name": "load_tools", "input": {}}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": HEAD}},
    ]
    broken = typed({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "rowser_navigate"}})
    tail = typed({"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": TAIL}})
    end = [{"type": "content_block_stop", "index": 0},
           {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5}},
           {"type": "message_stop"}]
    return [*map(typed, events), cut(broken), tail, *map(typed, end)]


def error_payload(api: str, raw: bytes) -> dict[str, Any]:
    """The error event that ends ``raw``, checked to be the API's own shape."""
    blocks = [b for b in raw.replace(b"\r\n", b"\n").split(b"\n\n") if b.strip()]
    last = blocks[-1].decode()
    assert last.startswith("event: error\ndata: "), raw[-400:]
    payload = json.loads(last.split("data: ", 1)[1])
    if api == "chat":
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        return payload["error"]
    if api == "responses":
        assert payload["type"] == "error" and isinstance(payload["sequence_number"], int)
        assert {"code", "message", "param"} <= set(payload)
        return payload
    assert payload["type"] == "error" and set(payload["error"]) == {"type", "message"}
    return payload["error"]


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def post(proxy: str, api: str) -> httpx.Response:
    return httpx.post(proxy + PATHS[api], json=request_body(api), timeout=300)


def upstream_calls(upstream: RunningUpstream, api: str) -> int:
    return sum(r.path.endswith(SUFFIX[api]) for r in upstream.upstream.requests)


@proves(
    fault="an event cut inside a hidden `load_tools` call, then the call's tail",
    phase="inside a hidden meta-call",
    client="the API's error event saying an event could not be read; no byte of the hidden call, no invented call; the load never runs",
)
@pytest.mark.parametrize("api", APIS)
def test_a_hidden_call_cut_by_a_malformed_event_never_leaks(
    upstream: RunningUpstream, proxy: str, api: str
) -> None:
    upstream.upstream.script(SSE(hidden_call_cut(api)), path=SUFFIX[api])
    response = post(proxy, api)
    assert response.status_code == 200
    for secret in (TAIL, "rowser", "load_tools", "call_meta", "fc_meta", "toolu_meta"):
        assert secret.encode() not in response.content, secret
    assert b'"name": "x"' not in response.content
    assert "not" in error_payload(api, response.content)["message"]
    assert b"[DONE]" not in response.content and b"response.completed" not in response.content
    assert b"message_stop" not in response.content
    assert upstream_calls(upstream, api) == 1  # the load was never run nor re-issued


def text_then_malformed(api: str) -> list[bytes]:
    """Some text, an event that is not JSON, then a clean end."""
    if api == "chat":
        return [chunk({"role": "assistant", "content": "Hel"}), b"data: {not json\n\n",
                chunk({"content": "lo"}, "stop"), b"data: [DONE]\n\n"]
    if api == "responses":
        response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
                    "model": "m", "output": []}
        return [typed({"type": "response.created", "response": response, "sequence_number": 0}),
                b"event: response.output_text.delta\ndata: {not json\n\n",
                typed({"type": "response.completed", "response": {**response, "status": "completed"},
                       "sequence_number": 1})]
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    return [typed({"type": "message_start", "message": message}),
            b"event: content_block_delta\ndata: {not json\n\n",
            typed({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                   "usage": {"output_tokens": 5}}),
            typed({"type": "message_stop"})]


@proves(
    fault="an event whose data is not JSON",
    phase="while the answer streams",
    client="what was read before it, then the API's error event saying so (never silently dropped, never relayed into a stream the client parses as JSON)",
)
@pytest.mark.parametrize("api", APIS)
def test_a_malformed_event_ends_the_stream_with_an_error_event(
    upstream: RunningUpstream, proxy: str, api: str
) -> None:
    upstream.upstream.script(SSE(text_then_malformed(api)), path=SUFFIX[api])
    response = post(proxy, api)
    assert response.status_code == 200
    assert b"{not json" not in response.content
    message = error_payload(api, response.content)["message"]
    assert "event" in message and "not" in message


@proves(
    fault="a tool call whose name never comes",
    phase="while the answer streams",
    client="Chat Completions: the error event saying the call had no name; never a call with an empty name",
)
def test_a_call_without_a_name_is_never_shown_with_an_invented_one(
    upstream: RunningUpstream, proxy: str
) -> None:
    nameless = {"index": 0, "id": "call_1", "type": "function", "function": {"arguments": '{"url": "x"}'}}
    upstream.upstream.script(SSE([chunk({"role": "assistant", "content": None}),
                                  chunk({"tool_calls": [nameless]}), chunk({}, "stop"),
                                  b"data: [DONE]\n\n"]))
    response = post(proxy, "chat")
    assert response.status_code == 200
    shown = [json.loads(p) for p in parse_sse(response.content) if p.startswith('{"id"')]
    assert not any(c["choices"] and c["choices"][0]["delta"].get("tool_calls") for c in shown)
    assert "name" in error_payload("chat", response.content)["message"]


@proves(
    fault="a tool call whose name never comes, to a plain request",
    phase="in a plain answer",
    client="Chat Completions: 502 `upstream_invalid_response` saying the call had no name",
)
def test_a_plain_answer_with_a_nameless_call_is_a_502(upstream: RunningUpstream, proxy: str) -> None:
    nameless = {"index": 0, "id": "call_1", "type": "function", "function": {"arguments": "{}"}}
    upstream.upstream.script(SSE([chunk({"role": "assistant", "content": None}),
                                  chunk({"tool_calls": [nameless]}), chunk({}, "tool_calls"),
                                  b"data: [DONE]\n\n"]))
    body = {**request_body("chat"), "stream": False}
    response = httpx.post(proxy + PATHS["chat"], json=body, timeout=300)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_invalid_response"
