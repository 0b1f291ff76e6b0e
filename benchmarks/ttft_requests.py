"""The requests of ``benchmarks/ttft_llama.py``: waiting for its servers, reading the
proxy's decision log, one streamed chat completion timed to its first token, prompt-token
counts from llama-server's own tokenizer, and the proxy's planned bodies computed offline."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import Server

TOOLS_HEADER = "x-tool-pruning-tools"
STARTUP_TIMEOUT_S = 300.0
REQUEST_TIMEOUT = httpx.Timeout(1200.0, connect=10.0)


# --- processes ---------------------------------------------------------------------------
def wait_ok(client: httpx.Client, server: Server, path: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited during startup:\n{server.log_tail()}")
        try:
            if client.get(server.origin + path, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{server.name} not ready after {STARTUP_TIMEOUT_S} s")
        time.sleep(0.2)


class ProxyLog:
    """Reads the proxy's JSON log lines (``pruning_decision`` events) as they are written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def decisions(self) -> list[dict[str, Any]]:
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        found = []
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == "pruning_decision":
                found.append(entry)
        return found

    def next_decision(self, timeout_s: float = 3.0) -> dict[str, Any] | None:
        """The decision logged for the request just made (logged right after the stream)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.decisions()
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


# --- requests ----------------------------------------------------------------------------
@dataclass
class Result:
    status: str  # "ok", "400 (context)", "HTTP nnn"
    prompt_tokens: int | None = None  # usage.prompt_tokens, or the 400's n_prompt_tokens
    prompt_n: int | None = None  # timings.prompt_n
    cache_n: int | None = None  # timings.cache_n
    prompt_ms: float | None = None  # timings.prompt_ms (llama-server's prefill time)
    ttft_s: float | None = None
    total_s: float | None = None
    content: str = ""
    tools_header: str | None = None
    decision: dict[str, Any] | None = None


def chat_body(
    messages: list[dict[str, Any]], tools: list[Any] | None, max_tokens: int, cache_prompt: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct",
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": cache_prompt,
    }
    if tools:
        body["tools"] = tools
    return body


def stream_chat(
    client: httpx.Client, base_url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Result:
    """One streaming chat request: TTFT is the first chunk carrying content or a tool call."""
    started = time.perf_counter()
    first: float | None = None
    content: list[str] = []
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    with client.stream(
        "POST", base_url + "/chat/completions", json=body, headers=headers or {},
        timeout=REQUEST_TIMEOUT,
    ) as response:
        tools_header = response.headers.get(TOOLS_HEADER)
        if response.status_code != 200:
            raw = response.read()
            elapsed = time.perf_counter() - started
            try:
                error = json.loads(raw).get("error", {})
            except ValueError:
                error = {}
            if response.status_code == 400 and error.get("type") == "exceed_context_size_error":
                return Result("400 (context)", prompt_tokens=error.get("n_prompt_tokens"),
                              total_s=elapsed, tools_header=tools_header)
            return Result(f"HTTP {response.status_code}", total_s=elapsed, tools_header=tools_header)
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content"):
                    if first is None:
                        first = time.perf_counter()
                    content.append(delta.get("content") or "")
            if chunk.get("usage"):
                usage = chunk["usage"]
            if chunk.get("timings"):
                timings = chunk["timings"]
    total = time.perf_counter() - started
    return Result(
        "ok",
        prompt_tokens=(usage or {}).get("prompt_tokens"),
        prompt_n=(timings or {}).get("prompt_n"),
        cache_n=(timings or {}).get("cache_n"),
        prompt_ms=(timings or {}).get("prompt_ms"),
        ttft_s=None if first is None else first - started,
        total_s=total,
        content="".join(content),
        tools_header=tools_header,
    )


def count_tokens(client: httpx.Client, origin: str, body: dict[str, Any]) -> int:
    """Prompt tokens of a chat body with the model's template and tokenizer."""
    template_body = {k: body[k] for k in ("messages", "tools", "tool_choice") if k in body}
    response = client.post(origin + "/apply-template", json=template_body, timeout=120)
    response.raise_for_status()
    prompt = response.json()["prompt"]
    response = client.post(origin + "/tokenize", json={"content": prompt}, timeout=120)
    response.raise_for_status()
    return len(response.json()["tokens"])


# --- offline planning (the proxy's own code path) -----------------------------------------
@dataclass
class Planned:
    """What the proxy forwards for a first-turn body (planned offline, fresh state)."""

    pruned: bool
    forwarded: int = 0  # client tools forwarded
    with_meta: dict[str, Any] = field(default_factory=dict)
    without_meta: dict[str, Any] = field(default_factory=dict)
    meta_names: list[str] = field(default_factory=list)  # meta-tools, then the bridge


async def plan_bodies(bodies: dict[int, dict[str, Any]], upstream_url: str) -> dict[int, Planned]:
    """Plan each body with a Planner built as ``toolprune explain`` builds it, knowing the
    upstream at ``upstream_url`` (an OpenAI base URL) as the proxy knows it (its kind, so
    where late tools are delivered and whether the ``call_tool`` bridge is in the block)."""
    from config.selector import build_embedder, build_selector
    from config.settings import Settings
    from proxy.apis.chat.adapter import ChatRequest, read_chat
    from proxy.http.upstream import Upstream, create_session
    from proxy.metrics import Metrics
    from proxy.servers.probe import ServerProbe
    from proxy.state.store import MemoryStateStore
    from proxy.turn.planner import Planner
    from selection.catalog.cache import CatalogCache
    from selection.errors import SmallCatalog

    for key in [k for k in os.environ if k.startswith("TOOLPRUNE_")]:
        del os.environ[key]  # the same defaults as the proxy subprocess
    settings = Settings(upstream_url=upstream_url)
    planned: dict[int, Planned] = {}
    async with httpx.AsyncClient() as http, create_session(settings) as session:
        selector = build_selector(settings, build_embedder(settings, http), offline=True)
        server = ServerProbe(settings, Upstream(settings, session))
        await server.identify()
        try:
            for size, body in bodies.items():
                planner = Planner(
                    settings=settings, selector=selector,
                    store=MemoryStateStore(settings.state_ttl_s, 16), metrics=Metrics(),
                    on_late_error=lambda error: None, upstream=server,
                )
                catalogs = CatalogCache(0, max_tool_bytes=settings.max_tool_definition_bytes)
                request = ChatRequest(await read_chat(body, catalogs))
                try:
                    turn = await planner.plan(request.input, [])
                except SmallCatalog:
                    planned[size] = Planned(pruned=False)
                    continue
                planned[size] = Planned(
                    pruned=True,
                    forwarded=len(turn.plan.selection.tools),
                    with_meta=json.loads(request.upstream_body(turn, with_meta=True)),
                    without_meta=json.loads(request.upstream_body(turn, with_meta=False)),
                    meta_names=(sorted(turn.plan.meta.names) if turn.plan.meta else [])
                    + ([turn.plan.bridge] if turn.plan.bridge else []),
                )
        finally:
            await server.aclose()
            await selector.aclose()
    return planned
