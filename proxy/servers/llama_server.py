"""llama.cpp's ``llama-server``, known by its own endpoints (llama.cpp
``tools/server/README.md``; its answers as ``tools/server/server-context.cpp`` and
``server-common.cpp`` write them):

- ``GET /props`` at its root (the base URL without ``/v1``, then the origin):
  ``default_generation_settings.n_ctx`` is the context of one slot (``--ctx-size``
  divided among ``--parallel`` slots), ``total_slots`` their number, ``build_info`` its
  build. An answer with that ``n_ctx`` names the server.
- ``POST /tokenize`` at the same root, ``{"content": text}`` → ``{"tokens": [ids]}``.
- A prompt longer than a slot's context is refused before any prefill: HTTP 400
  ``{"error": {"code": 400, "type": "exceed_context_size_error", "message": "request (N
  tokens) exceeds the available context size (M tokens), try increasing it",
  "n_prompt_tokens": N, "n_ctx": M}}``.

Every slot keeps the prompt it last evaluated, and a request goes to the slot whose
prompt it shares most with (:attr:`PrefixCache.ONE_PROMPT`); it reads its own request
fields (``n_cache_reuse``, ``cache_prompt``) on chat completions and Responses.
"""

from __future__ import annotations

from typing import Any

from proxy.servers.asking import Asker, positive_int
from proxy.servers.facts import ModelFacts, Overflow, PrefixCache, ServerFacts

NAME = "llama-server"
#: One model, whatever a request names: its facts are kept under "".
ANY_MODEL = True
CONTEXT_SETTING = "llama-server --ctx-size (-c), divided among --parallel slots"
#: The ``type`` of llama-server's context-overflow error.
OVERFLOW_TYPE = "exceed_context_size_error"


async def identify(ask: Asker, base: str, roots: list[str]) -> ServerFacts | None:
    """llama-server's facts when a root answers ``/props`` as it does, else None."""
    for root in roots:
        props = await ask.get(root + "/props")
        facts = _from_props(props, root)
        if facts is not None:
            return facts
    return None


def _from_props(props: Any, root: str) -> ServerFacts | None:
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if n_ctx is None:
        return None
    build = props.get("build_info")
    model = ModelFacts(
        n_ctx, f"GET {root}/props default_generation_settings.n_ctx", llama_cpp=True,
        tokenize_url=root + "/tokenize",
    )
    return ServerFacts(
        NAME, f"GET {root}/props", build if isinstance(build, str) else None,
        PrefixCache.ONE_PROMPT, context_setting=CONTEXT_SETTING, models={"": model},
    )


async def model_facts(ask: Asker, base: str, roots: list[str], server: ServerFacts,
                      model: str | None) -> ModelFacts:
    """llama-server serves one model whatever the request names: what its ``/props``
    said when the server was identified (read again with it)."""
    return server.models.get("", ModelFacts())



def overflow(error: Any) -> Overflow | None:
    """llama-server's context-overflow error object (the value of ``error``), read."""
    if not isinstance(error, dict) or error.get("type") != OVERFLOW_TYPE:
        return None
    message = error.get("message")
    return Overflow(
        message if isinstance(message, str) else "the request exceeds the context size",
        positive_int(error.get("n_prompt_tokens")), positive_int(error.get("n_ctx")),
    )
