"""What the proxy asks llama-server about itself, answered in front of a scripted upstream.

Against llama-server the proxy reads ``GET /props`` (the slot's context: it then knows the
upstream caches the prompt's prefix, asks for chunk reuse where the route reads it and
caps a block by the context) and counts tool definitions with ``POST /tokenize``. A
scripted upstream that decides a session's calls (``benchmarks.agent_sessions``) must
answer both as the llama-server that counts the session's tokens would, or the proxy
plans for another kind of server. :class:`LlamaFacts` wraps the upstream's behaviour:
both routes go to a real llama-server (``origin``), ``/props`` reporting the context of
the server the session is counted on (``n_ctx``: a simulated slot may be larger than the
server that tokenizes for it); without one (``--no-llama``),
``/props`` gives ``n_ctx`` and ``/tokenize`` answers 404, so the proxy estimates tool
tokens. Neither route touches llama-server's KV cache. Everything else goes to the
wrapped behaviour.

API reference: llama.cpp ``tools/server/README.md`` (``/props``, ``/tokenize``).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from benchmarks.support.replies import Raw, Reply
from benchmarks.support.upstream import Recorded

#: One ``/props`` or ``/tokenize`` call's bound (seconds); both answer at once.
FACTS_TIMEOUT_S = 30.0


class LlamaFacts:
    """``behaviour`` with llama-server's ``/props`` and ``/tokenize`` answered by the
    llama-server at ``origin`` (``http://host:port``), or as the module docstring says
    when ``origin`` is None (``n_ctx``: the context ``/props`` then reports, tokens)."""

    def __init__(self, behaviour: Callable[[Recorded], Reply | None], origin: str | None,
                 n_ctx: int) -> None:
        self.behaviour = behaviour
        self.origin = origin
        self.n_ctx = n_ctx

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method == "GET" and record.path == "/props":
            if self.origin is None:
                settings = {"n_ctx": self.n_ctx, "params": {}}
                return Raw(200, {"default_generation_settings": settings, "total_slots": 1})
            return self._forward(record)
        if record.method == "POST" and record.path == "/tokenize":
            if self.origin is None:
                return Raw(404, {"error": {"message": "no tokenizer", "type": "not_found_error"}})
            return self._forward(record)
        return self.behaviour(record)

    def _forward(self, record: Recorded) -> Raw:
        response = httpx.request(
            record.method, f"{self.origin}{record.path}", content=record.body or None,
            headers={"content-type": "application/json"}, timeout=FACTS_TIMEOUT_S)
        if record.path == "/props" and response.status_code == 200:
            props = response.json()
            props.setdefault("default_generation_settings", {})["n_ctx"] = self.n_ctx
            return Raw(200, props)
        return Raw(response.status_code, response.content)
