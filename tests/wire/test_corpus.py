"""The wire conformance corpus replayed through the proxy (see ``corpus/index.toml``).

Each recorded upstream answer is played in the meta round (it calls ``load_tools``) and
in the final round (``load_tools`` renamed to a real tool), to a streaming and to a plain
client. Real servers on loopback: the proxy under uvicorn in front of the scripted
upstream; the ``openai`` SDK as the client, its raw bytes also checked by the strict
schema validator. For each run: zero client-visible meta-calls, valid JSON arguments in
every re-issued history, usage = each round's last usage summed over rounds, one id and
``created``, and the outcome the index names; plain and streaming give the same message.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Chat, Recorded, Upstream, replay
from config.settings import Settings
from proxy.app import create_app
from tests.support.openai_schema import StreamReport, check_completion, check_stream
from tests.support.sse import chat_chunks

CORPUS = Path(__file__).parent / "corpus"
INDEX: dict[str, dict[str, str]] = tomllib.loads((CORPUS / "index.toml").read_text())
FILES = {path.stem: path for path in CORPUS.iterdir() if path.suffix in (".sse", ".json")}
PLAYWRIGHT: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
REAL = "browser_cookie_set"
LOAD_USAGE = {"prompt_tokens": 900, "completion_tokens": 9, "total_tokens": 909}
FINAL_USAGE = {"prompt_tokens": 1000, "completion_tokens": 3, "total_tokens": 1003}
COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass
class Servers:
    upstream: Upstream
    proxy: str


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    upstream = Upstream()
    with serve_in_thread(upstream.app) as origin:
        # The corpus replays through a pruned request: wait for the cold catalogue's index
        # (the default forwards it unpruned after 1.5 s, as on a busy machine).
        settings = Settings(
            upstream_url=origin + "/v1", max_tools=6, top_k=4, threshold=0.0,
            index_timeout_s=300.0,
        )
        with serve_in_thread(create_app(settings), server_header=False, date_header=False) as proxy:
            yield Servers(upstream, proxy)


class Tee(httpx.BaseTransport):
    """An httpx transport that keeps a copy of each response body as it is read."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.body = bytearray()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.body = captured = bytearray()
        stream = response.stream

        class Copying(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                for chunk in stream:  # type: ignore[union-attr]
                    captured.extend(chunk)
                    yield chunk

            def close(self) -> None:
                stream.close()  # type: ignore[union-attr]

        return httpx.Response(
            response.status_code, headers=response.headers, stream=Copying(),
            extensions=response.extensions, request=request,
        )


def last_usage(path: Path) -> dict[str, Any] | None:
    """The last usage a corpus answer carries (what one upstream round counts)."""
    raw = path.read_bytes()
    if path.suffix == ".json":
        return json.loads(raw).get("usage")
    usages = [c["usage"] for c in chat_chunks(raw.replace(b"\r\n", b"\n")) if c.get("usage")]
    return usages[-1] if usages else None


@dataclass
class Run:
    status: int
    raw: bytes
    sent: list[Recorded]
    message: dict[str, Any] | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    sdk_error: openai.APIError | None = None


def run(servers: Servers, shape: str, phase: str, stream: bool) -> Run:
    """One client request with the shape in ``phase``; the proxy's answer, checked."""
    path, expect = FILES[shape], INDEX[shape][phase]
    load = Chat(content=None, tool_calls=[{"id": "meta_0", "name": "load_tools",
                "arguments": json.dumps({"names": [REAL]})}], usage=LOAD_USAGE)
    if phase == "meta":
        replies = [replay(path)] + ([Chat(content="done", usage=FINAL_USAGE)] if expect == "reissue" else [])
    else:
        replies = [load, replay(path, {"load_tools": REAL})]
    before = len(servers.upstream.requests)
    servers.upstream.script(*replies)
    tee = Tee()
    client = openai.OpenAI(base_url=servers.proxy + "/v1", api_key="k", max_retries=0,
                           http_client=httpx.Client(transport=tee, timeout=60))
    options: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
    sdk_error = None
    try:
        # Each run its own agent (model name): a new conversation of the same agent would
        # start from the tools the previous runs loaded.
        run_id = f"{shape}/{phase}/{stream}"
        answer = client.chat.completions.create(
            model=f"m/{run_id}", messages=ASK, tools=PLAYWRIGHT, stream=stream,  # type: ignore[arg-type]
            extra_headers={"X-Conversation-Id": run_id}, **options,
        )
        sdk_chunks = list(answer) if stream else None  # the SDK's own parser
    except openai.APIError as error:
        sdk_error, sdk_chunks = error, None
    assert servers.upstream.drain() == 0, "the proxy made fewer upstream rounds than expected"
    sent = [r for r in servers.upstream.requests[before:] if r.path.endswith("/chat/completions")]
    status = getattr(sdk_error, "status_code", None) or 200
    result = Run(status, bytes(tee.body), sent, sdk_error=sdk_error)
    if stream and status == 200:
        report: StreamReport = check_stream(result.raw, json_arguments=expect != "broken_arguments")
        result.message, result.finish_reason = report.message, report.finish_reason
        result.usage, result.error = report.usage, report.error
        if sdk_chunks is not None:
            text = "".join(c.choices[0].delta.content or "" for c in sdk_chunks if c.choices)
            assert text == (report.message["content"] or "")
    elif status == 200 and sdk_error is None:
        body = json.loads(result.raw)
        message = check_completion(body, json_arguments=expect not in ("broken_arguments", "length"))
        result.message, result.finish_reason = message, body["choices"][0]["finish_reason"]
        result.usage = body.get("usage")
    else:
        result.error = json.loads(result.raw)["error"]
    return result


def check_common(result: Run, shape: str, phase: str) -> None:
    path = FILES[shape]
    assert "load_tools" not in result.raw.decode(), "a meta-call reached the client"
    for request in result.sent[1:]:
        for message in request.json()["messages"]:
            for call in message.get("tool_calls") or []:
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
    if result.error is not None:
        return
    rounds = [last_usage(path)]
    rounds.append(FINAL_USAGE if phase == "meta" and len(result.sent) == 2 else None)
    if phase == "final":
        rounds = [LOAD_USAGE, last_usage(path)]
    if not any(rounds):
        assert result.usage is None
        return
    expected = {key: sum(u[key] for u in rounds if u) for key in COUNTS}
    assert result.usage is not None
    assert {key: result.usage[key] for key in COUNTS} == expected


def check_outcome(result: Run, shape: str, phase: str) -> None:
    expect = INDEX[shape][phase]
    if expect in ("error", "no_finish"):
        assert result.error is not None and isinstance(result.error.get("message"), str)
        assert len(result.sent) == (1 if phase == "meta" else 2)
        if expect == "error" and shape == "error-event":
            assert "context length" in result.error["message"]
        return
    assert result.message is not None
    names = [c["function"]["name"] for c in result.message.get("tool_calls") or []]
    if phase == "meta":
        if expect == "reissue":
            assert len(result.sent) == 2 and not names
            assert result.message["content"].endswith("done")  # earlier text kept before it
            exchange = result.sent[1].json()["messages"][len(ASK):]
            assert exchange[0]["role"] == "assistant" and exchange[1]["role"] == "tool"
            results = [json.loads(m["content"]) for m in exchange[1:]]
            tools = [t["function"]["name"] for t in result.sent[1].json()["tools"]]
            assert REAL not in [t["function"]["name"] for t in result.sent[0].json()["tools"]]
            assert REAL in tools or all("error" in r for r in results)
        elif expect == "mixed":
            assert len(result.sent) == 1 and names == ["browser_navigate"]
        elif expect == "length":
            assert len(result.sent) == 1 and result.finish_reason == "length" and not names
        return
    assert len(result.sent) == 2
    if expect in ("calls", "broken_arguments"):
        assert names and set(names) <= {REAL, "browser_navigate", "browser_resize"}
    elif expect == "text":
        assert REAL in (result.message["content"] or "") and not names
    elif expect == "length":
        assert result.finish_reason == "length"


def final_message(result: Run) -> Any:
    if result.message is None:
        return ("error", result.error.get("message"))
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in result.message.get("tool_calls") or []]
    return result.message.get("content") or None, calls, result.finish_reason


def test_every_corpus_file_is_indexed() -> None:
    assert set(FILES) == set(INDEX)
    assert len(FILES) >= 25
    for entry in INDEX.values():
        assert entry["source"] and entry["meta"] and entry["final"]


@pytest.mark.parametrize("phase", ["meta", "final"])
@pytest.mark.parametrize("shape", sorted(INDEX))
def test_corpus_shape(servers: Servers, shape: str, phase: str) -> None:
    streamed = run(servers, shape, phase, stream=True)
    plain = run(servers, shape, phase, stream=False)
    for result in (streamed, plain):
        check_common(result, shape, phase)
        check_outcome(result, shape, phase)
    if INDEX[shape][phase] not in ("error", "no_finish"):
        assert final_message(streamed) == final_message(plain)
