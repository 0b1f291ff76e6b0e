"""The three acting APIs behind one test driver, so a rule of the turn is tested once,
parametrised over Chat Completions, Responses and Messages, plain and streamed.

Per API (:data:`APIS`): a request with the Playwright MCP catalogue (69 tools) in its
shape, the scripted upstream's answer in its shape (:meth:`Api.reply`), what the client
got read back into one shape (:class:`Answer`), and what each upstream request carried
(the tools offered, the meta exchanges appended). Shapes follow each API's reference:
Chat Completions (``choices``, ``chat.completion.chunk``), Responses (output items,
``response.*`` events), Messages (content blocks, ``message_*`` / ``content_block_*``
events).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Chat, Recorded, Upstream
from config.settings import Settings
from proxy.app import create_app
from proxy.http.sse import EventSplitter

CHAT_TOOLS: list[dict[str, Any]] = json.loads((REAL_CATALOGS / "playwright_mcp.json").read_text())
ASK = "Open https://example.com in the browser and take a screenshot"
#: A tool the first selection leaves out (loaded by the meta-calls of these tests).
LOADED = "browser_cookie_set"
#: Another one, for a second meta round.
LOADED_LATER = "browser_cookie_list"
#: A catalogue tool the model calls for the client.
REAL = "browser_take_screenshot"


@dataclass(frozen=True)
class Call:
    """A tool call: one the scripted model makes, or one the client got
    (:func:`tests.support.conversations.client_calls`); ``arguments`` as written (JSON
    text, maybe broken)."""

    id: str
    name: str
    arguments: str


def load(*names: str, call_id: str = "meta_1") -> Call:
    """A ``load_tools`` call for ``names``."""
    return Call(call_id, "load_tools", json.dumps({"names": list(names)}))


@dataclass
class Answer:
    """What the client got, in one shape for every API. ``ending``: ``stop``, ``calls``,
    ``cut`` (the output limit) or None (the response ended without one); ``error``: the
    error object (or event payload) the response ended with."""

    status: int
    raw: bytes
    text: str = ""
    calls: list[str] = field(default_factory=list)
    ending: str | None = None
    error: dict[str, Any] | None = None


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    """``(event name, JSON payload)`` of each data event of an SSE body (``[DONE]`` and
    comments left out)."""
    found = []
    for event in EventSplitter().feed(raw + b"\n\n"):
        if event.data is not None and event.data.strip() != "[DONE]":
            found.append((event.event, json.loads(event.data)))
    return found


def comments(raw: bytes) -> list[bytes]:
    """The comment events (``:`` lines: keep-alives) of an SSE body."""
    return [e.raw for e in EventSplitter().feed(raw) if e.data is None and e.raw.startswith(b":")]


class Api:
    """One API's shapes (see the module docstring)."""

    name = ""
    path = ""
    suffix = ""

    def body(self, stream: bool, ask: str = ASK) -> dict[str, Any]:
        """The request: ``ask`` as the user's words, the catalogue in the API's shape."""
        raise NotImplementedError

    def reply(self, text: str | None = None, calls: tuple[Call, ...] = (), *, cut: bool = False,
              generated: int | None = None) -> Any:
        """The upstream's answer: ``text``, then ``calls``; ``cut`` by the output limit;
        ``generated``: the tokens its ``usage`` says the model wrote (default: the scripted
        upstream's)."""
        raise NotImplementedError

    def read(self, response: httpx.Response, stream: bool) -> Answer:
        """What the client got (a non-200 answer: its status and JSON error)."""
        if response.status_code != 200:
            body = response.json()
            error = body.get("error") if isinstance(body, dict) else None
            return Answer(response.status_code, response.content, error=error)
        return (self.read_stream if stream else self.read_plain)(response.content)

    def read_plain(self, raw: bytes) -> Answer:
        raise NotImplementedError

    def read_stream(self, raw: bytes) -> Answer:
        raise NotImplementedError

    def offered(self, body: dict[str, Any]) -> list[str]:
        """The tool names an upstream request offered."""
        return [tool.get("name") for tool in body.get("tools", [])]

    def results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """``(call id, result text)`` of the meta-calls answered in an upstream request."""
        raise NotImplementedError

    def exchanged(self, body: dict[str, Any]) -> list[Call]:
        """The meta-calls appended to an upstream request, as the model is shown them."""
        raise NotImplementedError

    def sent(self, upstream: Upstream, since: int = 0) -> list[Recorded]:
        """The upstream requests of this API, from request number ``since`` on."""
        return [r for r in upstream.requests[since:] if r.path.endswith(self.suffix)]

    def post(self, proxy: str, stream: bool, headers: dict[str, str] | None = None,
             ask: str = ASK, **body: Any) -> Answer:
        response = httpx.post(proxy + self.path, json={**self.body(stream, ask), **body},
                              headers=headers or {}, timeout=300)
        return self.read(response, stream)


class ChatApi(Api):
    name, path, suffix = "chat", "/v1/chat/completions", "/chat/completions"

    def body(self, stream: bool, ask: str = ASK) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": ask}], "tools": CHAT_TOOLS,
                "stream": stream}

    def reply(self, text: str | None = None, calls: tuple[Call, ...] = (), *, cut: bool = False,
              generated: int | None = None) -> Chat:
        usage = None if generated is None else {
            "prompt_tokens": 100, "completion_tokens": generated, "total_tokens": 100 + generated}
        return Chat(content=text, finish_reason="length" if cut else None, usage=usage,
                    tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls] or None)

    @staticmethod
    def _ending(reason: Any) -> str | None:
        return {"length": "cut", "tool_calls": "calls", "stop": "stop"}.get(reason, reason)

    def read_plain(self, raw: bytes) -> Answer:
        choice = json.loads(raw)["choices"][0]
        message = choice["message"]
        calls = [c["function"]["name"] for c in message.get("tool_calls") or []]
        return Answer(200, raw, message.get("content") or "", calls, self._ending(choice["finish_reason"]))

    def read_stream(self, raw: bytes) -> Answer:
        answer = Answer(200, raw)
        for name, data in events(raw):
            if name == "error":
                answer.error = data["error"]
                continue
            for choice in data.get("choices", []):
                delta = choice.get("delta", {})
                answer.text += delta.get("content") or ""
                answer.calls += [c["function"]["name"] for c in delta.get("tool_calls") or []
                                 if c.get("function", {}).get("name")]
                if choice.get("finish_reason"):
                    answer.ending = self._ending(choice["finish_reason"])
        return answer

    def offered(self, body: dict[str, Any]) -> list[str]:
        return [tool["function"]["name"] for tool in body.get("tools", [])]

    def results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m.get("role") == "tool"]

    def exchanged(self, body: dict[str, Any]) -> list[Call]:
        return [Call(c["id"], c["function"]["name"], c["function"]["arguments"])
                for m in body["messages"] for c in m.get("tool_calls") or []]


class ResponsesApi(Api):
    name, path, suffix = "responses", "/v1/responses", "/responses"

    def body(self, stream: bool, ask: str = ASK) -> dict[str, Any]:
        tools = [{"type": "function", **tool["function"]} for tool in CHAT_TOOLS]
        return {"model": "m", "input": ask, "tools": tools, "stream": stream}

    def reply(self, text: str | None = None, calls: tuple[Call, ...] = (), *, cut: bool = False,
              generated: int | None = None) -> Responses:
        usage = None if generated is None else {
            "input_tokens": 100, "output_tokens": generated, "total_tokens": 100 + generated}
        return Responses(text=text, status="incomplete" if cut else "completed", usage=usage,
                         calls=[{"call_id": c.id, "name": c.name, "arguments": c.arguments} for c in calls])

    @staticmethod
    def _answer(raw: bytes, response: dict[str, Any]) -> Answer:
        answer = Answer(200, raw)
        for item in response.get("output", []):
            if item.get("type") == "message":
                answer.text += "".join(part.get("text", "") for part in item.get("content", []))
            elif item.get("type") == "function_call":
                answer.calls.append(item["name"])
        status = response.get("status")
        answer.ending = "cut" if status == "incomplete" else "calls" if answer.calls else "stop"
        return answer

    def read_plain(self, raw: bytes) -> Answer:
        return self._answer(raw, json.loads(raw))

    def read_stream(self, raw: bytes) -> Answer:
        """The terminal event's response; without one, the text deltas and the error."""
        answer = Answer(200, raw)
        for _, data in events(raw):
            kind = data.get("type")
            if kind == "error":
                answer.error = data
            elif kind == "response.output_text.delta":
                answer.text += data["delta"]
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                answer = self._answer(raw, data["response"])
        return answer

    def results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        items = body["input"] if isinstance(body["input"], list) else []
        return [(i["call_id"], i["output"]) for i in items if i.get("type") == "function_call_output"]

    def exchanged(self, body: dict[str, Any]) -> list[Call]:
        items = body["input"] if isinstance(body["input"], list) else []
        return [Call(i["call_id"], i["name"], i["arguments"]) for i in items
                if i.get("type") == "function_call"]


class MessagesApi(Api):
    name, path, suffix = "messages", "/v1/messages", "/messages"

    def body(self, stream: bool, ask: str = ASK) -> dict[str, Any]:
        tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                  "input_schema": t["function"]["parameters"]} for t in CHAT_TOOLS]
        return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": ask}],
                "tools": tools, "stream": stream}

    def reply(self, text: str | None = None, calls: tuple[Call, ...] = (), *, cut: bool = False,
              generated: int | None = None) -> Message:
        def given(arguments: str) -> Any:
            try:
                value = json.loads(arguments)
            except json.JSONDecodeError:
                return arguments  # broken JSON, as the model wrote it
            return value

        usage = None if generated is None else {"input_tokens": 100, "output_tokens": generated}
        return Message(text=text, stop_reason="max_tokens" if cut else None, usage=usage,
                       calls=[{"id": c.id, "name": c.name, "input": given(c.arguments)} for c in calls])

    @staticmethod
    def _ending(reason: Any) -> str | None:
        return {"max_tokens": "cut", "tool_use": "calls", "end_turn": "stop"}.get(reason, reason)

    def read_plain(self, raw: bytes) -> Answer:
        data = json.loads(raw)
        answer = Answer(200, raw, ending=self._ending(data.get("stop_reason")))
        for block in data["content"]:
            if block["type"] == "text":
                answer.text += block["text"]
            elif block["type"] == "tool_use":
                answer.calls.append(block["name"])
        return answer

    def read_stream(self, raw: bytes) -> Answer:
        answer = Answer(200, raw)
        for _, data in events(raw):
            kind = data.get("type")
            if kind == "error":
                answer.error = data["error"]
            elif kind == "content_block_start" and data["content_block"]["type"] == "tool_use":
                answer.calls.append(data["content_block"]["name"])
            elif kind == "content_block_delta" and data["delta"].get("type") == "text_delta":
                answer.text += data["delta"]["text"]
            elif kind == "message_delta":
                answer.ending = self._ending(data["delta"].get("stop_reason"))
        return answer

    def offered(self, body: dict[str, Any]) -> list[str]:
        return [tool["name"] for tool in body.get("tools", [])]

    def results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(b["tool_use_id"], b["content"]) for m in body["messages"] if m["role"] == "user"
                and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]

    def exchanged(self, body: dict[str, Any]) -> list[Call]:
        return [Call(b["id"], b["name"], json.dumps(b["input"])) for m in body["messages"]
                if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"]


#: Every acting API, by name.
APIS: dict[str, Api] = {api.name: api for api in (ChatApi(), ResponsesApi(), MessagesApi())}


class Bench:
    """One test's view of servers shared by a module: the API under test, whether the
    client streams, and a credential of its own (conversation and agent state are scoped
    by it, so tests never see each other's blocks); upstream requests counted from the
    test's start."""

    def __init__(self, upstream: Upstream, proxy: str, api: Api, stream: bool, test: str) -> None:
        self.upstream, self.proxy, self.api, self.stream = upstream, proxy, api, stream
        self.credential = {"Authorization": f"Bearer {test}-{api.name}-{stream}"}
        for suffix in (api.suffix, "/embeddings"):
            upstream.drain(suffix)
        self.since = len(upstream.requests)

    def script(self, *replies: Any) -> None:
        self.upstream.script(*replies, path=self.api.suffix)

    def post(self, headers: dict[str, str] | None = None, ask: str = ASK, **body: Any) -> Answer:
        return self.api.post(self.proxy, self.stream, {**self.credential, **(headers or {})},
                             ask, **body)

    def reading(self, ask: str = ASK) -> Reading:
        """The test's request sent, its answer read in a thread as it arrives."""
        return Reading(self, ask)

    def sent(self) -> list[Recorded]:
        """This test's upstream requests of its API."""
        return self.api.sent(self.upstream, self.since)

    def bodies(self) -> list[dict[str, Any]]:
        return [record.json() for record in self.sent()]


class Reading:
    """A request whose answer is read in a thread as its bytes arrive, so a test waits on
    what the client has received (a comment), never on a clock."""

    def __init__(self, run: Bench, ask: str) -> None:
        self.run = run
        self.raw = b""
        self.status = 0
        self.headers = httpx.Headers()
        self._done = False
        self._changed = threading.Condition()
        body = run.api.body(run.stream, ask)
        self._thread = threading.Thread(target=self._read, args=(body,), daemon=True)
        self._thread.start()

    def _read(self, body: dict[str, Any]) -> None:
        try:
            with httpx.stream("POST", self.run.proxy + self.run.api.path, json=body,
                              headers=self.run.credential, timeout=300) as response:
                self.status, self.headers = response.status_code, response.headers
                for chunk in response.iter_raw():
                    with self._changed:
                        self.raw += chunk
                        self._changed.notify_all()
        finally:
            with self._changed:
                self._done = True
                self._changed.notify_all()

    def comments(self) -> list[bytes]:
        with self._changed:
            return comments(self.raw)

    def wait_comments(self, count: int, timeout: float = 30) -> bool:
        """Whether the client has received at least ``count`` SSE comments (waits for them,
        at most ``timeout`` seconds; False when the answer ended or the time ran out)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: len(comments(self.raw)) >= count or self._done, timeout
            ) and len(comments(self.raw)) >= count

    def answer(self, timeout: float = 120) -> Answer:
        """What the client got, once the answer ended."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the answer did not end"
        response = httpx.Response(self.status, content=self.raw)
        return self.run.api.read(response, self.run.stream)


#: The matrix: every API, plain and streamed (``name``, ``stream``), and its test ids.
CASES = [(name, stream) for name in APIS for stream in (False, True)]
IDS = [f"{name}-{'streamed' if stream else 'plain'}" for name, stream in CASES]
#: A module's servers: the scripted upstream and its proxies by name.
Servers = tuple[Upstream, dict[str, str]]


@contextmanager
def turn_servers(variants: dict[str, dict[str, Any]]) -> Iterator[Servers]:
    """The scripted upstream and one proxy in front of it per variant (its ``Settings``
    overrides; None: the setting left unset), each pruning the 69 tools to at most 6
    (top-k 4) and waiting for a cold catalogue's index (the first request is pruned like
    the later ones)."""
    upstream = Upstream()
    defaults = {"max_tools": 6, "top_k": 4, "threshold": 0.0, "index_timeout_s": 300.0}
    with serve_in_thread(upstream.app) as origin, ExitStack() as stack:
        proxies = {
            name: stack.enter_context(serve_in_thread(create_app(Settings(
                upstream_url=origin + "/v1",
                **{key: value for key, value in {**defaults, **overrides}.items()
                   if value is not None},
            )), server_header=False, date_header=False))
            for name, overrides in variants.items()
        }
        yield upstream, proxies


def bench(servers: Servers, proxy: str, request: pytest.FixtureRequest, name: str,
          stream: bool) -> Bench:
    """The bench of the test ``request`` runs (``name``, ``stream``: its parameters) on
    the proxy named ``proxy``."""
    upstream, proxies = servers
    return Bench(upstream, proxies[proxy], APIS[name], stream, request.node.originalname)
