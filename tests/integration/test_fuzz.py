"""Fuzzing the acting paths (Hypothesis): random request bodies, toolprune headers and
upstream answers (plain, streamed, broken, odd JSON) through a real proxy and scripted
upstream. Whatever comes in, the proxy itself never answers 500 (a defect), every error
it answers is OpenAI-shaped, and a stream it cuts ends with an SSE error event.

Bounded in time: ``max_examples`` examples, no per-example deadline (the machine is shared).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE, Chat, Raw
from tests.conftest import ProxyFactory, RunningUpstream

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
NAMES = [tool["function"]["name"] for tool in PLAYWRIGHT]
CHAT = "/v1/chat/completions"
MAX_EXAMPLES = 60
#: Upstream answers queued per example: the first request and every meta-call re-issue.
ANSWERS_PER_EXAMPLE = 4

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "tool", "developer", "x"])},
        optional={"content": st.text(max_size=200) | json_values,
                  "tool_calls": json_values, "tool_call_id": st.text(max_size=8)},
    ) | json_values,
    max_size=5,
)
tools = st.one_of(
    st.just(PLAYWRIGHT),
    st.lists(st.sampled_from(PLAYWRIGHT), min_size=0, max_size=30),
    st.lists(json_values, max_size=12),
    json_values,
)
chat_bodies = st.fixed_dictionaries(
    {"model": st.text(max_size=8), "messages": messages, "tools": tools},
    optional={
        "stream": st.booleans() | json_values,
        "tool_choice": st.sampled_from(["auto", "none", "required"]) | json_values
        | st.builds(lambda n: {"type": "function", "function": {"name": n}}, st.sampled_from(NAMES)),
        "n": st.integers(0, 3) | json_values,
        "functions": json_values,
    },
)
bodies = st.one_of(
    chat_bodies.map(lambda body: json.dumps(body).encode()),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=300),
)
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300).map(str.strip)
headers = st.dictionaries(
    st.sampled_from(["x-tool-pruning", "x-tool-pruning-top-k", "x-conversation-id",
                     "authorization", "x-request-id", "x-other"]),
    header_values | st.sampled_from(["on", "off", "dry-run", "3", "0", "99999999999"]),
    max_size=4,
)


def sse_event(value: Any) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


chunk_values = st.one_of(
    json_values,
    st.builds(
        lambda delta, finish: {"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]},
        st.fixed_dictionaries({}, optional={
            "role": st.just("assistant"), "content": st.text(max_size=20) | json_values,
            "tool_calls": st.lists(st.fixed_dictionaries({}, optional={
                "index": st.integers(0, 3) | json_values, "id": st.text(max_size=6),
                "function": st.fixed_dictionaries({}, optional={
                    "name": st.sampled_from([*NAMES[:5], "load_tools", "search_tools"]) | json_values,
                    "arguments": st.text(max_size=30) | json_values})}), max_size=3) | json_values,
        }),
        st.none() | st.sampled_from(["stop", "tool_calls"]) | json_values,
    ),
)
sse_answers = st.builds(
    lambda events, done, broken: SSE(
        [e if isinstance(e, bytes) else sse_event(e) for e in events] + ([b"data: [DONE]\n\n"] if done else []),
        break_after=broken,
    ),
    st.lists(chunk_values | st.binary(max_size=40), max_size=6),
    st.booleans(),
    st.booleans(),
)
chat_answers = st.builds(
    lambda content, calls: Chat(content=content, tool_calls=calls or None),
    st.none() | st.text(max_size=40),
    st.lists(st.builds(
        lambda name, arguments: {"id": "call_1", "name": name, "arguments": arguments},
        st.sampled_from([*NAMES[:5], "load_tools", "search_tools"]),
        st.text(max_size=40) | json_values.map(json.dumps),
    ), max_size=2),
)
raw_answers = st.builds(
    Raw,
    st.sampled_from([200, 200, 200, 400, 404, 429, 500, 503]),
    json_values.map(json.dumps) | st.binary(max_size=100),
    st.none(),
    st.sampled_from(["application/json", "text/event-stream", "text/plain"]),
)
answers = st.one_of(chat_answers, sse_answers, raw_answers)


def assert_openai_error(content: bytes) -> dict[str, Any]:
    error = json.loads(content)["error"]
    assert {"message", "type", "code"} <= set(error)
    return error


def test_no_request_and_no_upstream_answer_makes_the_proxy_fail(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()  # one proxy for every example: its catalogue index stays warm

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=bodies, request_headers=headers, answer=answers)
    def exchange(body: bytes, request_headers: dict[str, str], answer: Any) -> None:
        upstream.upstream.drain()
        upstream.upstream.script(*[answer] * ANSWERS_PER_EXAMPLE)
        request = {**request_headers, "content-type": "application/json"}
        try:
            response = httpx.post(proxy + CHAT, content=body, headers=request, timeout=120)
        except httpx.RemoteProtocolError:
            # Only a body the upstream itself broke off may end without its end.
            assert isinstance(answer, SSE) and answer.break_after
            return
        upstream_status = answer.status if isinstance(answer, Raw) else 200
        if response.status_code >= 400 and response.status_code != upstream_status:
            error = assert_openai_error(response.content)  # the proxy's own error
            assert response.status_code != 500 and error["code"] != "proxy_internal_error"
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            assert b"proxy_internal_error" not in response.content

    exchange()
