"""What the proxy learns from the upstream about prompt cost: its context size (llama-server
``GET /props``: ``default_generation_settings.n_ctx``, the context of one slot) and exact
token counts of tool definitions (llama-server ``POST /tokenize``).

Both are off the request path as far as possible: the context is fetched once (the first
acting request waits for it at most ``readiness_timeout_s``) and refreshed every
``upstream_props_refresh_s`` in the background; tool token counts are fetched in the
background for tools not counted yet, so a request uses the estimate now and exact counts
later. Only an upstream that answered ``/props`` is asked to tokenize. An upstream without
these endpoints (vLLM, Ollama, a gateway) answers 404: the proxy then uses
``TOOLPRUNE_CONTEXT_TOKENS`` and estimates, and asks again only after the refresh interval. API reference: llama.cpp ``tools/server/README.md`` (``/props``,
``/tokenize``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from config.settings import Settings
from proxy.http.errors import UpstreamError, UpstreamResponseInvalid, UpstreamTimeout
from proxy.http.upstream import Upstream, read_decoded
from proxy.log import get_logger
from selection.types import Tool, estimated_tokens

logger = get_logger("upstream_info")

#: Tools counted with ``/tokenize`` per background batch (one request each).
TOKENIZE_BATCH = 32
#: Exact counts kept (LRU by tool fingerprint): a few bytes each.
MAX_COUNTS = 100_000


class UpstreamInfo:
    """The upstream's context size and tokenizer, cached; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        upstream: Upstream,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._upstream = upstream
        self._clock = clock
        self._context: int | None = None
        self._props_at: float | None = None
        self._props_task: asyncio.Task[None] | None = None
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._pending: dict[str, Tool] = {}
        self._tokenize_task: asyncio.Task[None] | None = None
        self._tokenize_off_until = 0.0

    @property
    def exact_tokens(self) -> Mapping[str, int]:
        """Exact prompt tokens per tool fingerprint, as counted so far."""
        return self._counts

    @property
    def answers_props(self) -> bool:
        """Whether the upstream answered llama-server's ``/props`` (not asked while
        ``TOOLPRUNE_CONTEXT_TOKENS`` is set)."""
        return self._context is not None

    async def context_tokens(self) -> int | None:
        """The upstream's context per request in tokens: ``TOOLPRUNE_CONTEXT_TOKENS`` when
        set, else ``/props``'s (None while unknown). Never raises."""
        if self._settings.context_tokens is not None:
            return self._settings.context_tokens
        now = self._clock()
        due = self._props_at is None or now - self._props_at >= self._settings.upstream_props_refresh_s
        if due and (self._props_task is None or self._props_task.done()):
            self._props_at = now
            self._props_task = asyncio.create_task(self._fetch_props())
        if self._context is None and self._props_task is not None and not self._props_task.done():
            # Only until the first answer: a later refresh never holds a request.
            await asyncio.wait({self._props_task}, timeout=self._settings.readiness_timeout_s)
        return self._context

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of ``method path`` on the upstream's origin, within
        ``readiness_timeout_s`` seconds.

        Raises: UpstreamError (unreachable, timeout, a status of 400 or more, a body that
        is not JSON).
        """
        content = json.dumps(body).encode() if body is not None else b""
        headers = [(b"content-type", b"application/json")] if body is not None else []
        url = self._upstream.origin + path

        async def read() -> tuple[int, bytes]:
            response, _ = await self._upstream.send(method, url, headers, content)
            try:
                return response.status_code, await read_decoded(response)
            finally:
                await response.aclose()

        try:
            async with asyncio.timeout(self._settings.readiness_timeout_s):
                status, raw = await read()
        except TimeoutError as error:
            raise UpstreamTimeout(f"{path} did not answer in time") from error
        if status >= 400:
            raise UpstreamResponseInvalid(f"{path} answered HTTP {status}")
        try:
            return json.loads(raw)
        except ValueError as error:
            raise UpstreamResponseInvalid(f"{path} answered a body that is not JSON") from error

    async def _fetch_props(self) -> None:
        try:
            answer = await self._call("GET", "/props")
            n_ctx = answer["default_generation_settings"]["n_ctx"]
            if not isinstance(n_ctx, int) or n_ctx <= 0:
                raise ValueError(f"n_ctx is {n_ctx!r}")
        except (UpstreamError, ValueError, KeyError, TypeError) as error:
            logger.info("upstream_props_unavailable", extra={"fields": {"error": type(error).__name__}})
            return
        if n_ctx != self._context:
            logger.info("upstream_context", extra={"fields": {"n_ctx": n_ctx}})
        self._context = n_ctx

    def count_later(self, tools: Iterable[Tool]) -> None:
        """Have the tools not counted yet counted by the upstream in the background; only
        an upstream that answered ``/props`` (llama-server) is asked."""
        if self._context is None or self._clock() < self._tokenize_off_until:
            return
        for tool in tools:
            if tool.fingerprint not in self._counts:
                self._pending.setdefault(tool.fingerprint, tool)
        if self._pending and (self._tokenize_task is None or self._tokenize_task.done()):
            self._tokenize_task = asyncio.create_task(self._tokenize_pending())

    async def _tokenize_pending(self) -> None:
        while self._pending:
            batch = list(self._pending.items())[:TOKENIZE_BATCH]
            for key, tool in batch:
                count = await self._tokenize(tool)
                self._pending.pop(key, None)
                if count is None:
                    self._pending.clear()
                    self._tokenize_off_until = self._clock() + self._settings.upstream_props_refresh_s
                    return
                self._counts[key] = count
                while len(self._counts) > MAX_COUNTS:
                    self._counts.popitem(last=False)

    async def _tokenize(self, tool: Tool) -> int | None:
        """Tokens of the tool as a chat template renders it (its JSON, one per line)."""
        text = "\n" + _template_json(tool)
        try:
            answer = await self._call("POST", "/tokenize", {"content": text})
            tokens = answer["tokens"]
            if not isinstance(tokens, list):
                raise TypeError("tokens is not a list")
        except (UpstreamError, KeyError, TypeError) as error:
            logger.info("upstream_tokenize_unavailable", extra={"fields": {"error": type(error).__name__}})
            return None
        return len(tokens) or estimated_tokens(tool)

    async def aclose(self) -> None:
        """Cancel background fetches."""
        for task in (self._props_task, self._tokenize_task):
            if task is not None:
                task.cancel()


def _template_json(tool: Tool) -> str:
    """The definition as Jinja's ``tojson`` writes it (``json.dumps`` defaults)."""
    return json.dumps(tool.definition, ensure_ascii=False)
