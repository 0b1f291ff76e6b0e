"""A defect in a request handler becomes an OpenAI-shaped 500, or ends an event stream
with an SSE error event, instead of a dropped connection."""

from __future__ import annotations

import json

from starlette.types import Message, Send

from proxy.app import serve_guarded
from proxy.http.forwarding import ClientRequest

REQUEST = ClientRequest("POST", "/v1/chat/completions", b"/v1/chat/completions", b"", [], b"{}", b"rid")


def recorder() -> tuple[list[Message], Send]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    return sent, send


async def test_a_defect_before_the_response_started_is_a_500_in_openai_shape() -> None:
    async def broken(request: ClientRequest, send: Send) -> None:
        raise KeyError("boom")

    sent, send = recorder()
    await serve_guarded(broken, REQUEST, send)
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"]["code"] == "proxy_internal_error"


async def test_a_defect_inside_an_event_stream_ends_it_with_an_error_event() -> None:
    async def breaks_mid_stream(request: ClientRequest, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True})
        raise ValueError("boom")

    sent, send = recorder()
    await serve_guarded(breaks_mid_stream, REQUEST, send)
    assert sent[-1]["body"].startswith(b"event: error\ndata: ")
    assert sent[-1]["more_body"] is False


async def test_a_completed_response_is_left_alone() -> None:
    async def fine(request: ClientRequest, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})

    sent, send = recorder()
    await serve_guarded(fine, REQUEST, send)
    assert [m.get("body") for m in sent] == [None, b"ok"]
