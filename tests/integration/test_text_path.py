"""The text path through the real proxy (issue #6): a tool block written in the system
prompt is pruned with the same selection as ``tools=``.

Real servers on loopback: the proxy (default settings, embedded ONNX embedder) in front
of the scripted test upstream, which records the bytes the proxy forwarded. Catalogues
stay at 70 tools or fewer so indexing is quick.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.support.upstream import SSE, Raw
from selection.catalog.text_path import PRESETS, ToolBlock, detect, others_line
from tests.conftest import ProxyFactory, RunningUpstream
from tests.support import agent_prompts as prompts

PLAYWRIGHT = prompts.load_catalog("playwright_mcp")
GITHUB = prompts.load_catalog("github_mcp_server")
MIN_ENTRIES = 9  # min_catalog_tools (8, the default) + 1
OTHERS_PREFIX = others_line(["x"]).split("x")[0]


@dataclass(frozen=True)
class Case:
    """A realistic agent: its system prompt, its tool names, a first user request, and
    how that agent writes a call to ``tool`` in an assistant message."""

    preset: str
    system: str
    names: list[str]
    ask: str
    call_style: str

    def call(self, tool: str) -> str:
        if self.call_style == "hermes":
            return (
                "Let me do that.\n<tool_call>\n"
                + json.dumps({"name": tool, "arguments": {}})
                + "\n</tool_call>"
            )
        if self.call_style == "xml":
            return f"I'll use {tool.replace('_', ' ')} next.\n\n<{tool}>\n<path>src/app.ts</path>\n</{tool}>"
        return json.dumps({"tool": tool, "args": {}})


def hermes_case(tools: list[dict[str, Any]] = PLAYWRIGHT[:40]) -> Case:
    return Case(
        "hermes",
        prompts.hermes_prompt(tools),
        [prompts.tool_name(t) for t in tools],
        "Open https://example.com in the browser and take a screenshot of the page",
        "hermes",
    )


def markdown_case() -> Case:
    return Case(
        "markdown",
        prompts.coding_agent_prompt(),
        prompts.coding_tool_names(),
        "The API server crashes on start with EADDRINUSE. Find where the port is set and "
        "make it configurable through an environment variable.",
        "xml",
    )


def lines_case(style: str = "call", tools: list[dict[str, Any]] = GITHUB[:40]) -> Case:
    return Case(
        f"lines-{style}",
        prompts.lines_prompt(tools, style),
        [prompts.tool_name(t) for t in tools],
        "Open an issue in acme/shop-api about the checkout page crashing, and label it as a bug",
        "json",
    )


CASES = {"hermes": hermes_case, "markdown": markdown_case, "lines": lines_case}


def chat_requests(upstream: RunningUpstream) -> list[Any]:
    return [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]


def post(proxy: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(proxy + "/v1/chat/completions", json=body, headers=headers, timeout=60)


def post_raw(proxy: str, raw: bytes, **headers: str) -> httpx.Response:
    headers = {"content-type": "application/json", **headers}
    return httpx.post(proxy + "/v1/chat/completions", content=raw, headers=headers, timeout=60)


def block_of(text: str) -> ToolBlock:
    block = detect(text, PRESETS, MIN_ENTRIES)
    assert block is not None
    return block


def kept_names(original: str, forwarded: str) -> list[str]:
    """The entries of ``original``'s block found verbatim in ``forwarded``, in block order."""
    block = block_of(original)
    return [e.name for e in block.entries if original[e.start : e.end] in forwarded]


def assert_pruned_block(original: str, forwarded: str) -> list[str]:
    """``forwarded`` is ``original`` with its tool block pruned: kept entries byte for byte
    in order, dropped ones replaced by one line naming them, nothing else changed."""
    block = block_of(original)
    kept = kept_names(original, forwarded)
    dropped = [e.name for e in block.entries if e.name not in kept]
    assert kept and dropped
    assert forwarded == block.rewrite(original, kept)
    others = [line for line in forwarded.splitlines() if line.startswith(OTHERS_PREFIX)]
    assert others == [others_line(dropped)]
    assert len(forwarded) < len(original)
    return kept


def metrics(proxy: str) -> str:
    return httpx.get(proxy + "/metrics", timeout=10).text


def messages(case: Case, *history: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": case.system},
        {"role": "user", "content": case.ask},
        *history,
    ]


# --- a text-only request is pruned, the response relayed as is ------------------------


@pytest.mark.parametrize("preset", list(CASES))
def test_text_only_request_is_pruned_and_the_response_relayed_unchanged(
    upstream: RunningUpstream, proxy: str, preset: str
) -> None:
    case = CASES[preset]()
    reply = json.dumps(
        {
            "id": "chatcmpl-text-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "qwen2.5-7b-instruct",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": case.call(case.names[0])},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 4000, "completion_tokens": 20, "total_tokens": 4020},
        },
        indent=1,
    ).encode()
    upstream.upstream.script(Raw(200, reply, headers={"x-upstream": "yes"}))
    body = {"model": "m", "temperature": 0.2, "messages": messages(case)}
    response = post(proxy, body)

    assert response.status_code == 200
    assert response.content == reply  # the text path never rewrites the response
    assert response.headers["x-upstream"] == "yes"
    [forwarded] = chat_requests(upstream)
    sent = forwarded.json()
    assert "tools" not in sent and "functions" not in sent
    assert {k: v for k, v in sent.items() if k != "messages"} == {"model": "m", "temperature": 0.2}
    assert sent["messages"][1:] == body["messages"][1:]
    assert sent["messages"][0]["role"] == "system"
    kept = assert_pruned_block(case.system, sent["messages"][0]["content"])
    assert response.headers["x-tool-pruning-tools"] == f"{len(kept)}/{len(case.names)}"
    assert 'toolprune_requests_total{api="chat_completions",decision="pruned",path="text"} 1.0' in metrics(proxy)


def test_streaming_text_only_response_is_relayed_byte_for_byte(
    upstream: RunningUpstream, proxy: str
) -> None:
    case = hermes_case()
    events = [
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"<tool_call>\\n"}}]}\n\n',
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{\\"name\\": \\"browser_navigate\\", \\"arguments\\": {\\"url\\": \\"https://example.com\\"}}\\n</tool_call>"}}]}\n\n',
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    upstream.upstream.script(SSE(events))
    with httpx.stream(
        "POST", proxy + "/v1/chat/completions", timeout=60,
        json={"model": "m", "stream": True, "messages": messages(case)},
    ) as response:
        received = b"".join(response.iter_bytes())
        assert response.headers["x-tool-pruning-tools"].endswith("/40")
    assert received == b"".join(events)
    [forwarded] = chat_requests(upstream)
    assert forwarded.json()["stream"] is True
    assert_pruned_block(case.system, forwarded.json()["messages"][0]["content"])


def test_the_decision_log_line_says_the_text_path_acted(upstream: RunningUpstream, proxy: str) -> None:
    logged = threading.Event()
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "pruning_decision":
                records.append(record)
                logged.set()

    handler = Capture(logging.INFO)
    root = logging.getLogger("toolprune")
    root.addHandler(handler)
    try:
        case = markdown_case()
        response = post(proxy, {"model": "m", "messages": messages(case)})
        assert response.status_code == 200
        assert logged.wait(10)  # written once the response is sent
    finally:
        root.removeHandler(handler)
    fields = records[0].fields  # type: ignore[attr-defined]
    assert fields["decision"] == "pruned" and fields["path"] == "text"
    assert fields["offered"] == len(case.names)
    assert f"{fields['forwarded']}/{fields['offered']}" == response.headers["x-tool-pruning-tools"]
    assert case.system not in json.dumps(fields)  # never message content


def test_the_same_turn_again_forwards_the_same_system_prompt(upstream: RunningUpstream, proxy: str) -> None:
    case = lines_case("dash")
    body = {"model": "m", "messages": messages(case)}
    for _ in range(2):
        assert post(proxy, body, **{"X-Conversation-Id": "kv-cache"}).status_code == 200
    first, second = chat_requests(upstream)
    assert first.body == second.body  # same kept entries, same others line: prefix cache hit
    assert_pruned_block(case.system, first.json()["messages"][0]["content"])


# --- history: a tool called in text is pinned on the next turn ---------------------------


@pytest.mark.parametrize("preset", list(CASES))
def test_tool_called_in_text_in_an_earlier_turn_is_kept_on_the_next(
    upstream: RunningUpstream, proxy: str, preset: str
) -> None:
    case = CASES[preset]()
    result = {"role": "user", "content": "Result: done, no errors."}
    follow_up = {"role": "user", "content": "Thanks. Carry on with the rest of the task."}

    def turn_two(conversation: str, assistant_text: str) -> list[str]:
        history = [{"role": "assistant", "content": assistant_text}, result, follow_up]
        response = post(proxy, {"model": "m", "messages": messages(case, *history)},
                        **{"X-Conversation-Id": conversation})
        assert response.status_code == 200
        forwarded = chat_requests(upstream)[-1].json()["messages"][0]["content"]
        return assert_pruned_block(case.system, forwarded)

    # Control: the same turn in a fresh conversation, the assistant wrote prose only.
    control = turn_two("control", "I have looked at it and will continue.")
    target = next(name for name in reversed(case.names) if name not in control)
    # Same turn, fresh conversation, but the assistant called ``target`` in text.
    called = turn_two("called", case.call(target))
    assert target in called
    assert set(control) <= set(called)


# --- both tools= and a text block: one selection ----------------------------------------


def test_native_tools_and_a_text_block_are_pruned_from_one_selection(
    upstream: RunningUpstream, proxy: str
) -> None:
    native = GITHUB[:30]
    text_tools = GITHUB[15:45]  # 15 tools in both places, 45 distinct
    system = prompts.lines_prompt(text_tools, "dash")
    ask = "Create a pull request from my branch fix/checkout and request a review from octocat"
    body = {"model": "m", "messages": [{"role": "system", "content": system},
                                       {"role": "user", "content": ask}], "tools": native}
    response = post(proxy, body)
    assert response.status_code == 200
    assert response.headers["x-tool-pruning-tools"].endswith("/45")
    [forwarded] = chat_requests(upstream)
    sent = forwarded.json()
    kept_text = assert_pruned_block(system, sent["messages"][0]["content"])
    native_names = {prompts.tool_name(t) for t in native}
    forwarded_native = [prompts.tool_name(t) for t in sent["tools"] if prompts.tool_name(t) in native_names]
    for tool in sent["tools"]:  # forwarded definitions are the client's, unchanged
        if prompts.tool_name(tool) in native_names:
            assert tool in native
    both = [prompts.tool_name(t) for t in GITHUB[15:30]]
    assert any(name in kept_text for name in both) and not all(name in kept_text for name in both)
    for name in both:
        assert (name in kept_text) == (name in forwarded_native), name
    kept = set(kept_text) | set(forwarded_native)
    assert response.headers["x-tool-pruning-tools"] == f"{len(kept)}/45"
    assert 'toolprune_requests_total{api="chat_completions",decision="pruned",path="both"} 1.0' in metrics(proxy)


# --- switched off, malformed, dry run: forwarded unchanged ---------------------------


def raw_text_request(case: Case) -> bytes:
    return json.dumps({"model": "m", "messages": messages(case)}).encode()


def test_header_off_forwards_a_text_request_unchanged(upstream: RunningUpstream, proxy: str) -> None:
    raw = raw_text_request(markdown_case())
    response = post_raw(proxy, raw, **{"X-Tool-Pruning": "off"})
    assert response.status_code == 200
    assert chat_requests(upstream)[-1].body == raw
    assert "x-tool-pruning-tools" not in response.headers
    assert 'toolprune_requests_total{api="chat_completions",decision="disabled",path="none"} 1.0' in metrics(proxy)


def test_text_format_off_forwards_a_text_request_unchanged(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(text_format="off")
    raw = raw_text_request(hermes_case())
    response = post_raw(proxy, raw)
    assert response.status_code == 200
    assert chat_requests(upstream)[-1].body == raw
    assert "x-tool-pruning-tools" not in response.headers
    assert 'toolprune_requests_total{api="chat_completions",decision="passthrough",path="none"} 1.0' in metrics(proxy)


def test_malformed_hermes_block_is_forwarded_unchanged(upstream: RunningUpstream, proxy: str) -> None:
    tools = PLAYWRIGHT[:40]
    line = prompts.hermes_lines(tools)[20]
    system = prompts.hermes_prompt(tools).replace(line, line + ",", 1)  # not JSON any more
    case = Case("hermes", system, [], "Take a screenshot", "hermes")
    raw = raw_text_request(case)
    response = post_raw(proxy, raw)
    assert response.status_code == 200
    assert chat_requests(upstream)[-1].body == raw
    assert "x-tool-pruning-tools" not in response.headers
    assert 'toolprune_requests_total{api="chat_completions",decision="passthrough",path="none"} 1.0' in metrics(proxy)


def test_dry_run_reports_the_text_selection_but_forwards_the_original(
    upstream: RunningUpstream, proxy: str
) -> None:
    raw = raw_text_request(lines_case("dash"))
    response = post_raw(proxy, raw, **{"X-Tool-Pruning": "dry-run"})
    assert chat_requests(upstream)[-1].body == raw
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert offered == "40" and 0 < int(forwarded) < 40
    assert 'toolprune_requests_total{api="chat_completions",decision="dry_run",path="text"} 1.0' in metrics(proxy)


def test_a_block_that_pruning_would_enlarge_is_forwarded_whole(
    upstream: RunningUpstream, proxy: str
) -> None:
    """16 tools as "name - purpose" lines: eight of them and the meta-tool's menu of 16
    names would cost more than the whole block, so the request goes through unchanged."""
    raw = raw_text_request(lines_case("dash", GITHUB[:16]))
    response = post_raw(proxy, raw)
    assert response.status_code == 200 and response.headers["x-tool-pruning-tools"] == "16/16"
    assert response.headers["x-tool-pruning-small-catalog"] == "no_saving"
    assert chat_requests(upstream)[-1].body == raw
    assert 'toolprune_requests_total{api="chat_completions",decision="small_catalog",path="text"} 1.0' in metrics(proxy)


def test_a_block_too_large_for_the_context_is_pruned_whatever_that_saves(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    """The same block with a 500-token context: sent whole, its tools would pass their
    share of the context, so it is pruned."""
    proxy = start_proxy(context_tokens=500)
    raw = raw_text_request(lines_case("dash", GITHUB[:16]))
    response = post_raw(proxy, raw)
    forwarded, offered = response.headers["x-tool-pruning-tools"].split("/")
    assert offered == "16" and 0 < int(forwarded) < 16
    assert chat_requests(upstream)[-1].body != raw


def test_prose_prompts_are_not_touched(upstream: RunningUpstream, proxy: str) -> None:
    for system in (
        prompts.guidelines_prompt(),
        prompts.markdown_document_prompt(),
        prompts.fenced_examples_prompt("signatures"),
    ):
        raw = json.dumps({"model": "m", "messages": [{"role": "system", "content": system},
                                                     {"role": "user", "content": "hello"}]}).encode()
        response = post_raw(proxy, raw)
        assert chat_requests(upstream)[-1].body == raw
        assert "x-tool-pruning-tools" not in response.headers
    assert 'toolprune_requests_total{api="chat_completions",decision="passthrough",path="none"} 3.0' in metrics(proxy)


# --- a custom format from the policy file ----------------------------------------------


def test_custom_text_format_from_the_policy_file(
    upstream: RunningUpstream, start_proxy: ProxyFactory, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "[[text_formats]]\n"
        'name = "ops-bot"\n'
        'start = "<available_tools>"\n'
        'end = "</available_tools>"\n'
        "entry = '^tool (?P<name>[\\w-]+):'\n"
    )
    proxy = start_proxy(policy_file=policy)
    tools = GITHUB[40:70]
    entries = "".join(
        f"tool {prompts.tool_name(t)}: {prompts.lines_entry(t, 'dash').split(': ', 1)[1]}\n" for t in tools
    )
    system = f"You are an ops bot.\n<available_tools>\n{entries}</available_tools>\nBe brief.\n"
    response = post(proxy, {"model": "m", "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": "List the open pull requests in acme/shop-api"},
    ]})
    assert response.status_code == 200
    assert response.headers["x-tool-pruning-tools"].endswith("/30")
    forwarded = chat_requests(upstream)[-1].json()["messages"][0]["content"]
    names = [prompts.tool_name(t) for t in tools]
    kept = [n for n in names if f"tool {n}:" in forwarded]
    dropped = [n for n in names if n not in kept]
    assert kept and dropped
    head, rest = forwarded.split("<available_tools>\n", 1)
    inside, tail = rest.split("</available_tools>", 1)
    assert head == "You are an ops bot.\n" and tail == "\nBe brief.\n"
    original_lines = {line.split(":", 1)[0][5:]: line for line in entries.splitlines()}
    assert inside.splitlines() == [original_lines[n] for n in kept] + [others_line(dropped)]
    assert 'toolprune_requests_total{api="chat_completions",decision="pruned",path="text"} 1.0' in metrics(proxy)


# --- measurement (reported, not asserted) ----------------------------------------------

SIZES: dict[str, tuple[int, int, int, int]] = {}


@pytest.fixture(scope="module")
def size_report() -> Iterator[dict[str, tuple[int, int, int, int]]]:
    yield SIZES
    if SIZES:
        rows = [
            "",
            "system prompt size, default settings (tokens: estimate = chars/4)",
            (f"{'preset':<14}{'tools kept':>12}{'chars before':>14}{'chars after':>13}"
            f"{'~tok before':>13}{'~tok after':>12}{'saved':>8}"),
        ]
        for name, (kept, total, before, after) in SIZES.items():
            rows.append(
                f"{name:<14}{f'{kept}/{total}':>12}{before:>14}{after:>13}"
                f"{before // 4:>13}{after // 4:>12}{1 - after / before:>8.0%}"
            )
        print("\n".join(rows))


@pytest.mark.parametrize(
    "name,build",
    [
        ("hermes", lambda: hermes_case(PLAYWRIGHT)),
        ("markdown", markdown_case),
        ("lines-dash", lambda: lines_case("dash", GITHUB[:60])),
        ("lines-call", lambda: lines_case("call", GITHUB[:60])),
    ],
)
def test_measure_system_prompt_size_before_and_after(
    upstream: RunningUpstream, proxy: str, size_report: dict[str, tuple[int, int, int, int]],
    name: str, build: Any,
) -> None:
    case = build()
    response = post(proxy, {"model": "m", "messages": messages(case)})
    assert response.status_code == 200
    after = chat_requests(upstream)[-1].json()["messages"][0]["content"]
    kept = assert_pruned_block(case.system, after)
    size_report[name] = (len(kept), len(case.names), len(case.system), len(after))
