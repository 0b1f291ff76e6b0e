"""Keep-alives of a streaming response (proxy/http/keepalive.py) on their own: when a comment
goes out, how it starts a response nothing started, what the handler's own response
becomes on a stream the keep-alives started, and what is released for bytes that must go
as they came. The clock is the test's: no waiting on real time."""

from __future__ import annotations

from typing import Any

from proxy.http.keepalive import KEEPALIVE, KeepAliveSend, unchanged


class Client:
    """The ASGI messages the client was sent."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def error_event(status: int, body: bytes) -> bytes:
    return b"event: error\ndata: " + str(status).encode() + b" " + body + b"\n\n"


async def start(send: KeepAliveSend, status: int = 200, kind: bytes = b"text/event-stream") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]})


async def body(send: KeepAliveSend, data: bytes, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


def kept_alive() -> tuple[Client, Clock, KeepAliveSend]:
    client, clock = Client(), Clock()
    return client, clock, KeepAliveSend(client, 10.0, error_event, clock)


async def test_silence_starts_an_event_stream_with_a_comment() -> None:
    client, clock, send = kept_alive()
    clock.now = 9.9
    assert not await send.keep_alive()  # not silent for long enough
    clock.now = 10.0
    assert await send.keep_alive()
    first, comment = client.messages
    assert (first["type"], first["status"]) == ("http.response.start", 200)
    assert (b"content-type", b"text/event-stream") in first["headers"]
    assert comment["body"] == KEEPALIVE and send.prestarted and not send.started


async def test_on_a_started_stream_the_handler_s_own_stream_goes_on_it() -> None:
    client, clock, send = kept_alive()
    clock.now = 10.0
    await send.keep_alive()
    await start(send)  # the handler's start: dropped, the stream is open
    await body(send, b"data: {}\n\n", more=False)
    assert [m["type"] for m in client.messages].count("http.response.start") == 1
    assert client.body() == KEEPALIVE + b"data: {}\n\n" and send.started


async def test_an_error_answer_after_keep_alives_becomes_the_api_s_error_event() -> None:
    client, clock, send = kept_alive()
    clock.now = 10.0
    await send.keep_alive()
    await start(send, 400, b"application/json")
    await body(send, b'{"error": ', more=True)
    await body(send, b'"bad"}', more=False)
    assert client.body() == KEEPALIVE + b'event: error\ndata: 400 {"error": "bad"}\n\n'
    assert client.messages[-1]["more_body"] is False
    clock.now = 30.0
    assert not await send.keep_alive()  # nothing after the end


async def test_no_comment_inside_an_event_the_handler_is_relaying() -> None:
    client, clock, send = kept_alive()
    await start(send)
    await body(send, b'data: {"a": ')  # an event cut between two chunks
    clock.now = 10.0
    assert not await send.keep_alive()
    await body(send, b"1}\n")
    await body(send, b"\n")  # its end comes in a chunk of its own
    clock.now = 20.0
    assert await send.keep_alive()
    assert client.body() == b'data: {"a": 1}\n\n' + KEEPALIVE


async def test_a_json_response_stops_the_keep_alives() -> None:
    client, clock, send = kept_alive()
    await start(send, 200, b"application/json")
    clock.now = 10.0
    assert not await send.keep_alive()
    await body(send, b"{}", more=False)
    assert client.body() == b"{}"


async def test_bytes_that_go_as_they_came_get_the_wrapped_send_until_a_prestart() -> None:
    client, clock, send = kept_alive()
    assert await unchanged(send) is client  # and no keep-alive from now on
    clock.now = 10.0
    assert not await send.keep_alive() and client.messages == []
    client, clock, send = kept_alive()
    clock.now = 10.0
    await send.keep_alive()
    assert await unchanged(send) is send  # the response is a stream already
    assert await unchanged(client) is client
