"""AMD's Lemonade Server (``lemond``), known by its own endpoints under its base URL
``/api/v1`` (lemonade-sdk/lemonade ``docs/api/openai.md``, ``docs/api/llamacpp.md``):

- ``GET {base}/models``: an OpenAI model list whose entries carry Lemonade's own fields,
  ``recipe`` (the backend: ``llamacpp``, ``flm``, ``ryzenai-llm``…), ``checkpoint``,
  ``owned_by: "lemonade"``, ``context_length`` (the tokens one request may take: the
  loaded value while the model runs, else its configured ``ctx_size``) and, when known,
  ``max_context_window`` (what the model supports). Entries with a ``recipe`` name the
  server.
- ``POST {base}/tokenize``, ``{"content": text}`` → ``{"tokens": [ids]}``: forwarded to
  llama.cpp's ``/tokenize`` of the most recently used loaded llama.cpp model.
- A ``llamacpp`` model runs in a llama-server that Lemonade starts: the request's
  llama.cpp fields (``cache_prompt``, ``n_cache_reuse``) reach it, its answers carry
  ``timings``, and its slot keeps its last prompt (:attr:`PrefixCache.ONE_PROMPT`).
- A backend's error is wrapped (``src/cpp/include/lemon/error_types.h``,
  ``ErrorResponse``): ``{"error": {"message", "type", "details": {"status_code",
  "response": <the backend's own error body>}}}``; a context overflow has type or code
  ``context_length_exceeded`` (Lemonade 11.7.0) with llama-server's
  ``exceed_context_size_error`` under ``details.response``.
"""

from __future__ import annotations

from typing import Any

from proxy.servers import llama_server
from proxy.servers.asking import Asker, positive_int
from proxy.servers.facts import ModelFacts, Overflow, PrefixCache, ServerFacts

ANY_MODEL = False
NAME = "lemonade"
CONTEXT_SETTING = "lemonade --ctx-size (LEMONADE_CTX_SIZE), or the model's ctx_size"
OVERFLOW_CODE = "context_length_exceeded"


async def identify(ask: Asker, base: str, roots: list[str]) -> ServerFacts | None:
    """Lemonade's facts when ``{base}/models`` lists models with a ``recipe``."""
    entries = _entries(await ask.get(base + "/models"))
    if not entries:
        return None
    models = {entry["id"]: _model(entry, base) for entry in entries}
    return ServerFacts(
        NAME, f"GET {base}/models", None, PrefixCache.ONE_PROMPT,
        context_setting=CONTEXT_SETTING, models=models,
    )


def _entries(answer: Any) -> list[dict[str, Any]]:
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return []
    return [entry for entry in data if isinstance(entry, dict)
            and isinstance(entry.get("id"), str) and isinstance(entry.get("recipe"), str)]


def _model(entry: dict[str, Any], base: str) -> ModelFacts:
    llama = entry["recipe"] == "llamacpp"
    context = positive_int(entry.get("context_length"))
    return ModelFacts(
        context, f"GET {base}/models context_length" if context else None,
        llama_cpp=llama, tokenize_url=base + "/tokenize" if llama else None,
    )


async def model_facts(ask: Asker, base: str, roots: list[str], server: ServerFacts,
                      model: str | None) -> ModelFacts:
    """The requested model's entry of ``{base}/models`` (none: nothing known)."""
    for entry in _entries(await ask.get(base + "/models")):
        if entry["id"] == model:
            return _model(entry, base)
    return ModelFacts()



def overflow(error: Any) -> Overflow | None:
    """Lemonade's wrapped context-overflow error (the value of ``error``): the
    llama-server error under ``details.response`` read for its counts."""
    if not isinstance(error, dict):
        return None
    details = error.get("details")
    response = details.get("response") if isinstance(details, dict) else None
    inner = response.get("error") if isinstance(response, dict) else None
    wrapped = llama_server.overflow(inner)
    if wrapped is not None:
        return wrapped
    if OVERFLOW_CODE not in (error.get("type"), error.get("code")):
        return None
    message = error.get("message")
    return Overflow(message if isinstance(message, str) else "the request exceeds the context size")
