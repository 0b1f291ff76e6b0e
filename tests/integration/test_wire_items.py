"""Issue #12's failing inputs, one test each (the corpus in tests/wire covers the shapes).

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream;
pruning active on the 69-tool Playwright and 117-tool GitHub MCP catalogues.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import httpx
import openai
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE, Chat, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.openai_schema import check_completion, check_stream

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
STREAM = {"stream": True, "stream_options": {"include_usage": True}}


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def post(proxy: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(proxy + "/v1/chat/completions", json=body, headers=headers, timeout=60)


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    data = {"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def call_delta(call_id: str | None, name: str | None, arguments: str, index: int = 0) -> dict[str, Any]:
    item: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        item["id"], item["type"] = call_id, "function"
    if name:
        item["function"]["name"] = name
    return {"tool_calls": [item]}


@pytest.fixture
def pruning_proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


# 1 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("meta_first", [True, False])
def test_a_new_id_at_a_used_index_starts_a_new_call(
    upstream: RunningUpstream, pruning_proxy: str, meta_first: bool
) -> None:
    load = call_delta("A", "load_tools", '{"names": ["browser_cookie_set"]}')
    real = call_delta("B", "browser_navigate", '{"url": "https://example.com"}')
    first, second = (load, real) if meta_first else (real, load)
    upstream.upstream.script(SSE([chunk({"role": "assistant"}), chunk(first), chunk(second),
                                  chunk({}, "tool_calls"), b"data: [DONE]\n\n"]))
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **STREAM},
                    **{"X-Conversation-Id": f"one-index-{meta_first}"})
    report = check_stream(response.content)
    calls = report.message["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("B", "browser_navigate")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"url": "https://example.com"}
    upstream.upstream.script(Chat(content="ok"))  # the load counts from the next turn
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT},
         **{"X-Conversation-Id": f"one-index-{meta_first}"})
    assert "browser_cookie_set" in names(chat_requests(upstream)[-1].json()["tools"])


# 2 ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "arguments", ['{"names": ["browser_cookie_set"', "{'names': ['browser_cookie_set']}", '""', None]
)
def test_broken_meta_call_arguments_are_replayed_as_valid_json(
    upstream: RunningUpstream, pruning_proxy: str, arguments: str | None
) -> None:
    if arguments is None:  # absent: a streamed call that never sends arguments
        upstream.upstream.script(SSE([chunk({"role": "assistant"}), chunk(call_delta("m1", "load_tools", "")),
                                      chunk({}, "tool_calls"), b"data: [DONE]\n\n"]), Chat(content="done"))
        body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **STREAM}
    else:
        upstream.upstream.script(
            Chat(content=None, tool_calls=[{"id": "m1", "name": "load_tools", "arguments": arguments}]),
            Chat(content="done"),
        )
        body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    post(pruning_proxy, body)
    assistant, answer = chat_requests(upstream)[1].json()["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    error = json.loads(answer["content"])["error"]
    assert "arguments" in error and "names" in error


# 3 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_a_meta_call_cut_off_by_length_is_never_run(
    upstream: RunningUpstream, pruning_proxy: str, stream: bool
) -> None:
    cut = {"id": "m1", "name": "load_tools", "arguments": '{"names": ["get_'}
    upstream.upstream.script(Chat(content=None, tool_calls=[cut], finish_reason="length"))
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "max_completion_tokens": 8,
            **(STREAM if stream else {})}
    response = post(pruning_proxy, body)
    assert len(chat_requests(upstream)) == 1
    if stream:
        report = check_stream(response.content)
        finish, message = report.finish_reason, report.message
    else:
        message = check_completion(response.json())
        finish = response.json()["choices"][0]["finish_reason"]
    assert finish == "length" and "tool_calls" not in message
    assert "load_tools" not in response.text and "cut off" in message["content"]


# 4 ------------------------------------------------------------------------------------
def test_usage_on_every_chunk_counts_the_last_per_round(upstream: RunningUpstream, pruning_proxy: str) -> None:
    def usage(completion: int) -> dict[str, int]:
        return {"prompt_tokens": 100, "completion_tokens": completion, "total_tokens": 100 + completion}

    events = [chunk({"role": "assistant", "content": ""}, usage=usage(0))]
    events += [chunk({"content": piece}, usage=usage(n + 1)) for n, piece in enumerate(["a", "b", "c", "d"])]
    events += [chunk({}, "stop", usage=usage(5)), b'data: {"id":"chatcmpl-u","object":"chat.completion.chunk",'
               b'"created":1,"model":"m","choices":[],"usage":' + json.dumps(usage(5)).encode() + b"}\n\n",
               b"data: [DONE]\n\n"]
    upstream.upstream.script(SSE(events))
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **STREAM})
    assert check_stream(response.content).usage == usage(5)


# 5 ------------------------------------------------------------------------------------
def test_a_json_answer_to_a_stream_request_is_served_as_a_stream(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    call = {"id": "m1", "type": "function",
            "function": {"name": "load_tools", "arguments": '{"names": ["browser_cookie_set"]}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    completion = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                  "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    upstream.upstream.script(Raw(200, completion), Chat(content="done"))
    client = openai.OpenAI(base_url=pruning_proxy + "/v1", api_key="k", max_retries=0)
    chunks = list(client.chat.completions.create(model="m", messages=ASK, tools=PLAYWRIGHT, stream=True))  # type: ignore[arg-type]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "done"
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert len(chat_requests(upstream)) == 2


# 6 ------------------------------------------------------------------------------------
def test_upstream_without_streaming_gets_plain_requests_and_the_client_a_stream(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, upstream_stream=False)
    upstream.upstream.script(
        Chat(content=None, tool_calls=[{"id": "m1", "name": "load_tools", "arguments": '{"names": ["browser_cookie_set"]}'}]),
        Chat(content=None, tool_calls=[{"id": "c1", "name": "browser_cookie_set", "arguments": '{"name": "a", "value": "b"}'}]),
    )
    response = post(proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **STREAM})
    sent = [r.json() for r in chat_requests(upstream)]
    assert [s["stream"] for s in sent] == [False, False] and not any("stream_options" in s for s in sent)
    assert response.headers["content-type"].startswith("text/event-stream")
    report = check_stream(response.content)
    assert [c["function"]["name"] for c in report.message["tool_calls"]] == ["browser_cookie_set"]
    assert report.usage is not None and report.usage["completion_tokens"] == 10


@pytest.mark.parametrize("stream", [True, False])
def test_meta_calls_written_as_text_are_run_and_hidden(
    upstream: RunningUpstream, pruning_proxy: str, stream: bool
) -> None:
    text = 'Loading.<tool_call>\n{"name": "load_tools", "arguments": {"names": ["browser_cookie_set"]}}\n</tool_call>'
    upstream.upstream.script(Chat(content=text), Chat(content=" Done."))
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **(STREAM if stream else {})})
    sent = chat_requests(upstream)
    assert len(sent) == 2 and "browser_cookie_set" in names(sent[1].json()["tools"])
    content = check_stream(response.content).message["content"] if stream else response.json()["choices"][0]["message"]["content"]
    assert content == "Loading. Done." and "tool_call" not in response.text


# 7 ------------------------------------------------------------------------------------
def test_tool_names_with_slashes_are_pruned_and_loadable(upstream: RunningUpstream, pruning_proxy: str) -> None:
    tools = [{**t, "function": {**t["function"], "name": "playwright/" + t["function"]["name"]}} for t in PLAYWRIGHT]
    upstream.upstream.script(
        Chat(content=None, tool_calls=[{"id": "m1", "name": "load_tools",
                                        "arguments": '{"names": ["playwright/browser_cookie_set"]}'}]),
        Chat(content="ok"),
    )
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": tools})
    first, second = (r.json() for r in chat_requests(upstream))
    assert response.headers["x-tool-pruning-tools"].endswith("/69")
    assert len(first["tools"]) <= 7 and "playwright/browser_cookie_set" in names(second["tools"])


# 8 ------------------------------------------------------------------------------------
def test_an_empty_tools_array_is_never_forwarded(upstream: RunningUpstream, pruning_proxy: str) -> None:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "tool_choice": "none", "parallel_tool_calls": False}
    response = post(pruning_proxy, body, **{"X-Tool-Pruning-Top-K": "0"})
    sent = chat_requests(upstream)[-1].json()
    assert response.status_code == 200
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(sent)


# 9 ------------------------------------------------------------------------------------
def test_an_error_answer_to_a_reissue_reaches_the_stream_client(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    error = {"error": {"code": 400, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"}}
    upstream.upstream.script(
        Chat(content=None, tool_calls=[{"id": "m1", "name": "load_tools", "arguments": '{"names": ["browser_cookie_set"]}'}]),
        Raw(400, error),
    )
    client = openai.OpenAI(base_url=pruning_proxy + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIError) as raised:
        list(client.chat.completions.create(model="m", messages=ASK, tools=PLAYWRIGHT, stream=True))  # type: ignore[arg-type]
    # llama-server's context overflow, as the client's API words it (counts not given).
    assert raised.value.body["code"] == "context_length_exceeded"
    assert error["error"]["message"] in raised.value.body["message"]


# 10 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_meta_rounds_running_out_give_a_valid_message(
    upstream: RunningUpstream, start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, threshold=0.0, max_meta_rounds=1)
    load = {"name": "load_tools", "arguments": '{"names": ["browser_resize"]}'}
    upstream.upstream.script(*[Chat(content=None, tool_calls=[{**load, "id": f"m{i}"}]) for i in range(2)])
    response = post(proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **(STREAM if stream else {})})
    if stream:
        report = check_stream(response.content)
        message, finish = report.message, report.finish_reason
    else:
        message, finish = check_completion(response.json()), response.json()["choices"][0]["finish_reason"]
    assert finish == "stop" and "load more tools" in message["content"]


# 11 -----------------------------------------------------------------------------------
def test_one_identity_and_the_same_message_plain_and_streaming(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    load = {"id": "m1", "name": "load_tools", "arguments": '{"names": ["browser_cookie_set"]}'}
    messages = []
    for stream in (True, False):
        upstream.upstream.script(Chat(content="Let me load it. ", tool_calls=[load], id="chatcmpl-first"),
                                 Chat(content="Cookie set.", id="chatcmpl-second"))
        response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, **(STREAM if stream else {})})
        if stream:
            report = check_stream(response.content)
            assert report.ids == {"chatcmpl-first"} and len(report.created) == 1
            messages.append(report.message["content"])
        else:
            assert response.json()["id"] == "chatcmpl-first"
            messages.append(response.json()["choices"][0]["message"]["content"])
    assert messages == ["Let me load it. Cookie set."] * 2


# 12 -----------------------------------------------------------------------------------
def test_the_decision_log_keeps_the_semantic_admissions_of_a_meta_turn(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    decisions: list[dict[str, Any]] = []
    logged = threading.Event()

    class Collect(logging.Handler):  # the line is written after the response completes
        def emit(self, record: logging.LogRecord) -> None:
            decisions.append(getattr(record, "fields", {}))
            logged.set()

    collect = Collect(logging.INFO)
    logging.getLogger("toolprune.decision").addHandler(collect)
    upstream.upstream.script(
        Chat(content=None, tool_calls=[{"id": "m1", "name": "load_tools", "arguments": '{"names": ["browser_cookie_set"]}'}]),
        Chat(content="ok"),
    )
    try:
        post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT})
        assert logged.wait(10)
    finally:
        logging.getLogger("toolprune.decision").removeHandler(collect)
    semantic = [n for n in names(chat_requests(upstream)[0].json()["tools"]) if n != "load_tools"]
    assert set(semantic) | {"browser_cookie_set"} <= set(decisions[0]["admitted"])
