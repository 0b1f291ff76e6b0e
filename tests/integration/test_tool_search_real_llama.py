"""Anthropic tool search against a real llama-server (issue #25): the 117 GitHub MCP tools
deferred behind the regex search tool, sent with the ``anthropic`` SDK through the proxy to
llama-server's own ``/v1/messages``. A recording relay between the proxy and llama-server
keeps what reached it: the block holds the client's CORE, the search function and the
``call_tool`` bridge (tools are delivered in the conversation, issue #51), and nothing a
plain server cannot run; a found tool's definition stands in the history where its search
result stands; llama-server accepts it (200), first turn and a later turn whose history
carries the search blocks. Sent directly, the same request does not
fit SmolLM2's 8k context.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from benchmarks.support.llama import llama_server
from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app
from tests.support.tool_search_requests import PR_TOOL, first_turn, server_search_history

pytestmark = pytest.mark.real_upstream

TIMEOUT_S = 900.0
FORBIDDEN = ("defer_loading", "server_tool_use", "tool_search_tool_result", "tool_reference",
             "tool_search_tool_regex_2")


class Recorder:
    """Relays every request to llama-server and keeps the JSON bodies sent to it."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.bodies: list[dict[str, Any]] = []

    async def relay(self, request: Request) -> Response:
        body = await request.body()
        if request.method == "POST":
            self.bodies.append(json.loads(body))
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            answer = await client.request(
                request.method, self.origin + request.url.path, content=body,
                headers={"content-type": request.headers.get("content-type", "application/json")},
            )
        return Response(answer.content, answer.status_code,
                        media_type=answer.headers.get("content-type"))

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.relay, methods=["GET", "POST"])])


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


@pytest.fixture(scope="module")
def recorded(llama: str) -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder(llama)
    with serve_in_thread(recorder.app()) as relay:
        settings = Settings(upstream_url=relay + "/v1", idle_timeout_s=TIMEOUT_S,
                            index_timeout_s=300.0, preload_deferred=False)
        with serve_in_thread(create_app(settings), server_header=False, date_header=False) as proxy:
            yield proxy, recorder


def messages(recorder: Recorder) -> list[dict[str, Any]]:
    return [body for body in recorder.bodies if "messages" in body]


def test_llama_server_gets_only_the_client_core_and_the_search_function(
    recorded: tuple[str, Recorder],
) -> None:
    proxy, recorder = recorded
    client = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0, timeout=TIMEOUT_S)
    message = client.messages.create(**{**first_turn(), "max_tokens": 32})
    assert message.role == "assistant" and message.usage.input_tokens > 0
    (sent, *more) = messages(recorder)
    text = json.dumps(sent)
    assert not [word for word in FORBIDDEN if word in text]
    names = [tool["name"] for tool in sent["tools"]]
    # More rounds happen only if the model searched; each adds what the search found.
    assert names == ["Bash", "Read", "tool_search_tool_regex", "call_tool"]
    for later in more:
        assert [t["name"] for t in later["tools"]][:3] == names
    assert message.usage.input_tokens < 2_000  # SmolLM2 tokens: the 117 schemas are not there


def test_a_later_turn_with_search_blocks_in_its_history_is_accepted(
    recorded: tuple[str, Recorder],
) -> None:
    proxy, recorder = recorded
    recorder.bodies.clear()
    client = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0, timeout=TIMEOUT_S)
    body = {**first_turn(), "max_tokens": 32, "messages": server_search_history()}
    message = client.messages.create(**body)
    assert message.role == "assistant"
    sent = messages(recorder)[0]
    history = json.dumps(sent["messages"])
    assert not [word for word in FORBIDDEN if word in json.dumps(sent)]
    # The found tool is not added to the block (that would break the KV-cache prefix):
    # its definition is in the history, where the search result stood, and the client's
    # call of it is the bridge call, naming it as the delivery showed it (its own name).
    assert [tool["name"] for tool in sent["tools"]] == [
        "Bash", "Read", "tool_search_tool_regex", "call_tool"
    ]
    shown = PR_TOOL.removeprefix("mcp__github__")
    assert f'"name": "{shown}"' in history and "call_tool" in history
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user", "assistant", "user"]


def test_sent_directly_the_deferred_catalogue_does_not_fit(llama: str) -> None:
    """What a local server does with deferral when nothing emulates it: every deferred
    schema is prefilled, and 117 of them overflow the 8k context."""
    response = httpx.post(llama + "/v1/messages", json={**first_turn(), "max_tokens": 8},
                          timeout=TIMEOUT_S)
    assert response.status_code == 400, response.text[:300]
    assert "exceed" in response.text or "context" in response.text
