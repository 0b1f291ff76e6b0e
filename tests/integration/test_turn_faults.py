"""Faults in an acting turn, parametrised over the three APIs (Chat Completions, Responses,
Messages), plain and streamed: the same rule on every API.

A search the proxy answers while its embedder fails tells the model so and the turn goes
on; an answer that is not the API's (a 200 body in no shape of it, a stream cut short) is
``upstream_invalid_response`` where the proxy must read it (a meta-tool offered) and
reaches the client as it came where it need not (no meta-tool); an upstream error before the client got a byte reaches it as the upstream sent it,
after (a hidden round was read) as the API's error event carrying the upstream's error;
an error event mid-stream ends the client's stream with it; a client that leaves during a
hidden round gets no re-issue sent for it. Real servers on loopback, shared by the module:
the proxy under uvicorn in front of the scripted upstream; the tests wait on gates and on
the upstream's records, never on a clock.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.upstream import SSE, Raw, Slow, chat_events
from tests.support.fault_matrix import proves
from tests.support.turn_apis import (
    APIS,
    CASES,
    IDS,
    LOADED,
    Api,
    Bench,
    Call,
    Servers,
    bench,
    events,
    load,
    turn_servers,
)

BOOM = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with turn_servers({"default": {}, "search": {"embedder": "upstream", "search_tools_min_catalog": 10}}) as running:
        yield running


@pytest.fixture
def run(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    """The test's bench on the default proxy (``name``, ``stream``: the test's parameters)."""
    return bench(servers, "default", request, name, stream)


@pytest.fixture
def searching(servers: Servers, request: pytest.FixtureRequest, name: str, stream: bool) -> Bench:
    """The test's bench on the proxy whose embedder is the upstream's ``/embeddings``."""
    return bench(servers, "search", request, name, stream)


@proves(
    fault="the embedder fails on a hidden `search_tools` call",
    phase="inside a hidden meta-call",
    client="every API, plain and streamed: the answer of the re-issue; the search ranked by BM25 alone (the tools sharing its words loaded)",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_search_whose_embedder_fails_is_answered_and_the_turn_goes_on(searching: Bench) -> None:
    run = searching
    gate = threading.Event()
    search = Call("meta_1", "search_tools", json.dumps({"query": "set a browser cookie"}))
    run.script(Slow(gate, run.api.reply(calls=(search,))), run.api.reply("done"))
    answering = Answering(run)
    run.upstream.wait_for(lambda records: bool(run.sent()))  # planned: the index is built
    run.upstream.script(Raw(500, {"error": {"message": "embedder down"}}), path="/embeddings")
    gate.set()
    answer = answering.result()
    assert (answer.status, answer.text, answer.calls) == (200, "done", [])
    assert b"search_tools" not in answer.raw
    second = run.bodies()[1]
    assert "search_tools" in run.api.offered(run.bodies()[0])
    [result] = [json.loads(result) for _, result in run.api.results(second)]
    assert result["loaded"][0] == "browser_cookie_set"  # BM25 alone: no embedder needed
    assert "browser_cookie_set" in run.api.offered(second)


@proves(
    fault="an upstream error status to a pruned request's first round",
    phase="before the upstream answers",
    client="every API, plain and streamed: the upstream's status and body unchanged",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_an_upstream_error_before_any_byte_reaches_the_client_as_sent(run: Bench) -> None:
    run.script(Raw(500, BOOM))
    answer = run.post()
    assert answer.status == 500 and answer.error == BOOM["error"]


PAGE = b"<html><body>down for maintenance</body></html>"
#: The request's ``tool_choice`` that offers no meta-tool, per API: its answer is the
#: client's alone, which the proxy need not read.
NO_META = {"chat": "none", "responses": "none", "messages": {"type": "none"}}


def post_raw(run: Bench, *, meta: bool) -> httpx.Response:
    """The test's request as sent, its answer as received; ``meta``: with the meta-tool
    offered (else ``tool_choice`` none)."""
    body = run.api.body(run.stream)
    if not meta:
        body["tool_choice"] = NO_META[run.api.name]
    return httpx.post(run.proxy + run.api.path, json=body, headers=run.credential, timeout=300)


def cut_stream(api: Api, body: dict[str, Any]) -> list[bytes]:
    """The events of an answer that shows its first text, then ends without its end (no
    finish reason, ``message_delta`` or terminal event, no ``[DONE]``)."""
    played = events_of(api, api.reply("Hello there"), body)
    first_text = next(i for i, e in enumerate(played)
                      if any(f'"{key}": "H'.encode() in e for key in ("content", "delta", "text")))
    return played[:first_text + 1]


def invalid(answer_error: dict[str, Any] | None, api: Api) -> bool:
    """Whether the error the client got is the proxy's ``upstream_invalid_response``."""
    if answer_error is None:
        return False
    if api.name == "messages":
        return (answer_error.get("type") == "api_error"
                and "could not read it" in answer_error.get("message", ""))
    return answer_error.get("code") == "upstream_invalid_response"


@proves(
    fault="a 200 answer that is neither the API's JSON nor SSE (a gateway's HTML page) to a round whose answer the proxy must read (a meta-tool offered, or a re-issue)",
    phase="before the upstream answers",
    client="every API, plain and streamed: 502 `upstream_invalid_response` in the API's error shape, naming what came (status, content type); nothing relayed, no call run",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_an_answer_in_no_shape_of_the_api_that_the_proxy_must_read_is_invalid(run: Bench) -> None:
    run.script(Raw(200, PAGE, media_type="text/html"))
    response = post_raw(run, meta=True)
    assert response.status_code == 502 and PAGE not in response.content
    answer = run.api.read(response, run.stream)
    assert invalid(answer.error, run.api)
    assert "text/html" in json.dumps(response.json())


@proves(
    fault="a 200 answer that is neither the API's JSON nor SSE to a round whose answer the proxy need not read (no meta-tool offered: `tool_choice` none or a named tool)",
    phase="before the upstream answers",
    client="every API, plain and streamed: the upstream's status, content type and body unchanged, as without the proxy",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_an_answer_in_no_shape_of_the_api_that_the_proxy_need_not_read_is_relayed(run: Bench) -> None:
    run.script(Raw(200, PAGE, media_type="text/html"))
    response = post_raw(run, meta=False)
    assert "load_tools" not in run.api.offered(run.bodies()[0])  # no meta-tool: pruned alone
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.content == PAGE


@proves(
    fault="a stream that ends without its end (no finish reason, `message_delta` or terminal event, no `[DONE]`) in a round whose answer the proxy must read",
    phase="while the answer streams",
    client="every API: a stream gets what was shown, then the error event `upstream_invalid_response` (no terminal event, no `[DONE]`); so does a plain Responses or Messages client (an event stream is relayed as one); a plain Chat Completions client 502 `upstream_invalid_response`",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_stream_cut_short_that_the_proxy_must_read_is_invalid(run: Bench) -> None:
    run.script(SSE(cut_stream(run.api, run.api.body(True))))
    response = post_raw(run, meta=True)
    streamed = run.stream or run.api.name != "chat"  # an event stream is relayed as one
    answer = run.api.read(response, streamed)
    assert invalid(answer.error, run.api)
    if streamed:
        assert response.status_code == 200 and answer.text.startswith("H")
        assert events(response.content)[-1][0] == "error" and b"[DONE]" not in response.content
    else:
        assert response.status_code == 502


@proves(
    fault="a stream that ends without its end in a round whose answer the proxy need not read (no meta-tool offered)",
    phase="while the answer streams",
    client="every API: what the upstream sent, ending where it ended: no ending, terminal event or `[DONE]` added, no error event (a plain Chat Completions client: the completion so far, `finish_reason` null)",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_stream_cut_short_that_the_proxy_need_not_read_ends_where_it_ended(run: Bench) -> None:
    run.script(SSE(cut_stream(run.api, run.api.body(True))))
    response = post_raw(run, meta=False)
    assert response.status_code == 200
    answer = run.api.read(response, run.stream or run.api.name != "chat")  # as above
    assert answer.error is None and answer.text.startswith("H")
    assert answer.ending is None and b"[DONE]" not in response.content


@proves(
    fault="a hidden `load_tools` call naming thousands of tools that do not exist",
    phase="inside a hidden meta-call",
    client="the answer of the re-issue; the re-issue's tool result suggests names for the first 8 unknown names and counts the rest, so its prompt stays the size of one round's",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_load_of_thousands_of_unknown_names_re_issues_a_bounded_prompt(run: Bench) -> None:
    call = load(*(f"no_such_tool_{i}" for i in range(5_000)))
    run.script(run.api.reply(calls=(call,)), run.api.reply("done"))
    answer = run.post()
    assert (answer.status, answer.text) == (200, "done")
    first, second = run.sent()
    [result] = [json.loads(text) for _, text in run.api.results(json.loads(second.body))]
    assert len(result["unknown"]) == 8 and result["unknown_more"] == 4_992
    # The re-issue carries the model's own call (its 5,000 names) and a short result.
    assert len(second.body) < len(first.body) + 2 * len(call.arguments) + 4_000


@proves(
    fault="the upstream answers a hidden re-issue with an error status",
    phase="inside a hidden meta-call",
    client="every API: a stream gets what was shown, then the API's error event carrying the upstream's error (no terminal event); a plain client the upstream's status and body",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_an_upstream_error_to_a_re_issue_carries_the_upstream_error(run: Bench) -> None:
    run.script(run.api.reply(calls=(load(LOADED),)), Raw(500, BOOM))
    answer = run.post()
    assert len(run.sent()) == 2 and answer.error is not None
    assert answer.error["message"] == "boom"
    # A stream has started (the hidden round was read): 200 and the API's error event.
    # A plain response has not: the upstream's status and body.
    assert answer.status == (200 if run.stream else 500)
    assert b"load_tools" not in answer.raw


def error_mid_stream(api: Api, body: dict[str, Any]) -> list[bytes]:
    """An answer that shows some text, then fails with the API's error event."""
    text = events_of(api, api.reply("Hello"), body)
    if api.name == "chat":
        head = text[:2]  # the role and the first piece
        error = b'event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    elif api.name == "responses":
        head = [e for e in text if b"output_text.delta" in e or b"response.created" in e][:2]
        error = (b'event: error\ndata: {"type": "error", "code": "server_error", '
                 b'"message": "overloaded", "param": null, "sequence_number": 9}\n\n')
    else:
        head = [e for e in text if b"message_start" in e or b"text_delta" in e][:2]
        error = (b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                 b'"message": "overloaded"}}\n\n')
    return [*head, error]


def events_of(api: Api, reply: Any, body: dict[str, Any]) -> list[bytes]:
    """The SSE events the scripted upstream plays for ``reply`` to ``body``."""
    return chat_events(reply, body) if api.name == "chat" else reply.render(body, 100)


@proves(
    fault="an error event in the upstream's stream",
    phase="while the answer streams",
    client="every API: what was shown, then the upstream's error in the API's error event; no terminal event, no `[DONE]`",
)
@pytest.mark.parametrize(("name", "stream"), [(name, True) for name in APIS], ids=list(APIS))
def test_an_error_event_mid_stream_ends_the_client_stream_with_it(run: Bench) -> None:
    run.script(SSE(error_mid_stream(run.api, run.api.body(True))))
    answer = run.post()
    assert answer.status == 200 and answer.text.startswith("H")
    assert answer.error is not None and answer.error["message"] == "overloaded"
    last_name, _ = events(answer.raw)[-1]
    assert last_name == "error" and b"[DONE]" not in answer.raw


@proves(
    fault="the client leaves while a hidden `load_tools` round is in flight",
    phase="after the client left",
    client="every API, plain and streamed: nothing more; the round in flight is closed and no re-issue is sent",
)
@pytest.mark.parametrize(("name", "stream"), CASES, ids=IDS)
def test_a_client_gone_during_a_hidden_round_gets_no_re_issue(run: Bench) -> None:
    gate = threading.Event()
    meta = run.api.reply(calls=(load(LOADED),))
    if run.stream:  # the hidden call is streamed, its round held open before its end
        played = events_of(run.api, meta, run.api.body(True))
        run.script(SSE(played, gate=gate, gate_after=len(played) - 1))
    else:  # the round is held before its answer
        run.script(Slow(gate, meta))
    sock = raw_request(run)
    run.upstream.wait_for(lambda records: bool(run.sent()))
    sock.close()  # the client leaves while the hidden round is in flight
    first = run.upstream.requests.index(run.sent()[0])
    assert run.upstream.wait_cancelled(first)  # the round in flight is closed
    gate.set()
    run.script(run.api.reply("barrier"))
    run.post()  # planned after the first request: whatever it would send was sent by then
    assert len(run.sent()) == 2  # the first round and the barrier: no re-issue


def raw_request(run: Bench) -> socket.socket:
    """The test's request on a raw socket (the test decides when it closes)."""
    body = json.dumps(run.api.body(run.stream)).encode()
    host, port = run.proxy.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    credential = run.credential["Authorization"]
    sock.sendall(
        f"POST {run.api.path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        f"authorization: {credential}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body
    )
    return sock


class Answering:
    """``run.post()`` in a thread, for a test that acts while the request is served."""

    def __init__(self, run: Bench) -> None:
        self._result: list[Any] = []
        self._thread = threading.Thread(target=lambda: self._result.append(run.post()), daemon=True)
        self._thread.start()

    def result(self, timeout: float = 120) -> Any:
        self._thread.join(timeout)
        assert self._result, "the request did not finish"
        return self._result[0]
