"""OpenAI Responses tool search against a real llama-server (issue #25): requests with the
117 GitHub MCP tools deferred behind hosted ``tool_search`` (ten in a namespace), and the
Codex-shaped requests of ``tests/fixtures/codex_responses`` whose histories carry
``tool_search_call`` / ``tool_search_output`` items, sent with the ``openai`` SDK through
the proxy to llama-server's own ``/v1/responses``. llama-server accepts what the proxy
sends (200, plain and streamed), and its prompt holds the client's CORE and the search
function only (the prompt tokens it reports).

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from config.settings import Settings
from proxy.app import create_app
from tests.support.llama import llama_server
from tests.support.responses_requests import ASK, FIXTURES, HOSTED_TOOLS
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.real_upstream

TIMEOUT_S = 900.0
MAX_TOKENS = 24
#: The client's two kept GitHub tools and the search function, with the question: the
#: whole catalogue is over 20,000 tokens.
PROMPT_BOUND = 2_000


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


@pytest.fixture(scope="module")
def proxy(llama: str) -> Iterator[str]:
    settings = Settings(upstream_url=llama + "/v1", idle_timeout_s=TIMEOUT_S,
                        index_timeout_s=300.0, preload_deferred=False)
    with serve_in_thread(create_app(settings), server_header=False, date_header=False) as origin:
        yield origin


def client_of(proxy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="none", timeout=TIMEOUT_S, max_retries=0)


def fixture(name: str) -> dict[str, Any]:
    body = json.loads((FIXTURES / name).read_text())
    return {key: value for key, value in body.items() if key not in ("stream", "model")}


def test_the_deferred_catalogue_reaches_llama_server_as_core_and_search_only(proxy: str) -> None:
    raw = client_of(proxy).responses.with_raw_response.create(
        model="m", input=ASK, tools=HOSTED_TOOLS, max_output_tokens=MAX_TOKENS
    )
    result = raw.parse()
    assert raw.headers["x-tool-pruning-tools"].startswith("2/117")
    assert result.usage.input_tokens < PROMPT_BOUND
    assert result.status in ("completed", "incomplete")


@pytest.mark.parametrize("name", ["hosted_search_second_turn.json", "client_search_second_turn.json"])
def test_codex_histories_with_search_items_are_accepted_plain_and_streamed(
    proxy: str, name: str
) -> None:
    body = fixture(name)
    client = client_of(proxy)
    plain = client.responses.create(model="m", **body, max_output_tokens=MAX_TOKENS)
    assert plain.status in ("completed", "incomplete")
    with client.responses.stream(model="m", **body, max_output_tokens=MAX_TOKENS) as events:
        streamed = events.get_final_response()
    assert streamed.status in ("completed", "incomplete")
    loaded = [tool for item in body["input"] if item.get("type") == "tool_search_output"
              for tool in item["tools"]]
    declared = declared_tools([*body["tools"], *loaded])
    for item in [*plain.output, *streamed.output]:  # calls name the client's own tools
        if item.type in ("function_call", "custom_tool_call"):
            assert (item.name, item.namespace) in declared


def declared_tools(tools: list[dict[str, Any]]) -> set[tuple[str, str | None]]:
    """``(name, namespace)`` of every tool the client declared (in ``tools``, or loaded by
    a search)."""
    declared: set[tuple[str, str | None]] = set()
    for tool in tools:
        if tool["type"] == "namespace":
            declared |= {(member["name"], tool["name"]) for member in tool["tools"]}
        elif "name" in tool:
            declared.add((tool["name"], None))
    return declared
