"""Whether the upstream can stream tool calls, from the setting or from what the server
says it is.

Ollama's OpenAI endpoint before v0.8.0 dropped tool calls from streamed answers (a
streamed request with ``tools`` got empty content and finish ``stop``; ollama/ollama#9632
on 0.5.13; streamed tool calls with their parser came in v0.8.0, 2025-05-28, "Streaming
responses with tool calling" on ollama.com/blog). Ollama names itself and its version at
``GET /api/version`` (``{"version": "0.7.1"}``, its API reference); other servers answer
404 there. Such an upstream gets the acting turns of streaming clients non-streamed, and
the client's SSE is made from the JSON answer (:mod:`proxy.apis.chat.view`).
"""

from __future__ import annotations

import asyncio
import json
import re

from config.settings import Settings
from proxy.http.errors import ProxyError
from proxy.http.upstream import Upstream, read_decoded
from proxy.log import get_logger

logger = get_logger("upstream_kind")

#: The first Ollama release that streams tool calls (v0.8.0).
OLLAMA_STREAMS_TOOLS = (0, 8, 0)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def streams_tool_calls(version_answer: object) -> bool:
    """Whether an answer of ``GET /api/version`` names a server that streams tool calls:
    False for Ollama before v0.8.0, True for any other answer."""
    version = version_answer.get("version") if isinstance(version_answer, dict) else None
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None:
        return True
    return tuple(int(part) for part in match.groups()) >= OLLAMA_STREAMS_TOOLS


class StreamingSupport:
    """``TOOLPRUNE_UPSTREAM_STREAM`` when set; else asks the upstream once (the first
    acting request waits at most ``readiness_timeout_s`` for the answer)."""

    def __init__(self, settings: Settings, upstream: Upstream) -> None:
        self._setting = settings.upstream_stream
        self._timeout_s = settings.readiness_timeout_s
        self._upstream = upstream
        self._known: bool | None = None
        self._asking: asyncio.Task[None] | None = None

    async def streams_tool_calls(self) -> bool:
        """Whether streamed acting turns are sent upstream streamed. Never raises."""
        if self._setting is not None:
            return self._setting
        if self._known is None:
            if self._asking is None:
                self._asking = asyncio.create_task(self._ask())
            if not self._asking.done():
                await asyncio.wait({self._asking}, timeout=self._timeout_s)
        return True if self._known is None else self._known

    async def _ask(self) -> None:
        url = self._upstream.origin + "/api/version"
        try:
            async with asyncio.timeout(self._timeout_s):
                response, _ = await self._upstream.send("GET", url, [], b"")
                try:
                    raw = await read_decoded(response) if response.status_code == 200 else b""
                finally:
                    await response.aclose()
            answer = json.loads(raw) if raw else None
        except (ProxyError, TimeoutError, ValueError):
            answer = None
        self._known = streams_tool_calls(answer)
        if not self._known:
            logger.info("upstream_streams_no_tool_calls", extra={"fields": {
                "server": "ollama", "version": str(answer.get("version")) if isinstance(answer, dict) else None,
                "upstream_stream": False}})

    async def aclose(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
            await asyncio.gather(self._asking, return_exceptions=True)
