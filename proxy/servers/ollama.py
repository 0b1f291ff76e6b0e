"""Ollama, known by its own endpoints at its root (ollama/ollama ``docs/api.md``,
``docs/context-length.mdx``, ``docs/faq.md``):

- ``GET /api/version`` → ``{"version": "0.x.y"}``: names the server (asked after the
  kinds whose endpoints are under the base URL: Lemonade answers Ollama's API too).
- ``GET /api/ps``: the loaded models, each with its ``name``/``model`` and, in recent
  releases, ``context_length``: the context it was loaded with, which every request gets
  (the ``CONTEXT`` column of ``ollama ps``).
- ``POST /api/show`` ``{"model"}``: ``parameters`` (the Modelfile's, ``num_ctx N`` among
  them when set) and ``model_info`` (``<general.architecture>.context_length``: what the
  model supports).
- A model not loaded yet loads with its Modelfile's ``num_ctx``, else
  ``OLLAMA_CONTEXT_LENGTH``, else Ollama's default: 2048 tokens before v0.6.7, 4096 from
  v0.6.7, and from v0.15.5 by VRAM (4096 under 24 GiB, 32768 to 48 GiB, 262144 above).
  The OpenAI-compatible API takes no ``num_ctx``. Until the model is loaded the proxy
  assumes the smallest of these (capped by what the model supports) and asks again.
- A prompt longer than that context is not refused: it is cut from the front behind a
  200 (the tool definitions, rendered first, are lost). Ollama's error bodies are
  ``{"error": "text"}`` (native) or OpenAI's shape (``/v1``); a refusal of an input
  longer than the context says "the input length exceeds the context length".
- Streamed tool calls came in v0.8.0 (ollama/ollama#9632 on 0.5.13: a streamed request
  with ``tools`` got no calls; "Streaming responses with tool calling", ollama.com/blog,
  2025-05-28).

Its runner keeps one prompt per parallel slot (``OLLAMA_NUM_PARALLEL``) and reuses the
longest shared prefix (:attr:`PrefixCache.ONE_PROMPT`); it reads no llama.cpp fields.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.servers.asking import Asker, positive_int
from proxy.servers.facts import ModelFacts, Overflow, PrefixCache, ServerFacts

ANY_MODEL = False
NAME = "ollama"
CONTEXT_SETTING = "OLLAMA_CONTEXT_LENGTH (ollama serve), or PARAMETER num_ctx in the model's Modelfile"
#: The first release that streams tool calls, and the one whose default context is 4096.
STREAMS_TOOL_CALLS = (0, 8, 0)
DEFAULT_4096_FROM = (0, 6, 7)
OVERFLOW_TEXT = "exceeds the context length"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")
_NUM_CTX = re.compile(r"^num_ctx\s+(\d+)\s*$", re.M)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``"0.9.2"`` → ``(0, 9, 2)``; None for anything else."""
    match = _VERSION.match(version) if isinstance(version, str) else None
    return tuple(int(part) for part in match.groups()) if match else None


async def identify(ask: Asker, base: str, roots: list[str]) -> ServerFacts | None:
    """Ollama's facts when a root answers ``/api/version`` with a version."""
    for root in roots:
        answer = await ask.get(root + "/api/version")
        version = answer.get("version") if isinstance(answer, dict) else None
        parsed = version_tuple(version)
        if parsed is not None:
            return ServerFacts(
                NAME, f"GET {root}/api/version", version, PrefixCache.ONE_PROMPT,
                streams_tool_calls=parsed >= STREAMS_TOOL_CALLS, context_setting=CONTEXT_SETTING,
            )
    return None


def full_name(model: str) -> str:
    """A model name as ``/api/ps`` lists it (``llama3.2`` is ``llama3.2:latest``)."""
    return model if ":" in model.rpartition("/")[2] else model + ":latest"


async def model_facts(ask: Asker, base: str, roots: list[str], server: ServerFacts,
                      model: str | None) -> ModelFacts:
    """The context the model is loaded with (``/api/ps``), else the one it will load with
    (``/api/show``, Ollama's default), provisional until it is loaded."""
    root = (server.source or "").removeprefix("GET ").removesuffix("/api/version")
    if not model:
        return ModelFacts()
    running = await ask.get(root + "/api/ps")
    listed = running.get("models") if isinstance(running, dict) else None
    for entry in listed if isinstance(listed, list) else []:
        names = {entry.get("name"), entry.get("model")} if isinstance(entry, dict) else set()
        loaded = positive_int(entry.get("context_length")) if isinstance(entry, dict) else None
        if full_name(model) in names and loaded is not None:
            return ModelFacts(loaded, f"GET {root}/api/ps context_length (loaded)")
    shown = await ask.post(root + "/api/show", {"model": model})
    return _not_loaded(shown, root, server.version)


def _not_loaded(shown: Any, root: str, version: str | None) -> ModelFacts:
    if not isinstance(shown, dict):
        return ModelFacts()
    parameters = shown.get("parameters")
    num_ctx = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if num_ctx is not None:
        return ModelFacts(int(num_ctx.group(1)), f"POST {root}/api/show parameters num_ctx",
                          provisional=True)
    info = shown.get("model_info")
    arch = info.get("general.architecture") if isinstance(info, dict) else None
    supported = positive_int(info.get(f"{arch}.context_length")) if isinstance(info, dict) else None
    parsed = version_tuple(version)
    default = 4096 if parsed is None or parsed >= DEFAULT_4096_FROM else 2048
    tokens = min(default, supported) if supported else default
    return ModelFacts(tokens, f"Ollama {version}'s smallest default num_ctx (model not loaded)",
                      provisional=True)



def overflow(error: Any) -> Overflow | None:
    """Ollama's refusal of an input longer than the context (either error shape)."""
    message = error.get("message") if isinstance(error, dict) else error
    if isinstance(message, str) and OVERFLOW_TEXT in message:
        return Overflow(message)
    return None
