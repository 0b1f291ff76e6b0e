"""LM Studio's server (``lms server start``), known by its own REST API at its root
(lmstudio-ai/docs ``1_developer/2_rest/list.md`` and ``endpoints.mdx``):

- ``GET /api/v1/models`` (LM Studio 0.4+): ``{"models": [{"key", "type",
  "loaded_instances": [{"id", "config": {"context_length"}}], "max_context_length"}]}``:
  a loaded instance's ``context_length`` is what a request gets.
- ``GET /api/v0/models`` (0.3.6+): ``{"data": [{"id", "type", "state": "loaded" |
  "not-loaded", "max_context_length", "loaded_context_length"}]}``
  (``loaded_context_length`` while loaded, in releases that report it).
  Either list names the server.
- A model not loaded is loaded on the first request with its load settings: its context
  is not known until then (asked again soon).
- A prompt longer than the loaded context is refused with an error that names both
  counts ("Trying to keep the first N tokens when context the overflows. However, the
  model is loaded with context length of only M tokens…", later "…(n_keep: N >= n_ctx:
  M)…"), the error a string or an object with ``message``.

Its engines keep the last prompt of a loaded model (:attr:`PrefixCache.ONE_PROMPT`); no
tokenizer endpoint; no llama.cpp request fields.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.servers.asking import Asker, positive_int
from proxy.servers.facts import ModelFacts, Overflow, PrefixCache, ServerFacts

ANY_MODEL = False
NAME = "lmstudio"
CONTEXT_SETTING = "the model's context length in LM Studio's load settings (lms load --context-length)"
_OVERFLOWS = (
    re.compile(r"keep the first (\d+) tokens when context the overflows.*?context length of only (\d+)", re.S),
    re.compile(r"n_keep: (\d+) >= n_ctx: (\d+)"),
)


async def identify(ask: Asker, base: str, roots: list[str]) -> ServerFacts | None:
    """LM Studio's facts when a root answers its model list (v1, then v0)."""
    for root in roots:
        for path in ("/api/v1/models", "/api/v0/models"):
            models = _models(await ask.get(root + path), f"GET {root}{path}")
            if models is not None:
                return ServerFacts(
                    NAME, f"GET {root}{path}", None, PrefixCache.ONE_PROMPT,
                    context_setting=CONTEXT_SETTING, models=models,
                )
    return None


def _models(answer: Any, source: str) -> dict[str, ModelFacts] | None:
    """The models of a v1 or v0 list (None: neither shape)."""
    if not isinstance(answer, dict):
        return None
    if isinstance(v1 := answer.get("models"), list):
        entries = [e for e in v1 if isinstance(e, dict) and isinstance(e.get("key"), str)
                   and isinstance(e.get("loaded_instances"), list)]
        return {e["key"]: _v1_model(e, source) for e in entries} if entries else None
    v0 = answer.get("data")
    entries = [e for e in v0 if isinstance(e, dict) and isinstance(e.get("id"), str)
               and e.get("state") in ("loaded", "not-loaded")] if isinstance(v0, list) else []
    return {e["id"]: _v0_model(e, source) for e in entries} if entries else None


def _v1_model(entry: dict[str, Any], source: str) -> ModelFacts:
    for instance in entry["loaded_instances"]:
        config = instance.get("config") if isinstance(instance, dict) else None
        context = positive_int(config.get("context_length")) if isinstance(config, dict) else None
        if context is not None:
            return ModelFacts(context, f"{source} loaded_instances[].config.context_length")
    return ModelFacts(provisional=True)


def _v0_model(entry: dict[str, Any], source: str) -> ModelFacts:
    context = positive_int(entry.get("loaded_context_length"))
    if entry["state"] == "loaded" and context is not None:
        return ModelFacts(context, f"{source} loaded_context_length")
    return ModelFacts(provisional=entry["state"] != "loaded")


async def model_facts(ask: Asker, base: str, roots: list[str], server: ServerFacts,
                      model: str | None) -> ModelFacts:
    """The requested model as the list that named the server reports it now."""
    source = server.source or ""
    models = _models(await ask.get(source.removeprefix("GET ")), source) or {}
    return models.get(model or "", ModelFacts())


def overflow(error: Any) -> Overflow | None:
    """LM Studio's refusal of a prompt longer than the loaded context."""
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        return None
    for pattern in _OVERFLOWS:
        if match := pattern.search(message):
            return Overflow(message, int(match.group(1)), int(match.group(2)))
    return None
