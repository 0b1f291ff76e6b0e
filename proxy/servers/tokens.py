"""Exact prompt tokens of tool definitions, counted by the server's own tokenizer in the
background (a request uses the estimate now and exact counts later).

Only a model whose facts name a tokenizer endpoint (:attr:`ModelFacts.tokenize_url`) is
asked: llama-server and Lemonade's llama.cpp models take ``{"content": text}``, vLLM
``{"model", "prompt", "add_special_tokens": false}``; all answer ``{"tokens": [ids]}``
(llama.cpp ``tools/server/README.md``; vLLM ``TokenizeResponse``). A tokenizer that fails
is not asked again for ``upstream_props_refresh_s`` seconds. Counts are kept per
tokenizer (URL and model), LRU by tool fingerprint.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

from config.settings import Settings
from proxy.http.upstream import Upstream
from proxy.log import get_logger
from proxy.servers.asking import Asker, api_key
from proxy.servers.facts import ModelFacts
from selection.types import Tool, estimated_tokens

logger = get_logger("upstream_tokens")

#: Tools counted per background batch (one request each).
TOKENIZE_BATCH = 32
#: Exact counts kept per tokenizer (LRU by tool fingerprint): a few bytes each.
MAX_COUNTS = 100_000
#: A tokenizer is named by its URL and the model its requests name ("" for none).
Tokenizer = tuple[str, str]


def tokenizer(facts: ModelFacts) -> Tokenizer | None:
    """Which tokenizer counts the tokens of the model ``facts`` describe (None: none,
    estimates): keyed by the model the server serves, never by the name a request gave."""
    if facts.tokenize_url is None:
        return None
    return facts.tokenize_url, facts.tokenize_model or ""


def tokenize_body(of: Tokenizer, text: str) -> dict[str, object]:
    """The request body that counts ``text``: vLLM's when the tokenizer names a model."""
    if of[1]:
        return {"model": of[1], "prompt": text, "add_special_tokens": False}
    return {"content": text}


class TokenCounter:
    """The exact counts per tokenizer, and the background task that adds to them."""

    def __init__(self, settings: Settings, upstream: Upstream,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._upstream = upstream
        self._clock = clock
        self._counts: dict[Tokenizer, OrderedDict[str, int]] = {}
        self._pending: dict[Tokenizer, dict[str, Tool]] = {}
        self._off_until: dict[Tokenizer, float] = {}
        self._task: asyncio.Task[None] | None = None

    def exact(self, of: Tokenizer | None) -> Mapping[str, int] | None:
        """Exact prompt tokens per tool fingerprint as counted so far (None: no tokenizer)."""
        return None if of is None else self._counts.setdefault(of, OrderedDict())

    def count_later(self, of: Tokenizer | None, tools: Iterable[Tool]) -> None:
        """Have the tools ``of`` has not counted yet counted in the background."""
        if of is None or self._clock() < self._off_until.get(of, 0.0):
            return
        counted = self._counts.setdefault(of, OrderedDict())
        pending = self._pending.setdefault(of, {})
        for tool in tools:
            if tool.fingerprint not in counted:
                pending.setdefault(tool.fingerprint, tool)
        if pending and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._count_pending())

    async def _count_pending(self) -> None:
        while of := next((key for key, tools in self._pending.items() if tools), None):
            pending, counted = self._pending[of], self._counts[of]
            for key, tool in list(pending.items())[:TOKENIZE_BATCH]:
                count = await self._count(of, tool)
                pending.pop(key, None)
                if count is None:
                    pending.clear()
                    self._off_until[of] = self._clock() + self._settings.upstream_props_refresh_s
                    break
                counted[key] = count
                while len(counted) > MAX_COUNTS:
                    counted.popitem(last=False)

    async def _count(self, of: Tokenizer, tool: Tool) -> int | None:
        """Tokens of the tool as a chat template renders it (its JSON, one per line)."""
        text = "\n" + json.dumps(tool.definition, ensure_ascii=False)  # Jinja's ``tojson``
        deadline = time.monotonic() + self._settings.readiness_timeout_s
        ask = Asker(self._upstream, deadline, api_key(self._settings))
        answer = await ask.post(of[0], tokenize_body(of, text))
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            logger.info("upstream_tokenize_unavailable", extra={"fields": {"url": of[0]}})
            return None
        return len(tokens) or estimated_tokens(tool)

    async def aclose(self) -> None:
        """Cancel the background count."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
