"""Learning which server the upstream is, and what it says of each model it serves.

Identification asks each kind's endpoints in this order, the first whose answer has that
server's shape names it (``docs/servers/index.md`` lists every endpoint):

1. llama-server: ``GET /props`` at the base URL without ``/v1``, then at the origin;
2. Lemonade: ``GET {base}/models`` with Lemonade's ``recipe`` fields;
3. vLLM: the same list with ``owned_by: "vllm"`` and ``max_model_len`` (then
   ``GET /version``);
4. LM Studio: ``GET /api/v1/models``, then ``GET /api/v0/models``;
5. Ollama: ``GET /api/version`` (after Lemonade, which answers Ollama's API too).

None answering: ``unknown`` (a gateway, another server): the proxy then works as
configured (``TOOLPRUNE_CONTEXT_TOKENS``, ``TOOLPRUNE_PREFIX_CACHE``; estimated tokens;
no llama.cpp fields). ``TOOLPRUNE_UPSTREAM_KIND`` names the kind instead (only its
endpoints are asked) or ``other`` (nothing is asked).

It runs at start-up (the ``upstream_server`` log line), again every
``upstream_props_refresh_s`` seconds, and after :data:`RETRY_S` when a server did not
answer (unreachable, starting, loading its model: 5xx). A model's facts are read when a
request first names it, again after :data:`PROVISIONAL_S` while it is not loaded, else
with the server's (``upstream_model`` log line). A request waits for them (at most
``readiness_timeout_s``) only while nothing is known; later reads never hold one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, Protocol

from config.settings import Settings
from proxy.http.upstream import Upstream
from proxy.log import get_logger
from proxy.servers import lemonade, llama_server, lmstudio, ollama, vllm
from proxy.servers.asking import Asker, api_key, urls
from proxy.servers.facts import ModelFacts, Overflow, ServerFacts
from proxy.servers.speeds import SpeedBook, SpeedShare
from proxy.servers.tokens import TokenCounter

logger = get_logger("upstream_server")

#: Seconds before a server that did not answer is asked again.
RETRY_S = 10.0
#: Seconds before the facts of a model that is not loaded yet are read again.
PROVISIONAL_S = 5.0
#: Seconds start-up waits for the server to be identified, at most.
STARTUP_WAIT_S = 1.0
#: Models whose facts are kept (requests may name any model).
MAX_MODELS = 64


class ServerKind(Protocol):
    """What each kind's module gives (:mod:`proxy.servers.llama_server` and the others)."""

    NAME: str
    #: It serves one model whatever a request names (its facts kept under "").
    ANY_MODEL: bool

    async def identify(self, ask: Asker, base: str, roots: list[str]) -> ServerFacts | None: ...

    async def model_facts(self, ask: Asker, base: str, roots: list[str], server: ServerFacts,
                          model: str | None) -> ModelFacts: ...

    def overflow(self, error: Any) -> Overflow | None: ...


#: The kinds, in the order identification tries them.
KIND_MODULES: dict[str, ServerKind] = {
    module.NAME: module for module in (llama_server, lemonade, vllm, lmstudio, ollama)  # type: ignore[misc]
}


class ServerProbe:
    """The upstream's :class:`ServerFacts` and its models' :class:`ModelFacts`, kept
    fresh (see the module docstring); ``tokens``: exact tool token counts; ``speeds``:
    each model's prefill and decode speeds, learned from its answers (and shared with
    the other replicas through ``speed_share``)."""

    def __init__(self, settings: Settings, upstream: Upstream,
                 clock: Callable[[], float] = time.monotonic,
                 speed_share: SpeedShare | None = None) -> None:
        self._settings = settings
        self._upstream = upstream
        self._clock = clock
        self._base, self._roots = urls(settings.upstream_url)
        self._facts = ServerFacts()
        self._due = 0.0
        self._identifying: asyncio.Task[None] | None = None
        self._models: dict[str, tuple[ModelFacts, float]] = {}
        self._learning: dict[str, asyncio.Task[None]] = {}
        self.tokens = TokenCounter(settings, upstream, clock)
        self.speeds = SpeedBook(settings, speed_share, clock)

    @property
    def current(self) -> ServerFacts:
        """The facts known now (nothing asked)."""
        return self._facts

    def shown(self) -> dict[str, Any]:
        """The facts as ``/readyz`` shows them: the server's and each model's learned."""
        shown = self._facts.shown()
        shown["models"] = {name or "(any)": asdict(self._with_setting(facts))
                           for name, (facts, _) in self._models.items()}
        shown["speeds"] = self.speeds.shown()
        return shown

    async def identify(self) -> ServerFacts:
        """Start identifying the server (start-up) and return its facts once known, or
        after :data:`STARTUP_WAIT_S` at most (it goes on in the background; a request
        waits for it as for any first identification)."""
        if self._settings.upstream_kind != "other":
            self._start_identifying()
            assert self._identifying is not None
            wait_s = min(STARTUP_WAIT_S, self._settings.readiness_timeout_s)
            await asyncio.wait({self._identifying}, timeout=wait_s)
        return self._facts

    async def facts(self) -> ServerFacts:
        """The server's facts; asked again when due. Never raises."""
        if self._settings.upstream_kind == "other":
            return self._facts
        if self._clock() >= self._due and (self._identifying is None or self._identifying.done()):
            self._start_identifying()
        task = self._identifying
        if not self._facts.known and task is not None and not task.done():
            await asyncio.wait({task}, timeout=self._settings.readiness_timeout_s)
        return self._facts

    async def model(self, model: str | None) -> ModelFacts:
        """What the server says of ``model`` (``TOOLPRUNE_CONTEXT_TOKENS`` over its
        context); read when due. Never raises."""
        server = await self.facts()
        if not server.known:
            return self._with_setting(ModelFacts())
        key = "" if KIND_MODULES[server.kind].ANY_MODEL else model or ""
        known = self._models.get(key)
        if known is None or self._clock() >= known[1]:
            task = self._learning.get(key)
            if task is None or task.done():
                self._learning = {k: t for k, t in self._learning.items() if not t.done()}
                task = self._learning[key] = asyncio.create_task(self._learn(server, key))
            if known is None:
                await asyncio.wait({task}, timeout=self._settings.readiness_timeout_s)
                known = self._models.get(key)
        return self._with_setting(known[0] if known else ModelFacts())

    async def streams_tool_calls(self) -> bool:
        """Whether streamed acting turns go upstream streamed: ``TOOLPRUNE_UPSTREAM_STREAM``
        when set, else False only for a server known to drop streamed tool calls."""
        if self._settings.upstream_stream is not None:
            return self._settings.upstream_stream
        return (await self.facts()).streams_tool_calls

    def _with_setting(self, facts: ModelFacts) -> ModelFacts:
        tokens = self._settings.context_tokens
        if tokens is None:
            return facts
        return replace(facts, context_tokens=tokens, context_source="TOOLPRUNE_CONTEXT_TOKENS",
                       provisional=False)

    def _start_identifying(self) -> None:
        self._due = self._clock() + self._settings.upstream_props_refresh_s
        self._identifying = asyncio.create_task(self._identify())

    async def _identify(self) -> None:
        ask = self._asker()
        wanted = self._settings.upstream_kind
        facts = None
        for name, kind in KIND_MODULES.items():
            if wanted in ("auto", name):
                facts = await kind.identify(ask, self._base, self._roots)
                if facts is not None:
                    break
        facts = facts or ServerFacts()
        if ask.failed and not facts.known:
            self._due = self._clock() + RETRY_S
            if self._facts.known:
                return  # a known server that did not answer now: kept, asked again soon
        changed = (facts.kind, facts.version, facts.source) != (
            self._facts.kind, self._facts.version, self._facts.source)
        if facts.kind != self._facts.kind:
            self._models.clear()
        self._facts = facts
        for name, model in facts.models.items():
            self._keep(name, model, log=False)  # in the upstream_server line
        if changed:
            logger.info("upstream_server", extra={"fields": {
                "upstream": self._settings.upstream_url, "unanswered": ask.failed,
                **self.shown()}})

    async def _learn(self, server: ServerFacts, key: str) -> None:
        ask = self._asker()
        kind = KIND_MODULES[server.kind]
        facts = await kind.model_facts(ask, self._base, self._roots, server, key or None)
        known = self._models.get(key)
        if ask.failed:  # what the server would have said is not known: asked again soon
            self._keep(key, known[0] if known else facts, wait=RETRY_S)
        else:
            self._keep(key, facts)

    def _keep(self, key: str, facts: ModelFacts, *, log: bool = True,
              wait: float | None = None) -> None:
        """Keep ``key``'s facts until they are due again (``wait`` seconds; by default
        :data:`PROVISIONAL_S` for a model not loaded, else the refresh interval)."""
        before = self._models.pop(key, None)
        if wait is None:
            wait = PROVISIONAL_S if facts.provisional else self._settings.upstream_props_refresh_s
        self._models[key] = (facts, self._clock() + wait)
        while len(self._models) > MAX_MODELS:
            self._models.pop(next(iter(self._models)))
        if log and (before is None or before[0] != facts):
            logger.info("upstream_model", extra={"fields": {
                "kind": self._facts.kind, "model": key, **asdict(self._with_setting(facts))}})

    def _asker(self) -> Asker:
        """An asker for one identification or model read: within ``readiness_timeout_s``."""
        deadline = time.monotonic() + self._settings.readiness_timeout_s
        return Asker(self._upstream, deadline, api_key(self._settings))

    async def aclose(self) -> None:
        """Cancel background reads."""
        tasks = [t for t in (self._identifying, *self._learning.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.tokens.aclose()
