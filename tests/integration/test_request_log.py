"""One log line per proxied request at ``info`` (issue #27, item 4): request id, route,
decision, status and the upstream's time to first and to last byte — for pruned,
pruning-off and pass-through requests and upstream errors alike — and the first- and
last-byte histograms beside ``toolprune_upstream_seconds`` (time to headers).

Real servers on loopback: the proxy under uvicorn in front of the scripted upstream;
the proxy's log records are collected from the ``toolprune`` logger.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from benchmarks.support.upstream import Chat, Raw
from tests.conftest import ProxyFactory, RunningUpstream
from tests.integration.test_stream_faults import PATHS, SUFFIX, request_body
from tests.support.logs import Lines
from tests.support.sse import chat_chunks

FIELDS = {"request_id", "method", "route", "decision", "fallback_reason", "status", "complete",
          "duration_ms", "upstream_rounds", "upstream_first_byte_ms", "upstream_last_byte_ms"}


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    return start_proxy(max_tools=6, top_k=4, threshold=0.0)


def line_of(lines: Lines, request_id: str) -> dict[str, Any]:
    line = lines.wait_for("request", request_id)
    assert set(line) == FIELDS
    return line


def stream_with_a_load_round(upstream: RunningUpstream, proxy: str, request_id: str) -> httpx.Response:
    """A streamed chat request whose first upstream round calls ``load_tools`` (loading
    ``browser_cookie_set``) and whose second answers "done"."""
    load = json.dumps({"names": ["browser_cookie_set"]})
    upstream.upstream.script(Chat(content=None, tool_calls=[{"id": "m", "name": "load_tools", "arguments": load}]),
                             Chat(content="done"))
    response = httpx.post(proxy + PATHS["chat"], json=request_body("chat"), timeout=300,
                          headers={"X-Request-Id": request_id})
    assert response.status_code == 200
    return response


def test_a_pruned_stream_logs_one_line_with_its_upstream_times(
    upstream: RunningUpstream, proxy: str, log_lines: Lines
) -> None:
    response = stream_with_a_load_round(upstream, proxy, "req-pruned-1")
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chat_chunks(response.content) if c["choices"]) == "done"
    line = line_of(log_lines, "req-pruned-1")
    assert (line["method"], line["route"], line["decision"], line["status"], line["complete"]) == (
        "POST", "chat_completions", "pruned", 200, True)
    assert line["fallback_reason"] is None
    assert line["upstream_rounds"] == 2
    assert 0 <= line["upstream_first_byte_ms"] <= line["upstream_last_byte_ms"] <= line["duration_ms"]
    assert log_lines.wait_for("pruning_decision", "req-pruned-1")["decision"] == "pruned"
    metrics = httpx.get(proxy + "/metrics").text
    for name in ("toolprune_upstream_first_byte_seconds", "toolprune_upstream_last_byte_seconds",
                 "toolprune_upstream_seconds"):
        assert f'{name}_count{{route="chat_completions"}} 2.0' in metrics


def test_a_decision_after_a_load_tools_round_keeps_each_tools_first_reason(
    upstream: RunningUpstream, proxy: str, log_lines: Lines
) -> None:
    """The line describes the last round's tools; those the first round chose keep its
    reasons (the re-selection finds them stored as loaded), the loaded one is
    ``requested``. A new conversation on a fresh proxy: no tool of it is ``sticky``."""
    stream_with_a_load_round(upstream, proxy, "req-reasons-1")
    decision = log_lines.wait_for("pruning_decision", "req-reasons-1")
    assert decision["rounds"] == 1 and decision["turn"] == 1
    reasons = decision["reasons"]
    assert reasons["browser_cookie_set"] == "requested"
    assert len(reasons) > 1 and "sticky" not in reasons.values(), reasons


@pytest.mark.parametrize(
    ("headers", "path", "method", "decision", "route"),
    [
        ({"X-Tool-Pruning": "off"}, "/v1/chat/completions", "POST", "disabled", "chat_completions"),
        ({}, "/v1/models", "GET", None, "models"),
        ({}, "/v1/messages", "POST", "passthrough", "messages"),
    ],
)
def test_requests_not_pruned_log_their_line_too(
    upstream: RunningUpstream, proxy: str, log_lines: Lines,
    headers: dict[str, str], path: str, method: str, decision: str | None, route: str,
) -> None:
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.request(method, proxy + path, json=body if method == "POST" else None,
                             headers={**headers, "X-Request-Id": "req-x"}, timeout=60)
    assert response.status_code == 200
    line = line_of(log_lines, "req-x")
    assert (line["route"], line["decision"], line["status"], line["upstream_rounds"]) == (route, decision, 200, 1)
    assert line["upstream_last_byte_ms"] is not None


@pytest.mark.parametrize("status", [400, 502])
def test_upstream_errors_log_their_status(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, status: int
) -> None:
    upstream.upstream.script(Raw(status, {"error": {"message": "no", "type": "x", "param": None, "code": None}}))
    body = {**request_body("chat"), "stream": False}
    response = httpx.post(proxy + PATHS["chat"], json=body, timeout=300, headers={"X-Request-Id": "req-e"})
    assert response.status_code == status
    line = line_of(log_lines, "req-e")
    assert (line["decision"], line["status"], line["upstream_rounds"]) == ("pruned", status, 1)


def test_a_refused_request_logs_its_line(proxy: str, log_lines: Lines) -> None:
    response = httpx.get(proxy + "/v1//models", headers={"X-Request-Id": "req-p"})
    assert response.status_code == 400
    line = line_of(log_lines, "req-p")
    assert (line["status"], line["upstream_rounds"], line["upstream_first_byte_ms"]) == (400, 0, None)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_tools_entries_that_are_not_objects_are_forwarded_as_a_fallback_on_every_api(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, api: str
) -> None:
    request_id = f"req-n-{api}"
    body = {**request_body(api), "tools": [1, "x"], "stream": False}
    response = httpx.post(proxy + PATHS[api], json=body, timeout=300,
                          headers={"X-Request-Id": request_id})
    forwarded = json.loads(upstream.upstream.requests[-1].body)
    assert forwarded["tools"] == [1, "x"]  # unchanged
    line = line_of(log_lines, request_id)
    assert (line["decision"], line["fallback_reason"]) == ("fallback", "catalog_error")
    # The client sees why too, and no count of a pruning that did not happen.
    assert response.headers["x-tool-pruning-fallback"] == "catalog_error"
    assert "x-tool-pruning-tools" not in response.headers


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_tools_null_is_no_tools_on_every_api(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, api: str
) -> None:
    """``"tools": null`` is a request without tools (passed through), not a catalogue the
    proxy failed to read (a fallback, counted and logged as an error)."""
    request_id = f"req-null-{api}"
    body = {**request_body(api), "tools": None, "stream": False}
    response = httpx.post(proxy + PATHS[api], json=body, timeout=300,
                          headers={"X-Request-Id": request_id})
    assert json.loads(upstream.upstream.requests[-1].body)["tools"] is None  # unchanged
    assert "x-tool-pruning-fallback" not in response.headers
    line = line_of(log_lines, request_id)
    assert (line["decision"], line["fallback_reason"]) == ("passthrough", None)


def test_each_fallback_names_its_reason_though_the_reasons_line_is_rate_limited(
    upstream: RunningUpstream, proxy: str, log_lines: Lines
) -> None:
    body = request_body("chat")
    huge = {"type": "function", "function": {"name": "huge", "description": "x" * 300_000,
                                             "parameters": {"type": "object"}}}
    for request_id, tools in (("req-f1", [1, "x"]), ("req-f2", [*body["tools"], huge])):
        response = httpx.post(proxy + PATHS["chat"], json={**body, "tools": tools}, timeout=300,
                              headers={"X-Request-Id": request_id})
        assert response.status_code == 200
        line = line_of(log_lines, request_id)
        assert (line["decision"], line["fallback_reason"]) == ("fallback", "catalog_error")


def test_an_over_long_request_id_is_cut_to_a_prefix_and_the_cut_logged(
    upstream: RunningUpstream, proxy: str, log_lines: Lines
) -> None:
    """A 5,000-byte ``X-Request-Id`` is neither echoed nor forwarded whole: its first 128
    bytes are the request's id everywhere (response, upstream, log lines), and one line
    says it was cut; an id of 128 bytes is kept as sent."""
    sent = "agent-7/" + "a" * 4992
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(proxy + PATHS["chat"], json=body, timeout=60,
                          headers={"X-Request-Id": sent})
    kept = sent[:128]
    assert response.status_code == 200 and response.headers["x-request-id"] == kept
    assert upstream.upstream.requests[-1].header("x-request-id") == kept
    assert line_of(log_lines, kept)["status"] == 200
    cut = log_lines.wait_for("request_id_truncated", kept)
    assert cut["received_bytes"] == 5000 and cut["kept_bytes"] == 128
    exact = "b" * 128
    response = httpx.post(proxy + PATHS["chat"], json=body, timeout=60,
                          headers={"X-Request-Id": exact})
    assert response.headers["x-request-id"] == exact
    assert line_of(log_lines, exact)["status"] == 200
    assert [line["request_id"] for line in log_lines.events("request_id_truncated")] == [kept]


REFUSED = {  # a body each API refuses: its conversation of the wrong type
    "chat": ("messages", "hi", "messages is not a list"),
    "responses": ("input", 42, "input is neither a string nor a list of items"),
    "messages": ("messages", "hi", "messages is not a list"),
}


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_a_body_the_api_refuses_is_forwarded_and_logged_as_malformed(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, api: str, stream: bool, tools: bool
) -> None:
    """``"messages": "hi"``: not a request the proxy passes by (``passthrough``) nor one
    whose selection failed (``fallback``), but a body the API refuses: its bytes go to
    the upstream unchanged, whose answer (its 400) the client gets; decision and metric
    label ``malformed``, the decision line saying what is wrong."""
    field, value, reason = REFUSED[api]
    body = {**request_body(api), field: value, "stream": stream}
    if not tools:
        body.pop("tools")
    raw = json.dumps(body).encode()
    refusal = {"error": {"message": f"'{field}' is invalid", "type": "invalid_request_error",
                         "param": field, "code": None}}
    upstream.upstream.script(Raw(400, refusal), path=SUFFIX[api])
    request_id = f"req-malformed-{api}-{stream}-{tools}"
    response = httpx.post(proxy + PATHS[api], content=raw, timeout=60,
                          headers={"X-Request-Id": request_id, "content-type": "application/json"})
    assert (response.status_code, response.json()) == (400, refusal)
    assert upstream.upstream.requests[-1].body == raw
    line = line_of(log_lines, request_id)
    assert (line["decision"], line["fallback_reason"]) == ("malformed", None)
    decision = log_lines.wait_for("pruning_decision", request_id)
    assert (decision["decision"], decision["reason"]) == ("malformed", reason)
    label = {"chat": "chat_completions"}.get(api, api)
    metrics = httpx.get(proxy + "/metrics").text
    assert f'toolprune_requests_total{{api="{label}",decision="malformed",path="none"}}' in metrics


@pytest.mark.parametrize("raw", [b"not json", b'["an", "array"]'], ids=["not-json", "array"])
def test_a_body_that_is_not_a_json_object_is_malformed(
    upstream: RunningUpstream, proxy: str, log_lines: Lines, raw: bytes
) -> None:
    request_id = f"req-not-object-{len(raw)}"
    httpx.post(proxy + PATHS["chat"], content=raw, timeout=60,
               headers={"X-Request-Id": request_id, "content-type": "application/json"})
    assert upstream.upstream.requests[-1].body == raw
    assert line_of(log_lines, request_id)["decision"] == "malformed"
    reason = log_lines.wait_for("pruning_decision", request_id)["reason"]
    assert reason == ("the body is not a JSON object")
