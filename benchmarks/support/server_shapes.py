"""The scripted upstream answering as one model server does: its own endpoints in their
documented shapes, under the paths that server serves them, and its context-overflow
error body. A shape is a ``behaviour`` of :class:`benchmarks.support.upstream.Upstream`
(what it does not answer falls to the scripted upstream's own replies: chat completions,
Responses, Messages, ``/tokenize`` one token per word).

Sources, per server (facts only, the shapes written here): llama.cpp
``tools/server/README.md`` and ``server-common.cpp`` (``/props``, ``/tokenize``,
``exceed_context_size_error``); lemonade-sdk/lemonade ``docs/api/openai.md``,
``docs/api/llamacpp.md`` and ``error_types.h`` (``/api/v1/models``, ``/api/v1/tokenize``,
the wrapped backend error); vllm-project/vllm ``entrypoints/openai`` (model cards with
``max_model_len``, ``/tokenize``, ``/version``, the ``ErrorResponse``); ollama/ollama
``docs/api.md`` (``/api/version``, ``/api/ps``, ``/api/show``); lmstudio-ai/docs
(``/api/v1/models``, ``/api/v0/models``) and the error LM Studio's users report
(lmstudio-bug-tracker#237).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from benchmarks.support.replies import Raw, Reply, json_object
from benchmarks.support.upstream import Recorded

#: A web app's catch-all page (Lemonade with its web app installed answers any path).
HTML_PAGE = "<!doctype html><html><head><title>app</title></head><body></body></html>"


def _word_tokens(text: str) -> list[int]:
    return [zlib.crc32(word.encode()) % 32000 for word in text.split()]


@dataclass
class LlamaServer:
    """llama-server: ``/props`` (``n_ctx`` of a slot) at the root; the scripted
    upstream's ``/tokenize`` answers for it."""

    n_ctx: int = 8192
    build: str = "b6700-3f2dc74"

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method == "GET" and record.path == "/props":
            settings = {"n_ctx": self.n_ctx, "params": {"n_predict": -1}}
            return Raw(200, {"default_generation_settings": settings, "total_slots": 1,
                             "model_path": "model.gguf", "build_info": self.build})
        return None

    def overflow(self, prompt_tokens: int) -> Raw:
        """llama-server's refusal of a prompt longer than the slot's context."""
        return Raw(400, {"error": {
            "code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens,
            "n_ctx": self.n_ctx,
            "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
                       f"({self.n_ctx} tokens), try increasing it"}})


@dataclass
class Lemonade:
    """Lemonade under ``/api/v1``: its model list with ``recipe`` and ``context_length``,
    ``/api/v1/tokenize``; with ``web_app``, every other GET answers its HTML page."""

    models: dict[str, int] = field(default_factory=lambda: {"Qwen3-0.6B-GGUF": 8192})
    recipe: str = "llamacpp"
    web_app: bool = False

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method == "GET" and record.path == "/api/v1/models":
            return Raw(200, {"object": "list", "data": [
                {"id": name, "created": 1744173590, "object": "model", "owned_by": "lemonade",
                 "checkpoint": f"unsloth/{name}:Q4_0", "recipe": self.recipe, "size": 0.38,
                 "max_context_window": 40960, "context_length": context, "downloaded": True,
                 "suggested": True, "labels": ["tool-calling"]}
                for name, context in self.models.items()]})
        if record.method == "GET" and self.web_app:
            return Raw(200, HTML_PAGE, media_type="text/html")
        return None

    def overflow(self, prompt_tokens: int) -> Raw:
        """Lemonade's wrap of its llama-server's refusal (``details.response``)."""
        context = next(iter(self.models.values()))
        inner = LlamaServer(context).overflow(prompt_tokens).body
        return Raw(400, {"error": {
            "message": "llama-server request failed", "type": "context_length_exceeded",
            "details": {"status_code": 400, "response": inner}}})


@dataclass
class Vllm:
    """vLLM: model cards with ``max_model_len``, ``/version``, ``/tokenize`` (``prompt``)."""

    model: str = "Qwen/Qwen2.5-7B-Instruct"
    max_model_len: int = 8192
    version: str = "0.11.0"

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method == "GET" and record.path == "/v1/models":
            card = {"id": self.model, "object": "model", "created": 1744173590,
                    "owned_by": "vllm", "root": self.model, "parent": None,
                    "max_model_len": self.max_model_len, "permission": []}
            return Raw(200, {"object": "list", "data": [card]})
        if record.method == "GET" and record.path == "/version":
            return Raw(200, {"version": self.version})
        if record.method == "POST" and record.path == "/tokenize":
            tokens = _word_tokens(str(json_object(record.body).get("prompt", "")))
            return Raw(200, {"count": len(tokens), "max_model_len": self.max_model_len,
                             "tokens": tokens, "token_strs": None})
        return None

    def overflow(self, prompt_tokens: int) -> Raw:
        """vLLM's ``ErrorResponse`` for a request longer than ``max_model_len``."""
        message = (f"This model's maximum context length is {self.max_model_len} tokens. "
                   f"However, your request has {prompt_tokens} input tokens. Please reduce "
                   "the length of the input messages.")
        return Raw(400, {"error": {"message": message, "type": "BadRequestError",
                                   "param": None, "code": 400}})


@dataclass
class Ollama:
    """Ollama: ``/api/version``; ``/api/ps`` lists ``loaded`` models with the context
    they were loaded with; ``/api/show`` gives ``num_ctx`` (when the Modelfile sets it)
    and the architecture's context length."""

    version: str = "0.12.3"
    loaded: dict[str, int] = field(default_factory=dict)
    num_ctx: int | None = None
    supported: int = 32768

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method == "GET" and record.path == "/api/version":
            return Raw(200, {"version": self.version})
        if record.method == "GET" and record.path == "/api/ps":
            return Raw(200, {"models": [
                {"name": name, "model": name, "size": 5137025024, "digest": "2ae6f6dd7a3d",
                 "details": {"format": "gguf", "family": "qwen2"},
                 "expires_at": "2026-06-04T14:38:31.83753-07:00", "size_vram": 5137025024,
                 "context_length": context} for name, context in self.loaded.items()]})
        if record.method == "POST" and record.path == "/api/show":
            parameters = 'stop "<|im_end|>"'
            if self.num_ctx is not None:
                parameters = f"num_ctx {self.num_ctx}\n{parameters}"
            return Raw(200, {"parameters": parameters, "template": "{{ .Prompt }}",
                             "details": {"format": "gguf", "family": "qwen2"},
                             "model_info": {"general.architecture": "qwen2",
                                            "qwen2.context_length": self.supported},
                             "capabilities": ["completion", "tools"]})
        return None

    def overflow(self, prompt_tokens: int) -> Raw:
        """Ollama's refusal of an input longer than the context (OpenAI shape, ``/v1``)."""
        return Raw(400, {"error": {"message": "the input length exceeds the context length",
                                   "type": "invalid_request_error", "param": None, "code": None}})


@dataclass
class LmStudio:
    """LM Studio: ``/api/v1/models`` (0.4+; ``v0=True``: only ``/api/v0/models``, as
    0.3.x), ``loaded`` models with their loaded context, the others not loaded."""

    loaded: dict[str, int] = field(default_factory=lambda: {"qwen2.5-7b-instruct": 4096})
    not_loaded: tuple[str, ...] = ()
    max_context: int = 32768
    v0: bool = False

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method != "GET":
            return None
        if record.path == "/api/v1/models" and not self.v0:
            return Raw(200, {"models": [self._v1(name) for name in [*self.loaded, *self.not_loaded]]})
        if record.path == "/api/v0/models":
            return Raw(200, {"object": "list", "data": [self._v0(n) for n in [*self.loaded, *self.not_loaded]]})
        return None

    def _v1(self, name: str) -> dict[str, Any]:
        instances = [{"id": name, "config": {"context_length": self.loaded[name]}}] if name in self.loaded else []
        return {"type": "llm", "publisher": "lmstudio-community", "key": name,
                "display_name": name, "loaded_instances": instances,
                "max_context_length": self.max_context, "format": "gguf"}

    def _v0(self, name: str) -> dict[str, Any]:
        entry = {"id": name, "object": "model", "type": "llm", "compatibility_type": "gguf",
                 "state": "loaded" if name in self.loaded else "not-loaded",
                 "max_context_length": self.max_context}
        if name in self.loaded:
            entry["loaded_context_length"] = self.loaded[name]
        return entry

    def overflow(self, prompt_tokens: int) -> Raw:
        """LM Studio's refusal of a prompt longer than the loaded context."""
        context = next(iter(self.loaded.values()))
        return Raw(400, {"error": (
            f"Trying to keep the first {prompt_tokens} tokens when context the overflows. "
            f"However, the model is loaded with context length of only {context} tokens, "
            "which is not enough. Try to load the model with a larger context length, or "
            "provide a shorter input")})


def html_catch_all(record: Recorded) -> Reply | None:
    """A web app in front of the server: every GET that is not the OpenAI API's
    answers 200 with an HTML page."""
    if record.method == "GET" and "/v1/" not in record.path:
        return Raw(200, HTML_PAGE, media_type="text/html")
    return None
