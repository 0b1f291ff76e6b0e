"""Pruning in /v1/chat/completions with meta-tools handled by the proxy (issue #4).

Real servers on loopback: the proxy (default embedded embedder) in front of the scripted
test upstream; the official ``openai`` SDK or httpx as client.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import openai
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import free_port
from benchmarks.support.upstream import SSE, Chat, Hang, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.sse import chat_chunks, parse_sse

PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def load_call(*tool_names: str, call_id: str = "meta_1") -> dict[str, str]:
    return {"id": call_id, "name": "load_tools", "arguments": json.dumps({"names": list(tool_names)})}


def post(proxy: str, body: dict[str, Any], **headers: str | bytes) -> httpx.Response:
    return httpx.post(proxy + "/v1/chat/completions", json=body, headers=headers, timeout=60)


@pytest.fixture
def pruning_proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def test_plain_load_tools_call_is_answered_by_the_proxy_and_reissued(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    upstream.upstream.script(
        Chat(content=None, tool_calls=[load_call("browser_cookie_set")], usage={"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}),
        Chat(content="done", usage={"prompt_tokens": 150, "completion_tokens": 3, "total_tokens": 153}),
    )
    client = openai.OpenAI(base_url=pruning_proxy + "/v1", api_key="k")
    raw = client.chat.completions.with_raw_response.create(model="m", messages=ASK, tools=PLAYWRIGHT)
    result = raw.parse()
    assert result.choices[0].message.content == "done"
    assert result.choices[0].message.tool_calls is None
    assert result.usage.prompt_tokens == 250 and result.usage.completion_tokens == 10
    assert raw.headers["x-tool-pruning-tools"].endswith("/69")

    first, second = chat_requests(upstream)
    first_tools, second_tools = names(first.json()["tools"]), names(second.json()["tools"])
    assert "load_tools" in first_tools and "browser_cookie_set" not in first_tools
    assert "browser_take_screenshot" in first_tools
    assert len(first_tools) <= 6 + 1
    loaded = next(t for t in second.json()["tools"] if t["function"]["name"] == "browser_cookie_set")
    assert loaded == next(t for t in PLAYWRIGHT if t["function"]["name"] == "browser_cookie_set")
    # The meta-tool comes after the first request's tools and keeps its place and text;
    # loaded tools follow it, so the whole first tool block stays the cached prefix.
    assert first_tools[-1] == "load_tools"
    assert second_tools == [*first_tools, "browser_cookie_set"]
    assistant, answer = second.json()["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == answer["tool_call_id"] == "meta_1"
    assert json.loads(answer["content"])["loaded"] == ["browser_cookie_set"]
    assert "load_tools" not in json.dumps(result.model_dump())


def test_streaming_load_tools_call_continues_in_the_same_response(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    upstream.upstream.script(
        Chat(content="Let me load it. ", tool_calls=[load_call("browser_cookie_set")]),
        Chat(content="Cookie set.", tool_calls=[{"id": "c2", "name": "browser_cookie_set", "arguments": '{"name":"a","value":"b"}'}]),
    )
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": True,
            "stream_options": {"include_usage": True}}
    response = post(pruning_proxy, body)
    assert response.headers.get_list("cache-control") == ["no-cache"]  # the upstream's, once
    events = parse_sse(response.content)
    chunks = chat_chunks(response.content)
    assert events.count("[DONE]") == 1 and events[-1] == "[DONE]"
    roles = [c for c in chunks if c["choices"] and "role" in c["choices"][0]["delta"]]
    assert len(roles) == 1
    usage_chunks = [c for c in chunks if c.get("usage")]
    assert len(usage_chunks) == 1 and usage_chunks[0]["choices"] == []
    first, second = chat_requests(upstream)
    expected_prompt = len(first.body) // 4 + len(second.body) // 4
    assert usage_chunks[0]["usage"]["prompt_tokens"] == expected_prompt
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Let me load it. Cookie set."
    calls = [d for c in chunks if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls") or []]
    assert {d["index"] for d in calls} == {0}
    assert calls[0]["function"]["name"] == "browser_cookie_set"
    assert "load_tools" not in response.text
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishes == ["tool_calls"]


def test_meta_rounds_are_bounded_then_meta_tools_are_withdrawn(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(max_tools=6, top_k=4, max_meta_rounds=2)
    upstream.upstream.script(*[Chat(content=None, tool_calls=[load_call("browser_resize", call_id=f"m{i}")]) for i in range(3)])
    response = post(proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT})
    sent = chat_requests(upstream)
    assert len(sent) == 3
    assert ["load_tools" in names(r.json()["tools"]) for r in sent] == [True, True, False]
    message = response.json()["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert response.json()["choices"][0]["finish_reason"] == "stop"


def test_mixed_meta_and_real_calls_return_the_real_ones_and_load_for_next_turn(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    real = {"id": "r1", "name": "browser_navigate", "arguments": '{"url": "https://example.com"}'}
    upstream.upstream.script(Chat(content=None, tool_calls=[load_call("browser_pdf_save"), real]))
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT},
                    **{"X-Conversation-Id": "mixed"})
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["browser_navigate"]
    assert len(chat_requests(upstream)) == 1
    follow_up = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "r1", "type": "function", "function": {"name": "browser_navigate", "arguments": real["arguments"]}}]},
        {"role": "tool", "tool_call_id": "r1", "content": "navigated"}]
    post(pruning_proxy, {"model": "m", "messages": follow_up, "tools": PLAYWRIGHT}, **{"X-Conversation-Id": "mixed"})
    assert "browser_pdf_save" in names(chat_requests(upstream)[-1].json()["tools"])


def test_unknown_names_get_nearest_match_suggestions(upstream: RunningUpstream, pruning_proxy: str) -> None:
    upstream.upstream.script(Chat(content=None, tool_calls=[load_call("browser_cookies_set")]), Chat(content="ok"))
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT})
    answer = json.loads(chat_requests(upstream)[1].json()["messages"][-1]["content"])
    assert answer["loaded"] == []
    assert "browser_cookie_set" in answer["unknown"]["browser_cookies_set"]["did_you_mean"]


def test_named_tool_choice_is_forwarded_without_meta_tools(upstream: RunningUpstream, pruning_proxy: str) -> None:
    choice = {"type": "function", "function": {"name": "browser_pdf_save"}}
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "tool_choice": choice})
    sent = chat_requests(upstream)[-1].json()
    assert "browser_pdf_save" in names(sent["tools"]) and "load_tools" not in names(sent["tools"])
    assert sent["tool_choice"] == choice


def test_tool_choice_none_prunes_without_meta_tools(upstream: RunningUpstream, pruning_proxy: str) -> None:
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "tool_choice": "none"})
    sent = chat_requests(upstream)[-1].json()
    assert 0 < len(sent["tools"]) <= 6 and "load_tools" not in names(sent["tools"])


def test_allowed_tools_restricts_the_catalogue(upstream: RunningUpstream, pruning_proxy: str) -> None:
    allowed = [t["function"]["name"] for t in PLAYWRIGHT[20:45]]
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": n}} for n in allowed]}}
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "tool_choice": choice})
    sent = chat_requests(upstream)[-1].json()
    forwarded = [n for n in names(sent["tools"]) if n != "load_tools"]
    assert forwarded and set(forwarded) <= set(allowed)
    assert sent["tool_choice"] == "required"
    enum = next(t for t in sent["tools"] if t["function"]["name"] == "load_tools")["function"]["parameters"]
    assert set(enum["properties"]["names"]["items"]["enum"]) == set(allowed)


def test_legacy_functions_are_pruned_and_function_call_loads(upstream: RunningUpstream, pruning_proxy: str) -> None:
    functions = [t["function"] for t in PLAYWRIGHT]
    upstream.upstream.script(Chat(content="ok"))
    post(pruning_proxy, {"model": "m", "messages": ASK, "functions": functions})
    sent = chat_requests(upstream)[-1].json()
    assert "tools" not in sent
    assert "load_tools" in names(sent["functions"]) and len(sent["functions"]) <= 7
    assert all("type" not in f for f in sent["functions"])


def test_dry_run_reports_but_forwards_the_original_bytes(upstream: RunningUpstream, pruning_proxy: str) -> None:
    raw = json.dumps({"model": "m", "messages": ASK, "tools": PLAYWRIGHT}).encode()
    response = httpx.post(pruning_proxy + "/v1/chat/completions", content=raw,
                          headers={"X-Tool-Pruning": "dry-run", "content-type": "application/json"}, timeout=60)
    assert chat_requests(upstream)[-1].body == raw
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert int(forwarded) <= 6 and offered == "69"
    assert response.headers["x-tool-pruning-dry-run"] == "69/69"  # what went: all of them


@pytest.mark.parametrize("mode", ["on", "dry-run"])
def test_an_unreachable_upstream_answer_still_reports_the_selection(
    start_proxy: ProxyFactory, mode: str
) -> None:
    proxy = start_proxy(upstream_url=f"http://127.0.0.1:{free_port()}/v1", connect_retries=0)
    response = httpx.post(proxy + "/v1/chat/completions", headers={"X-Tool-Pruning": mode},
                          json={"model": "m", "messages": ASK, "tools": PLAYWRIGHT}, timeout=60)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert 0 < int(forwarded) < 69 and offered == "69"


@pytest.mark.parametrize("how", ["header", "env"])
def test_pruning_can_be_switched_off(upstream: RunningUpstream, start_proxy: ProxyFactory, how: str) -> None:
    proxy = start_proxy(enabled=how != "env")
    raw = json.dumps({"model": "m", "messages": ASK, "tools": PLAYWRIGHT}).encode()
    headers = {"content-type": "application/json", **({"X-Tool-Pruning": "off"} if how == "header" else {})}
    response = httpx.post(proxy + "/v1/chat/completions", content=raw, headers=headers)
    assert chat_requests(upstream)[-1].body == raw
    assert "x-tool-pruning-tools" not in response.headers
    assert 'toolprune_requests_total{api="chat_completions",decision="disabled",path="none"} 1.0' in httpx.get(proxy + "/metrics").text


def test_small_catalogues_and_n_above_one_pass_through(upstream: RunningUpstream, pruning_proxy: str) -> None:
    for body in ({"model": "m", "messages": ASK, "tools": PLAYWRIGHT[:8]},
                 {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "n": 2}):
        raw = json.dumps(body).encode()
        httpx.post(pruning_proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        assert chat_requests(upstream)[-1].body == raw


def test_embedder_failure_forwards_the_full_catalogue(upstream: RunningUpstream, start_proxy: ProxyFactory) -> None:
    from benchmarks.support.upstream import Raw

    proxy = start_proxy(embedder="upstream", embedder_model="e")
    upstream.upstream.script(Raw(500, {"error": {"message": "no embedding model"}}), path="/embeddings")
    raw = json.dumps({"model": "m", "messages": ASK, "tools": PLAYWRIGHT}).encode()
    response = httpx.post(proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert chat_requests(upstream)[-1].body == raw
    metrics = httpx.get(proxy + "/metrics").text
    assert 'toolprune_fallbacks_total{reason="embedder_error"} 1.0' in metrics


def test_hostile_catalogue_is_forwarded_unchanged(upstream: RunningUpstream, pruning_proxy: str) -> None:
    hostile = [*PLAYWRIGHT, {"type": "function", "function": {"name": "bad name with spaces!"}}, 42]
    raw = json.dumps({"model": "m", "messages": ASK, "tools": hostile}).encode()
    response = httpx.post(pruning_proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200 and chat_requests(upstream)[-1].body == raw


def test_disconnect_while_buffering_a_meta_call_cancels_the_upstream(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    gate = threading.Event()  # never set
    meta_delta = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "m1", "type": "function",
                  "function": {"name": "load_tools", "arguments": ""}}]}, "finish_reason": None}]}
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    upstream.upstream.script(SSE([f"data: {json.dumps(role)}\n\n".encode(),
                                  f"data: {json.dumps(meta_delta)}\n\n".encode()], gate=gate, gate_after=2))
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": True}
    with httpx.stream("POST", pruning_proxy + "/v1/chat/completions", json=body, timeout=60) as response:
        first = next(response.iter_raw())
        assert b"load_tools" not in first
        upstream.upstream.wait_for_requests(1)
    index = len(upstream.upstream.requests) - 1
    assert upstream.upstream.wait_cancelled(index)


def test_multi_turn_stickiness_history_pins_and_stable_tools(upstream: RunningUpstream, pruning_proxy: str) -> None:
    conversation = {"X-Conversation-Id": "conv-7"}
    upstream.upstream.script(Chat(content=None, tool_calls=[load_call("browser_pdf_save")]), Chat(content="loaded"))
    post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}, **conversation)
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [{"id": "x1", "type": "function",
               "function": {"name": "browser_mouse_wheel", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "x1", "content": "scrolled"}]
    post(pruning_proxy, {"model": "m", "messages": history, "tools": PLAYWRIGHT}, **conversation)
    turn2 = chat_requests(upstream)[-1].json()["tools"]
    post(pruning_proxy, {"model": "m", "messages": history, "tools": PLAYWRIGHT}, **conversation)
    turn3 = chat_requests(upstream)[-1].json()["tools"]
    assert "browser_pdf_save" in names(turn3)  # loaded on turn 1
    assert "browser_mouse_wheel" in names(turn3)  # called in the history
    assert json.dumps(turn3) == json.dumps(turn2)  # nothing admitted: identical list


def test_real_github_catalogue_goes_through_end_to_end(upstream: RunningUpstream, start_proxy: ProxyFactory) -> None:
    proxy = start_proxy()
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="k")
    ask = [{"role": "user", "content": "List the open pull requests in octocat/hello-world"}]
    raw = client.chat.completions.with_raw_response.create(model="m", messages=ask, tools=GITHUB)
    assert raw.parse().choices[0].message.content == "ok"
    forwarded, offered = raw.headers["x-tool-pruning-tools"].split("/")
    assert offered == "117" and int(forwarded) <= 16
    sent = chat_requests(upstream)[-1]
    assert "list_pull_requests" in names(sent.json()["tools"])
    assert len(sent.body) < len(json.dumps(GITHUB)) / 3


def test_a_one_intent_request_that_names_a_tool_forwards_that_tool_only(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    one = [{"role": "user", "content": "List the open pull requests in octo/widgets"}]
    assert post(proxy, {"model": "m", "messages": one, "tools": GITHUB}).status_code == 200
    sent = names(chat_requests(upstream)[-1].json()["tools"])
    assert sent == ["list_pull_requests", "search_tools"]
    # Two requests in one sentence: the whole budget, as without a named tool.
    two = [{"role": "user", "content": "List the open pull requests in octo/widgets and merge the oldest"}]
    assert post(proxy, {"model": "m", "messages": two, "tools": GITHUB}).status_code == 200
    sent = names(chat_requests(upstream)[-1].json()["tools"])
    assert "list_pull_requests" in sent and "merge_pull_request" in sent and len(sent) > 3


def test_lone_surrogates_in_tools_and_messages_are_pruned_not_failed(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    tools = json.loads(json.dumps(PLAYWRIGHT).replace("Navigate to a URL", "Navigate \\ud800 to a URL"))
    messages = [{"role": "user", "content": "take a screenshot \udc00 now"}]
    raw = json.dumps({"model": "m", "messages": messages, "tools": tools}).encode()
    response = httpx.post(pruning_proxy + "/v1/chat/completions", content=raw,
                          headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 200
    assert response.headers["x-tool-pruning-tools"].endswith("/69")


@pytest.mark.parametrize(
    "headers",
    [{"X-Tool-Pruning-Top-K": "9" * 5000}, {"X-Tool-Pruning-Top-K": "-1"},
     {"X-Tool-Pruning-Top-K": "abc"}, {"X-Tool-Pruning": "sometimes"},
     # Latin-1 superscript two: a digit to str.isdigit(), not to int().
     {"X-Tool-Pruning-Top-K": b"\xb2"}],
)
def test_invalid_toolprune_headers_get_a_clear_400(
    upstream: RunningUpstream, pruning_proxy: str, headers: dict[str, str | bytes]
) -> None:
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}, **headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_toolprune_header"
    assert chat_requests(upstream) == []


@pytest.mark.parametrize(
    ("name", "values"),
    [("X-Tool-Pruning-Top-K", ("4", "abc")), ("X-Tool-Pruning", ("on", "off")),
     ("X-Conversation-Id", ("a", "b"))],
)
def test_a_control_header_sent_twice_with_different_values_is_a_400(
    upstream: RunningUpstream, pruning_proxy: str, name: str, values: tuple[str, str]
) -> None:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    twice = [(name, value) for value in values]
    response = httpx.post(pruning_proxy + "/v1/chat/completions", json=body, headers=twice, timeout=60)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_toolprune_header"
    assert "more than once" in response.json()["error"]["message"]
    same = [(name, values[0]), (name, values[0])]  # a repeated identical value is one value
    response = httpx.post(pruning_proxy + "/v1/chat/completions", json=body, headers=same, timeout=60)
    assert response.status_code == 200
    assert len(chat_requests(upstream)) == 1


def test_the_top_k_header_sets_this_requests_top_k(upstream: RunningUpstream, pruning_proxy: str) -> None:
    # Top-k is a token budget (k × the catalogue's mean tool tokens): at k = 2 the large
    # screenshot tool fills it alone; k = 8 admits more, k = 0 nothing.
    # Each its own conversation's first turn (a later turn also admits insurance tools).
    def forwarded(k: str) -> int:
        response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT},
                        **{"X-Tool-Pruning-Top-K": k, "X-Tool-Pruning": "Dry-Run",
                           "X-Conversation-Id": f"top-k-{k}"})
        count, offered = response.headers["x-tool-pruning-tools"].split("/")
        assert offered == "69"
        return int(count)

    assert forwarded("0") == 0
    assert 1 <= forwarded("2") <= 2 < forwarded("8")


def test_meta_call_arguments_sent_as_an_object_are_understood(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    from benchmarks.support.upstream import Raw

    call = {"id": "m1", "type": "function",
            "function": {"name": "load_tools", "arguments": {"names": ["browser_pdf_save"]}}}
    upstream.upstream.script(
        Raw(200, {"id": "x", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
             "finish_reason": "tool_calls"}]}),
        Chat(content="done"),
    )
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT})
    assert response.json()["choices"][0]["message"]["content"] == "done"
    assert "browser_pdf_save" in names(chat_requests(upstream)[-1].json()["tools"])


def test_an_upstream_answer_the_proxy_cannot_read_is_invalid_where_it_must_read_it(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    """JSON that is not a chat completion: with ``load_tools`` offered the proxy must read
    the answer, so it is ``upstream_invalid_response``; with no meta-tool offered
    (``tool_choice`` none) it is the client's alone and relayed as is (docs/apis.md)."""
    from benchmarks.support.upstream import Raw

    odd = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": "plain text"}]}
    upstream.upstream.script(Raw(200, odd), Raw(200, odd))
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_invalid_response"
    response = post(pruning_proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT,
                                    "tool_choice": "none"})
    assert response.status_code == 200 and response.json() == odd


def test_allowed_tools_naming_no_known_tool_is_forwarded_unchanged(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}
    raw = json.dumps({"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "tool_choice": choice}).encode()
    httpx.post(pruning_proxy + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert chat_requests(upstream)[-1].body == raw


def chats_in(records: list[Any]) -> int:
    return sum(1 for record in records if record.path.endswith("/chat/completions"))


def test_concurrent_turns_of_one_conversation_keep_each_others_loads(
    upstream: RunningUpstream, pruning_proxy: str
) -> None:
    """Two requests of one conversation are planned from the same state; each loads a
    different tool. The second to save must not overwrite the first's load."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.support.upstream import Slow

    conversation = {"X-Conversation-Id": "concurrent"}
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    first_gate, second_gate = threading.Event(), threading.Event()
    upstream.upstream.script(
        Slow(first_gate, Chat(content=None, tool_calls=[load_call("browser_pdf_save")])),
        Slow(second_gate, Chat(content=None, tool_calls=[load_call("browser_mouse_wheel")])),
        Chat(content="done"),
        Chat(content="done"),
    )
    with ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(post, pruning_proxy, body, **conversation) for _ in range(2)]
        # Counting chat requests: the proxy also asks the upstream for /props. Generous
        # timeouts: the first request indexes the catalogue on a possibly busy CPU.
        upstream.upstream.wait_for(lambda records: chats_in(records) >= 2, 120)  # same state
        first_gate.set()
        upstream.upstream.wait_for(lambda records: chats_in(records) >= 3, 120)  # re-issued
        second_gate.set()
        assert all(answer.result().status_code == 200 for answer in answers)
    post(pruning_proxy, body, **conversation)
    forwarded = names(chat_requests(upstream)[-1].json()["tools"])
    assert {"browser_pdf_save", "browser_mouse_wheel"} <= set(forwarded)


def test_large_catalogues_get_search_tools_which_loads_by_the_models_words(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()  # GitHub's 117 tools exceed search_tools_min_catalog (100)
    search = {"id": "s1", "name": "search_tools",
              "arguments": json.dumps({"query": "star a repository"})}
    upstream.upstream.script(Chat(content=None, tool_calls=[search]), Chat(content="starred"))
    ask = [{"role": "user", "content": "List the open pull requests in octocat/hello-world"}]
    response = post(proxy, {"model": "m", "messages": ask, "tools": GITHUB, "stream": True})
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chat_chunks(response.content) if c["choices"])
    assert "search_tools" not in response.text and text == "starred"
    first, second = chat_requests(upstream)
    first_tools = names(first.json()["tools"])
    assert "search_tools" in first_tools and "load_tools" not in first_tools
    assert "star_repository" not in first_tools
    assert "star_repository" in names(second.json()["tools"])
    answer = json.loads(second.json()["messages"][-1]["content"])
    assert "star_repository" in answer["loaded"]


def test_a_retried_request_reuses_the_cached_query_vector(upstream: RunningUpstream, pruning_proxy: str) -> None:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    post(pruning_proxy, body)
    texts = httpx.get(pruning_proxy + "/metrics").text
    assert 'toolprune_query_texts_total{source="cache"} 0.0' in texts
    embedded = next(line for line in texts.splitlines() if line.startswith('toolprune_query_texts_total{source="embedder"}'))
    assert post(pruning_proxy, body).status_code == 200
    after = httpx.get(pruning_proxy + "/metrics").text
    assert embedded in after  # nothing more embedded for the retry
    assert 'toolprune_query_texts_total{source="cache"} 1.0' in after
    assert "toolprune_query_batches_total 1.0" in after


def test_a_retry_after_an_upstream_error_forwards_the_same_prompt(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """OpenAI's SDKs retry 429 and 5xx answers with the same body: the retry must find the
    upstream's cached prefix, so it forwards the same tools in the same order, and a third
    identical request (a retry after the success) too. (The catalogue is indexed before the
    first: a first request ranked by BM25 while its index builds keeps its tools, and a
    later one may add the dense ranking's best.)"""
    proxy = start_proxy()
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    upstream.upstream.script(Raw(500, {"error": {"message": "busy"}}), Chat(content="ok"), Chat(content="ok"))
    assert post(proxy, body).status_code == 500
    assert post(proxy, body).status_code == 200
    assert post(proxy, body).status_code == 200
    first, retry, again = (r.json() for r in chat_requests(upstream)[-3:])
    assert first == retry == again


@pytest.mark.parametrize("stream", [False, True])
def test_a_pruned_request_the_upstream_times_out_says_what_was_pruned(
    upstream: RunningUpstream, start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = start_proxy(idle_timeout_s=0.3)
    upstream.upstream.script(Hang())
    response = post(proxy, {"model": "m", "messages": ASK, "tools": PLAYWRIGHT, "stream": stream})
    assert response.status_code == 504 and response.json()["error"]["code"] == "upstream_timeout"
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert offered == str(len(PLAYWRIGHT)) and 0 < int(forwarded) < len(PLAYWRIGHT)
