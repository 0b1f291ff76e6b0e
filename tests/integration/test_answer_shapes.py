"""Upstream answer shapes the proxy used to refuse or reshape (issue #34, items 2 to 4):
a streamed call renumbered after its first delta is one call, and its meta-call runs; a
tool-call entry with neither a name nor arguments is dropped, with a decision-log note,
and the answer's text reaches the client; ``usage`` stays where the upstream put it
(llama-server: in the finish chunk, with ``timings``) for a client that did not ask for
it, and comes in its own chunk, as OpenAI's reference says, for one that did.

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream, which
plays the answers event by event; pruning active on the 69-tool Playwright catalogue.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.upstream import SSE, Chat, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.fault_matrix import proves
from tests.support.logs import Lines
from tests.support.openai_schema import check_completion, check_stream
from tests.support.sse import chat_chunks

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
LOADED = "browser_cookie_set"
LOAD_USAGE = {"prompt_tokens": 900, "completion_tokens": 9, "total_tokens": 909}
FINAL_USAGE = {"prompt_tokens": 1000, "completion_tokens": 3, "total_tokens": 1003}
TIMINGS = {"cache_n": 880, "prompt_n": 120, "prompt_ms": 95.5, "predicted_n": 3, "predicted_ms": 40.1}


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **fields: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return event({"id": "chatcmpl-w", "object": "chat.completion.chunk", "created": 1,
                  "model": "m", "choices": choices, **fields})


DONE = b"data: [DONE]\n\n"


def post(proxy: str, stream: bool, request_id: str, **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": stream, **extra}
    return httpx.post(proxy + "/v1/chat/completions", json=body, timeout=60,
                      headers={"X-Request-Id": request_id})


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def final_message(response: httpx.Response, stream: bool) -> tuple[dict[str, Any], str | None]:
    assert response.status_code == 200, response.text[:500]
    if stream:
        report = check_stream(response.content)
        assert report.error is None
        return report.message, report.finish_reason
    body = response.json()
    return check_completion(body), body["choices"][0]["finish_reason"]


# --- item 2: a call renumbered after its first delta --------------------------------------
@proves(
    fault="a streamed hidden `load_tools` call renumbered after its first delta (opened at index 9 with its id, its argument fragments at index 0 without one)",
    phase="inside a hidden meta-call",
    client="the answer of the next round: the fragments continue the only call open, the load runs and the request is re-issued",
)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_fragments_at_another_index_continue_the_only_open_call(
    upstream: RunningUpstream, proxy: str, stream: bool
) -> None:
    opening = {"index": 9, "id": "m", "type": "function",
               "function": {"name": "load_tools", "arguments": ""}}
    fragments = ['{"names": ', f'["{LOADED}"]', "}"]
    upstream.upstream.script(
        SSE([chunk({"role": "assistant", "content": None}), chunk({"tool_calls": [opening]}),
             *(chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments),
             chunk({}, "tool_calls"), DONE]),
        Chat(content="done"),
    )
    message, finish = final_message(post(proxy, stream, "renumbered"), stream)
    assert message["content"] == "done" and finish == "stop"
    assert "tool_calls" not in message or not message["tool_calls"]
    first, again = chat_requests(upstream)
    assert LOADED not in [t["function"]["name"] for t in first.json()["tools"]]
    assert LOADED in [t["function"]["name"] for t in again.json()["tools"]]
    exchange = again.json()["messages"][len(ASK):]
    assert exchange[0]["tool_calls"][0]["function"] == {
        "name": "load_tools", "arguments": json.dumps({"names": [LOADED]})}
    assert json.loads(exchange[1]["content"])["loaded"] == [LOADED]


# --- item 3: an entry with neither a name nor arguments -----------------------------------
def empty_entry_answer(stream: bool) -> Raw | SSE:
    if not stream:
        message = {"role": "assistant", "content": "done", "tool_calls": [{"id": "", "type": "function"}]}
        return Raw(200, {"id": "chatcmpl-e", "object": "chat.completion", "created": 1, "model": "m",
                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                         "usage": FINAL_USAGE})
    return SSE([chunk({"role": "assistant", "content": ""}), chunk({"content": "done"}),
                chunk({"tool_calls": [{"index": 0, "id": "", "type": "function"}]}),
                chunk({}, "tool_calls"), DONE])


@proves(
    fault="an answer with content and a tool-call entry that names no function and carries no arguments (`{\"id\": \"\", \"type\": \"function\"}`), plain or streamed",
    phase="in a plain answer",
    client="the content, `finish_reason: stop` and no call: the entry is dropped, with a note in the decision log",
)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_an_entry_with_neither_name_nor_arguments_is_dropped_and_the_content_kept(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, stream: bool
) -> None:
    upstream.upstream.script(empty_entry_answer(stream))
    request_id = f"empty-entry-{stream}"
    message, finish = final_message(post(proxy, stream, request_id), stream)
    assert message["content"] == "done" and finish == "stop"
    assert not message.get("tool_calls")
    assert len(chat_requests(upstream)) == 1
    decision = log_lines.wait_for("pruning_decision", request_id)
    assert decision["notes"] == ["dropped 1 tool-call entry with neither a function name nor arguments"]


# --- item 4: usage where the upstream put it ----------------------------------------------
def llama_answer(content: str | None, usage: dict[str, int], call: dict[str, Any] | None = None) -> SSE:
    """llama-server's stream to a client that did not ask for usage: ``usage`` and
    ``timings`` in the finish chunk (ggml-org/llama.cpp#15443)."""
    deltas = [chunk({"role": "assistant", "content": content})]
    if call is not None:
        deltas.append(chunk({"tool_calls": [call]}))
    finish = "tool_calls" if call is not None else "stop"
    return SSE([*deltas, chunk({}, finish, usage=usage, timings=TIMINGS), DONE])


def load_call() -> dict[str, Any]:
    return {"index": 0, "id": "meta_0", "type": "function",
            "function": {"name": "load_tools", "arguments": json.dumps({"names": [LOADED]})}}


@proves(
    fault="a streamed answer to a client that did not ask for usage, with `usage` and `timings` in the finish chunk (llama-server), over a hidden meta round",
    phase="while the answer streams",
    client="the finish chunk with `usage` (summed over the rounds) and `timings` as the upstream sent them; no chunk with empty `choices`",
)
def test_usage_stays_in_the_finish_chunk_for_a_client_that_did_not_ask(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(llama_answer(None, LOAD_USAGE, load_call()),
                             llama_answer("done", FINAL_USAGE))
    response = post(proxy, True, "usage-not-asked")
    assert response.status_code == 200
    report = check_stream(response.content, include_usage=False)
    assert report.message["content"] == "done" and len(chat_requests(upstream)) == 2
    chunks = chat_chunks(response.content)
    assert all(c["choices"] for c in chunks), "a chunk with empty choices the client never asked for"
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"] == {key: LOAD_USAGE[key] + FINAL_USAGE[key] for key in LOAD_USAGE}
    assert last["timings"] == TIMINGS
    assert all("usage" not in c for c in chunks[:-1])


def test_a_client_that_asked_for_usage_gets_its_usage_chunk(
    upstream: RunningUpstream, proxy: str
) -> None:
    upstream.upstream.script(llama_answer(None, LOAD_USAGE, load_call()),
                             llama_answer("done", FINAL_USAGE))
    response = post(proxy, True, "usage-asked", stream_options={"include_usage": True})
    report = check_stream(response.content)
    assert report.usage == {key: LOAD_USAGE[key] + FINAL_USAGE[key] for key in LOAD_USAGE}
    chunks = chat_chunks(response.content)
    assert chunks[-1]["choices"] == [] and chunks[-1]["timings"] == TIMINGS
    # OpenAI's reference: every other chunk has "usage": null.
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
