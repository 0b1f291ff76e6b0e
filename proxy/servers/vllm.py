"""vLLM's OpenAI-compatible server (``vllm serve``), known by its own endpoints
(vllm-project/vllm ``vllm/entrypoints/openai``: ``api_server.py``, ``protocol.py``):

- ``GET {base}/models``: model cards with ``owned_by: "vllm"`` and ``max_model_len``
  (``--max-model-len``: the prompt and answer tokens one request may take). Such cards
  name the server.
- ``GET /version`` at its root → ``{"version": "0.x.y"}``.
- ``POST /tokenize`` at its root, ``{"model", "prompt", "add_special_tokens"}`` →
  ``{"count", "max_model_len", "tokens"}``.
- A request longer than ``max_model_len`` is refused: HTTP 400, an ``ErrorResponse``
  (``{"error": {"message", "type": "BadRequestError", "param", "code": 400}}``; before
  v0.10 the same fields at the top level with ``"object": "error"``) whose message says
  "This model's maximum context length is M tokens" and the request's tokens ("However,
  you requested N tokens (P in the messages, …)", "your request has P input tokens").

Its automatic prefix caching keeps many prompts by hashed blocks of tokens
(:attr:`PrefixCache.BLOCK_HASHED`); it reads no llama.cpp fields.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.servers.asking import Asker, positive_int
from proxy.servers.facts import ModelFacts, Overflow, PrefixCache, ServerFacts

ANY_MODEL = False
NAME = "vllm"
CONTEXT_SETTING = "vllm serve --max-model-len"
_CONTEXT = re.compile(r"maximum context length is (\d+)")
#: The request's prompt tokens in vLLM's messages, newest wording first.
_PROMPT = (
    re.compile(r"request has (\d+) input tokens"),
    re.compile(r"at least (\d+) input tokens"),
    re.compile(r"\((\d+) in the messages"),
)


async def identify(ask: Asker, base: str, roots: list[str]) -> ServerFacts | None:
    """vLLM's facts when ``{base}/models`` lists its model cards."""
    cards = _cards(await ask.get(base + "/models"))
    if not cards:
        return None
    version = await ask.get(roots[0] + "/version")
    models = {card["id"]: _model(card, base, roots) for card in cards}
    return ServerFacts(
        NAME, f"GET {base}/models",
        version.get("version") if isinstance(version, dict) else None,
        PrefixCache.BLOCK_HASHED, context_setting=CONTEXT_SETTING, models=models,
    )


def _cards(answer: Any) -> list[dict[str, Any]]:
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return []
    return [card for card in data if isinstance(card, dict) and card.get("owned_by") == "vllm"
            and isinstance(card.get("id"), str) and positive_int(card.get("max_model_len"))]


def _model(card: dict[str, Any], base: str, roots: list[str]) -> ModelFacts:
    return ModelFacts(
        card["max_model_len"], f"GET {base}/models max_model_len",
        tokenize_url=roots[0] + "/tokenize", tokenize_model=card["id"],
    )


async def model_facts(ask: Asker, base: str, roots: list[str], server: ServerFacts,
                      model: str | None) -> ModelFacts:
    """The requested model's card; one model served: its card whatever the name."""
    cards = _cards(await ask.get(base + "/models"))
    for card in cards:
        if card["id"] == model or len(cards) == 1:
            return _model(card, base, roots)
    return ModelFacts()



def overflow(error: Any) -> Overflow | None:
    """vLLM's context-length error (its ``ErrorResponse``, or the value of ``error``)."""
    message = error.get("message") if isinstance(error, dict) else None
    context = _CONTEXT.search(message) if isinstance(message, str) else None
    if message is None or context is None:
        return None
    prompt = next((int(m.group(1)) for p in _PROMPT if (m := p.search(message))), None)
    return Overflow(message, prompt, int(context.group(1)))
