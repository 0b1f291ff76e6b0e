"""Pruning in /v1/responses and /v1/messages with meta-tools handled by the proxy (issue
#13): the proxy under uvicorn in front of the scripted upstream, the official ``openai``
and ``anthropic`` SDKs as clients. Every event a client receives is validated against
the SDK's own models, and the SDKs' stream accumulators rebuild the final object from
the renumbered indexes.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import Hang, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.turn_apis import APIS

CHAT_SHAPED: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
#: The Playwright MCP catalogue (69 tools) in each API's tool shape.
RESPONSES_TOOLS = [{"type": "function", **tool["function"]} for tool in CHAT_SHAPED]
MESSAGES_TOOLS = [
    {"name": t["function"]["name"], "description": t["function"].get("description", ""),
     "input_schema": t["function"]["parameters"]}
    for t in CHAT_SHAPED
]
ASK = "Open https://example.com in the browser and take a screenshot"
LOADED = "browser_cookie_set"


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool.get("name", tool.get("type")) for tool in tools]


def sent(upstream: RunningUpstream, suffix: str) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.upstream.requests if r.path.endswith(suffix)]


def load(call_id: str = "meta_1") -> dict[str, str]:
    return {"call_id": call_id, "name": "load_tools", "arguments": json.dumps({"names": [LOADED]})}


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def openai_client(proxy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)


def anthropic_client(proxy: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)


# --- Responses ---------------------------------------------------------------------
def assert_responses_reissue(upstream: RunningUpstream) -> list[dict[str, Any]]:
    """The first request offers the meta-tool last and not the tool; the re-issue
    carries the tool (as the client defined it) after the first request's tools, the
    meta-tool kept in place, and the paired call and output."""
    first, second = sent(upstream, "/responses")[:2]
    assert tool_names(first["tools"])[-1] == "load_tools" and LOADED not in tool_names(first["tools"])
    assert len(first["tools"]) <= 6 + 1
    assert second["tools"] == [*first["tools"], next(t for t in RESPONSES_TOOLS if t["name"] == LOADED)]
    call, output = second["input"][-2:]
    assert call["type"] == "function_call" and call["name"] == "load_tools"
    assert output == {"type": "function_call_output", "call_id": "meta_1",
                      "output": output["output"]}
    assert call["call_id"] == "meta_1" and json.loads(output["output"])["loaded"] == [LOADED]
    return [first, second]


def test_responses_plain_meta_round_is_hidden_summed_and_sticky(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[load()]),
        Responses(text="done"),
        Responses(text="again"),
        path="/responses",
    )
    client = openai_client(proxy)
    raw = client.responses.with_raw_response.create(
        model="m", input=ASK, tools=RESPONSES_TOOLS, extra_headers={"X-Conversation-Id": "r1"}
    )
    result = raw.parse()
    assert result.output_text == "done"
    assert [item.type for item in result.output] == ["message"]
    assert raw.headers["x-tool-pruning-tools"].endswith("/69")
    first, second = assert_responses_reissue(upstream)
    assert result.usage.input_tokens == sum(
        len(r.body) // 4 for r in upstream.upstream.requests if r.path.endswith("/responses")
    )
    assert result.usage.output_tokens == 10
    assert "load_tools" not in result.model_dump_json()
    assert [t.name for t in result.tools] == [t["name"] for t in RESPONSES_TOOLS]
    client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS,
                            extra_headers={"X-Conversation-Id": "r1"})
    assert LOADED in tool_names(sent(upstream, "/responses")[2]["tools"])


def test_responses_stream_validates_and_hides_the_meta_round(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text="Let me load it. ", calls=[load()]),
        Responses(text=None, calls=[{"call_id": "c2", "name": LOADED,
                                     "arguments": '{"name":"a","value":"b"}'}]),
        path="/responses",
    )
    client = openai_client(proxy)
    events = list(client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS,
                                           stream=True))
    for event in events:
        type(event).model_validate(event.model_dump(exclude_unset=True))
    kinds = [event.type for event in events]
    assert kinds.count("response.created") == 1 and kinds[-1] == "response.completed"
    assert kinds.count("response.completed") == 1
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "load_tools" not in json.dumps([event.model_dump() for event in events])
    added = [event for event in events if event.type == "response.output_item.added"]
    assert [(e.output_index, e.item.type) for e in added] == [(0, "message"), (1, "function_call")]
    completed = events[-1].response
    assert [item.type for item in completed.output] == ["message", "function_call"]
    assert completed.output[1].name == LOADED
    requests = [r for r in upstream.upstream.requests if r.path.endswith("/responses")]
    assert completed.usage.input_tokens == sum(len(r.body) // 4 for r in requests)
    assert_responses_reissue(upstream)
    list(client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS, stream=True))
    assert LOADED in tool_names(sent(upstream, "/responses")[2]["tools"])  # sticky


def test_responses_stream_helper_accumulates_the_client_view(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text="Loading. ", calls=[load()]), Responses(text="Done."), path="/responses"
    )
    with openai_client(proxy).responses.stream(model="m", input=ASK, tools=RESPONSES_TOOLS) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Loading. Done."


# --- Messages ----------------------------------------------------------------------
def assert_messages_reissue(upstream: RunningUpstream) -> None:
    first, second = sent(upstream, "/messages")[:2]
    assert tool_names(first["tools"])[-1] == "load_tools" and LOADED not in tool_names(first["tools"])
    assert "input_schema" in first["tools"][-1]
    assert second["tools"] == [*first["tools"], next(t for t in MESSAGES_TOOLS if t["name"] == LOADED)]
    assistant, user = second["messages"][-2:]
    use = next(b for b in assistant["content"] if b["type"] == "tool_use")
    assert assistant["role"] == "assistant" and use["name"] == "load_tools"
    assert use["id"] == "toolu_meta" and use["input"] == {"names": [LOADED]}
    (result,) = user["content"]
    assert user["role"] == "user" and result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_meta"
    assert json.loads(result["content"])["loaded"] == [LOADED]


META_USE = {"id": "toolu_meta", "name": "load_tools", "input": {"names": [LOADED]}}


def test_messages_plain_meta_round_is_hidden_summed_and_sticky(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text="Loading.", calls=[META_USE]), Message(text="done"), Message(text="again"),
        path="/messages",
    )
    client = anthropic_client(proxy)
    ask = [{"role": "user", "content": ASK}]
    raw = client.messages.with_raw_response.create(
        model="m", max_tokens=64, messages=ask, tools=MESSAGES_TOOLS,
        extra_headers={"X-Conversation-Id": "m1"},
    )
    message = raw.parse()
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "done" and message.stop_reason == "end_turn"
    assert raw.headers["x-tool-pruning-tools"].endswith("/69")
    requests = [r for r in upstream.upstream.requests if r.path.endswith("/messages")]
    assert message.usage.input_tokens == sum(len(r.body) // 4 for r in requests)
    assert message.usage.output_tokens == 10
    assert_messages_reissue(upstream)
    client.messages.create(model="m", max_tokens=64, messages=ask, tools=MESSAGES_TOOLS,
                           extra_headers={"X-Conversation-Id": "m1"})
    assert LOADED in tool_names(sent(upstream, "/messages")[2]["tools"])


def test_messages_stream_validates_and_hides_the_meta_round(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text="Let me load it. ", calls=[META_USE]),
        Message(text=None, calls=[{"id": "toolu_2", "name": LOADED, "input": {"name": "a"}}]),
        path="/messages",
    )
    client = anthropic_client(proxy)
    ask = [{"role": "user", "content": ASK}]
    events = list(client.messages.create(model="m", max_tokens=64, messages=ask,
                                         tools=MESSAGES_TOOLS, stream=True))
    for event in events:
        type(event).model_validate(event.model_dump(exclude_unset=True))
    kinds = [event.type for event in events]
    assert kinds.count("message_start") == 1 and kinds.count("message_stop") == 1
    assert kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e for e in events if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [(0, "text"), (1, "tool_use")]
    assert starts[1].content_block.name == LOADED
    assert "load_tools" not in json.dumps([event.model_dump() for event in events])
    delta = events[-2]
    assert delta.delta.stop_reason == "tool_use"
    requests = [r for r in upstream.upstream.requests if r.path.endswith("/messages")]
    assert delta.usage.input_tokens == sum(len(r.body) // 4 for r in requests)
    assert delta.usage.output_tokens == 10
    assert_messages_reissue(upstream)
    list(client.messages.create(model="m", max_tokens=64, messages=ask, tools=MESSAGES_TOOLS,
                                stream=True))
    assert LOADED in tool_names(sent(upstream, "/messages")[2]["tools"])  # sticky


def test_messages_stream_helper_accumulates_the_client_view(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text="Loading. ", calls=[META_USE]), Message(text="Done."), path="/messages"
    )
    with anthropic_client(proxy).messages.stream(
        model="m", max_tokens=64, messages=[{"role": "user", "content": ASK}], tools=MESSAGES_TOOLS
    ) as stream:
        final = stream.get_final_message()
    assert [block.text for block in final.content] == ["Loading. ", "Done."]
    assert final.stop_reason == "end_turn"


def test_messages_keep_cache_control_and_anthropic_tools(
    upstream: RunningUpstream, proxy: str
) -> None:
    marked = [*MESSAGES_TOOLS[:-1], {**MESSAGES_TOOLS[-1], "cache_control": {"type": "ephemeral"}}]
    bash = {"type": "bash_20250124", "name": "bash"}
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": ASK}],
            "tools": [bash, *marked]}
    response = httpx.post(proxy + "/v1/messages", json=body, timeout=60)
    assert response.status_code == 200
    assert response.headers["x-tool-pruning-tools"].endswith("/69")  # bash is not counted
    (forwarded,) = sent(upstream, "/messages")
    assert forwarded["tools"][0] == bash
    markers = [t for t in forwarded["tools"] if "cache_control" in t]
    assert markers == [forwarded["tools"][-1]]


def test_messages_errors_keep_anthropic_shape(start_proxy: ProxyFactory) -> None:
    proxy = start_proxy(upstream_url="http://127.0.0.1:9/v1", max_request_bytes=200_000)
    client = anthropic_client(proxy)
    with pytest.raises(anthropic.APIStatusError) as failed:
        client.messages.create(model="m", max_tokens=8, tools=MESSAGES_TOOLS,
                               messages=[{"role": "user", "content": ASK}])
    assert failed.value.status_code == 502
    assert failed.value.body["type"] == "error" and failed.value.body["error"]["type"] == "api_error"
    big = httpx.post(proxy + "/v1/messages", content=b"x" * 300_000, timeout=60)
    assert big.status_code == 413
    assert big.json()["error"]["type"] == "request_too_large"
    chat = httpx.post(proxy + "/v1/chat/completions", content=b"x" * 300_000, timeout=60)
    assert chat.json()["error"]["code"] == "request_too_large"  # OpenAI shape elsewhere


def test_count_tokens_and_input_tokens_pass_through(upstream: RunningUpstream, proxy: str) -> None:
    upstream.upstream.script(Raw(200, {"input_tokens": 123}), path="/messages/count_tokens")
    body = {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": MESSAGES_TOOLS}
    response = httpx.post(proxy + "/v1/messages/count_tokens", json=body, timeout=60)
    assert response.json() == {"input_tokens": 123}
    assert "x-tool-pruning-tools" not in response.headers
    (forwarded,) = [r for r in upstream.upstream.requests if r.path.endswith("/count_tokens")]
    assert forwarded.json() == body


def test_a_refused_input_forwards_the_original_bytes_counted_as_malformed(
    upstream: RunningUpstream, proxy: str
) -> None:
    raw = json.dumps({"model": "m", "input": 42, "tools": RESPONSES_TOOLS}).encode()
    upstream.upstream.script(Raw(400, {"error": {"message": "bad input"}}), path="/responses")
    response = httpx.post(proxy + "/v1/responses", content=raw, timeout=60,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    (forwarded,) = [r for r in upstream.upstream.requests if r.path.endswith("/responses")]
    assert forwarded.body == raw
    metrics = httpx.get(proxy + "/metrics", timeout=10).text
    assert 'toolprune_requests_total{api="responses",decision="malformed",path="none"} 1.0' in metrics
    assert 'toolprune_fallbacks_total{reason="unreadable_request"}' not in metrics


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_valid_json_the_proxy_cannot_read_is_forwarded_as_sent(
    upstream: RunningUpstream, proxy: str, path: str
) -> None:
    """An integer of 5,000 digits (past Python's limit for reading one): the bytes go to
    the upstream as they came, whose answer the client gets."""
    raw = (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "input": "hi", '
           b'"max_tokens": 8, "seed": ' + b"9" * 5000 + b"}")
    suffix = path.removeprefix("/v1")
    upstream.upstream.script(Raw(400, {"error": {"message": "seed out of range"}}), path=suffix)
    response = httpx.post(proxy + path, content=raw, timeout=60,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400 and "seed out of range" in response.text
    assert [r.body for r in upstream.upstream.requests if r.path.endswith(suffix)][-1] == raw


def test_previous_response_id_continues_the_conversation(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Responses(text=None, calls=[load()]), Responses(text="done"), Responses(text="next"),
        path="/responses",
    )
    client = openai_client(proxy)
    first = client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS)
    client.responses.create(model="m", input="Now set another cookie", tools=RESPONSES_TOOLS,
                            previous_response_id=first.id)
    third = sent(upstream, "/responses")[2]
    assert third["previous_response_id"] == first.id
    assert LOADED in tool_names(third["tools"])
    assert third["input"] == "Now set another cookie"


def test_hosted_tools_pass_through_and_tool_choice_none_offers_no_meta(
    upstream: RunningUpstream, proxy: str
) -> None:
    hosted = {"type": "web_search"}
    body = {"model": "m", "input": ASK, "tools": [hosted, *RESPONSES_TOOLS], "tool_choice": "none"}
    response = httpx.post(proxy + "/v1/responses", json=body, timeout=60)
    assert response.headers["x-tool-pruning-tools"].endswith("/69")
    (forwarded,) = sent(upstream, "/responses")
    assert forwarded["tools"][0] == hosted and "load_tools" not in tool_names(forwarded["tools"])
    assert forwarded["tool_choice"] == "none"


def stream_two_rounds(upstream: RunningUpstream, proxy: str) -> list[Any]:
    """A streamed Responses answer that took a hidden load_tools round (upstream ids
    ``resp_round1``, ``resp_round2``), with a third reply scripted for a continuation."""
    upstream.upstream.script(
        Responses(text=None, calls=[load()], id="resp_round1"),
        Responses(text="done", id="resp_round2"),
        Responses(text="next"),
        path="/responses",
    )
    stream = openai_client(proxy).responses.create(
        model="m", input=ASK, tools=RESPONSES_TOOLS, stream=True
    )
    return list(stream)


def test_a_streamed_response_keeps_one_id_and_continues_from_its_last_round(
    upstream: RunningUpstream, proxy: str
) -> None:
    events = stream_two_rounds(upstream, proxy)
    client = openai_client(proxy)
    assert {e.response.id for e in events if e.type.startswith("response.") and hasattr(e, "response")} == {"resp_round1"}
    client.responses.create(model="m", input="Set another cookie", tools=RESPONSES_TOOLS,
                            previous_response_id="resp_round1")
    third = sent(upstream, "/responses")[2]
    assert third["previous_response_id"] == "resp_round2"  # the stored response holding it all
    assert LOADED in tool_names(third["tools"])


@pytest.mark.parametrize("continuation", ["off", "dry-run", "no tools"])
def test_a_continuation_the_proxy_does_not_prune_also_continues_from_the_last_round(
    upstream: RunningUpstream, proxy: str, continuation: str
) -> None:
    """The stream showed the first round's id; a continuation forwarded without pruning
    must still name the stored response that holds the whole exchange: the first
    round's holds the hidden load_tools call and no output for it."""
    stream_two_rounds(upstream, proxy)
    body: dict[str, Any] = {"model": "m", "input": "Thanks", "previous_response_id": "resp_round1"}
    headers = {"X-Tool-Pruning": continuation} if continuation != "no tools" else {}
    if continuation != "no tools":
        body["tools"] = RESPONSES_TOOLS
    response = httpx.post(proxy + "/v1/responses", json=body, headers=headers, timeout=60)
    assert response.status_code == 200
    third = sent(upstream, "/responses")[2]
    assert third["previous_response_id"] == "resp_round2"
    assert third["input"] == "Thanks" and third.get("tools") == body.get("tools")


def test_a_failed_reissue_ends_the_messages_stream_with_an_anthropic_error_event(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text="Loading.", calls=[META_USE]),
        Raw(500, {"error": {"message": "boom"}}),
        path="/messages",
    )
    stream = anthropic_client(proxy).messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": ASK}],
        tools=MESSAGES_TOOLS, stream=True,
    )
    seen = []
    with pytest.raises(anthropic.APIStatusError) as failed:
        for event in stream:
            seen.append(event.type)
    assert seen[0] == "message_start" and "message_stop" not in seen
    assert failed.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"}}


def test_meta_calls_mixed_with_client_calls_are_removed_and_load_next_turn(
    upstream: RunningUpstream, proxy: str
) -> None:
    real = {"call_id": "c9", "name": "browser_take_screenshot", "arguments": "{}"}
    upstream.upstream.script(Responses(text=None, calls=[load(), real]), Responses(),
                             path="/responses")
    client = openai_client(proxy)
    headers = {"X-Conversation-Id": "mixed"}
    result = client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS, extra_headers=headers)
    assert [(item.type, item.name) for item in result.output] == [("function_call", real["name"])]
    assert len(sent(upstream, "/responses")) == 1  # not re-issued: the client has a call to run
    client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS, extra_headers=headers)
    assert LOADED in tool_names(sent(upstream, "/responses")[1]["tools"])


@pytest.mark.parametrize("stream", [False, True])
def test_a_meta_call_with_cut_off_arguments_is_re_issued_as_json(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    """llama-server answers 500 to an input function_call whose arguments are not JSON;
    the re-issued request carries the arguments the call was run with."""
    upstream.upstream.script(
        Responses(text=None, calls=[{"call_id": "meta_1", "name": "load_tools",
                                     "arguments": '{"names": ["browser_coo'}]),
        Responses(text="done"),
        path="/responses",
    )
    client = openai_client(proxy)
    if stream:
        events = list(client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS,
                                               stream=True))
        assert events[-1].type == "response.completed"
    else:
        assert client.responses.create(model="m", input=ASK, tools=RESPONSES_TOOLS).output_text == "done"
    call, output = sent(upstream, "/responses")[1]["input"][-2:]
    assert call["type"] == "function_call" and call["arguments"] == "{}"
    assert output["call_id"] == call["call_id"] == "meta_1"
    error = json.loads(output["output"])["error"]
    assert error.startswith("the arguments were cut off or are not valid JSON; arguments must be JSON")


def test_a_meta_tool_use_without_an_id_is_paired_with_its_result(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(
        Message(text=None, calls=[{"name": "load_tools", "input": {"names": [LOADED]}}]),
        Message(text="done"),
        path="/messages",
    )
    message = anthropic_client(proxy).messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": ASK}], tools=MESSAGES_TOOLS
    )
    assert message.content[0].text == "done"
    assistant, user = sent(upstream, "/messages")[1]["messages"][-2:]
    (use,) = assistant["content"]
    (result,) = user["content"]
    assert use["id"].startswith("toolu_") and result["tool_use_id"] == use["id"]
    assert use["input"] == {"names": [LOADED]}


@pytest.mark.parametrize("path", ["/responses", "/messages"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_in_the_other_shape_hides_the_meta_round_too(
    upstream: RunningUpstream, proxy: str, path: str, stream: bool
) -> None:
    # Some servers answer a streamed request with one JSON body, or a plain one with an
    # event stream: a streaming client gets a stream (the JSON answers written as the
    # API's events), a plain one the upstream's stream; the meta-call answered and hidden.
    if path == "/responses":
        replies = [Responses(text=None, calls=[load()]), Responses(text="done")]
        body: dict[str, Any] = {"model": "m", "input": ASK, "tools": RESPONSES_TOOLS}
    else:
        replies = [Message(text=None, calls=[META_USE]), Message(text="done")]
        body = {"model": "m", "max_tokens": 64, "tools": MESSAGES_TOOLS,
                "messages": [{"role": "user", "content": ASK}]}
    if stream:
        answers = [Raw(200, reply.render({}, 400)) for reply in replies]  # type: ignore[arg-type]
    else:
        answers = [Raw(200, b"".join(reply.render({"stream": True}, 400)),  # type: ignore[arg-type]
                       media_type="text/event-stream") for reply in replies]
    upstream.upstream.script(*answers, path=path)
    response = httpx.post(proxy + "/v1" + path, json={**body, "stream": stream}, timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "load_tools" not in response.text
    assert APIS[path.strip("/")].read_stream(response.content).text == "done"
    assert len(sent(upstream, path)) == 2


@pytest.mark.parametrize("path", ["/responses", "/messages"])
def test_a_pruned_request_the_upstream_times_out_says_what_was_pruned(
    upstream: RunningUpstream, start_proxy: ProxyFactory, path: str
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, idle_timeout_s=0.3)
    upstream.upstream.script(Hang(), path=path)
    if path == "/responses":
        body: dict[str, Any] = {"model": "m", "input": ASK, "tools": RESPONSES_TOOLS}
    else:
        body = {"model": "m", "max_tokens": 64, "tools": MESSAGES_TOOLS,
                "messages": [{"role": "user", "content": ASK}]}
    response = httpx.post(proxy + "/v1" + path, json=body, timeout=60)
    assert response.status_code == 504
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert offered == str(len(RESPONSES_TOOLS)) and 0 < int(forwarded) < len(RESPONSES_TOOLS)
