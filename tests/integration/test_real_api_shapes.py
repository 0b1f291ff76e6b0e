"""End to end against a real llama-server (issue #13): GitHub MCP's 117 tools in the
Responses API's and the Anthropic Messages API's tool shapes do not fit SmolLM2's 8k
context when sent directly, and do through the proxy, plain and streaming, with the
official ``openai`` and ``anthropic`` SDKs as clients. With OpenAI's tool search (issue
#25): the catalogue deferred behind hosted ``tool_search`` (ten tools in a namespace), and
the Codex-shaped histories of ``tests/fixtures/codex_responses`` with
``tool_search_call`` / ``tool_search_output`` items, are accepted by llama-server once the
proxy has translated them.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (the first run builds
llama-server, see ``deploy/local_llama.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.llama import llama_server
from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app
from tests.support.responses_requests import FIXTURES, HOSTED_TOOLS

pytestmark = pytest.mark.real_upstream

GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
RESPONSES_TOOLS = [{"type": "function", **tool["function"]} for tool in GITHUB]
MESSAGES_TOOLS = [
    {"name": t["function"]["name"], "description": t["function"].get("description", ""),
     "input_schema": t["function"]["parameters"]}
    for t in GITHUB
]
NAMES = {tool["function"]["name"] for tool in GITHUB}
ASK = "List the open pull requests in octocat/hello-world."
MAX_TOKENS = 24
#: Prefill on 2 busy cores takes minutes; the proxy's idle timeout covers it.
CLIENT_TIMEOUT_S = 900.0


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


@pytest.fixture(scope="module")
def proxy(llama: str) -> Iterator[str]:
    # Wait for the cold 117-tool index: the default (1.5 s) forwards the first request unpruned.
    settings = Settings(
        upstream_url=llama + "/v1", idle_timeout_s=CLIENT_TIMEOUT_S, index_timeout_s=300.0
    )
    with serve_in_thread(create_app(settings), server_header=False, date_header=False) as origin:
        yield origin


def openai_client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0)


def anthropic_client(origin: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=origin, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0)


def assert_forwarded_fewer(headers: Any) -> None:
    forwarded, offered = headers["x-tool-pruning-tools"].split("/")
    assert offered == "117" and int(forwarded) <= 16


def test_responses_direct_400_through_the_proxy_200_plain_and_streaming(llama: str, proxy: str) -> None:
    with pytest.raises(openai.BadRequestError) as direct:
        openai_client(llama + "/v1").responses.create(
            model="m", input=ASK, tools=RESPONSES_TOOLS, max_output_tokens=MAX_TOKENS
        )
    assert "exceed" in str(direct.value).lower() and "context" in str(direct.value).lower()
    client = openai_client(proxy + "/v1")
    raw = client.responses.with_raw_response.create(
        model="m", input=ASK, tools=RESPONSES_TOOLS, max_output_tokens=MAX_TOKENS
    )
    assert raw.status_code == 200
    assert_forwarded_fewer(raw.headers)
    result = raw.parse()
    assert result.usage.input_tokens < 8192
    for item in result.output:
        assert item.type != "function_call" or item.name in NAMES
    with client.responses.with_streaming_response.create(
        model="m", input=ASK, tools=RESPONSES_TOOLS, max_output_tokens=MAX_TOKENS, stream=True
    ) as streamed:
        assert streamed.status_code == 200
        assert_forwarded_fewer(streamed.headers)
        events = list(streamed.parse())
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.created") == kinds.count("response.completed") == 1
    assert "load_tools" not in json.dumps([event.model_dump() for event in events])
    assert events[-1].response.usage.input_tokens < 8192


def test_messages_direct_400_through_the_proxy_200_plain_and_streaming(llama: str, proxy: str) -> None:
    ask = [{"role": "user", "content": ASK}]
    with pytest.raises(anthropic.BadRequestError) as direct:
        anthropic_client(llama).messages.create(
            model="m", max_tokens=MAX_TOKENS, messages=ask, tools=MESSAGES_TOOLS
        )
    assert "exceed" in str(direct.value).lower() and "context" in str(direct.value).lower()
    client = anthropic_client(proxy)
    raw = client.messages.with_raw_response.create(
        model="m", max_tokens=MAX_TOKENS, messages=ask, tools=MESSAGES_TOOLS
    )
    assert raw.status_code == 200
    assert_forwarded_fewer(raw.headers)
    message = raw.parse()
    assert message.usage.input_tokens < 8192
    assert all(block.type != "tool_use" or block.name in NAMES for block in message.content)
    with client.messages.with_streaming_response.create(
        model="m", max_tokens=MAX_TOKENS, messages=ask, tools=MESSAGES_TOOLS, stream=True
    ) as streamed:
        assert streamed.status_code == 200
        assert_forwarded_fewer(streamed.headers)
        events = list(streamed.parse())
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("message_start") == kinds.count("message_stop") == 1
    assert "load_tools" not in json.dumps([event.model_dump() for event in events])
    starts = [event.index for event in events if event.type == "content_block_start"]
    assert starts == list(range(len(starts)))


def test_responses_deferred_behind_tool_search_reach_llama_server_as_core_plus_loaded(
    proxy: str,
) -> None:
    raw = openai_client(proxy + "/v1").responses.with_raw_response.create(
        model="m", input=ASK, tools=HOSTED_TOOLS, max_output_tokens=MAX_TOKENS
    )
    result = raw.parse()
    assert "/117; client=2;" in raw.headers["x-tool-pruning-tools"]
    assert result.usage.input_tokens < 8192  # sent whole, the catalogue does not fit
    assert result.status in ("completed", "incomplete")
    assert_calls_declared(result.output, HOSTED_TOOLS)


@pytest.mark.parametrize("name", ["hosted_search_second_turn.json", "client_search_second_turn.json"])
def test_responses_codex_histories_with_search_items_plain_and_streamed(
    proxy: str, name: str
) -> None:
    body = json.loads((FIXTURES / name).read_text())
    fields = {key: value for key, value in body.items() if key not in ("stream", "model")}
    client = openai_client(proxy + "/v1")
    plain = client.responses.create(model="m", **fields, max_output_tokens=MAX_TOKENS)
    # Raw events: llama-server's carry no output_index, which the SDK's stream helper needs.
    events = list(client.responses.create(model="m", **fields, max_output_tokens=MAX_TOKENS,
                                          stream=True))
    assert events[-1].type == "response.completed"
    streamed = events[-1].response
    loaded = [tool for item in body["input"] if item.get("type") == "tool_search_output"
              for tool in item["tools"]]
    for result in (plain, streamed):
        assert result.status in ("completed", "incomplete")
        assert_calls_declared(result.output, [*body["tools"], *loaded])


def assert_calls_declared(output: list[Any], tools: list[dict[str, Any]]) -> None:
    """Every call names a tool the client declared (or a search loaded), namespace members
    by their own name and namespace."""
    declared: set[tuple[str, str | None]] = set()
    for tool in tools:
        if tool["type"] == "namespace":
            declared |= {(member["name"], tool["name"]) for member in tool["tools"]}
        elif "name" in tool:
            declared.add((tool["name"], None))
    for item in output:
        if item.type in ("function_call", "custom_tool_call"):
            assert (item.name, item.namespace) in declared
