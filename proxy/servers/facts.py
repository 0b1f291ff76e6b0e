"""What the proxy knows of the model server behind it, and where each fact came from.

:class:`ServerFacts` is the server as a whole (which kind it is, how its prefix cache
keeps prompts, whether it streams tool calls, the setting that sets its context);
:class:`ModelFacts` is one model it serves (its context in tokens, whether llama.cpp runs
it and reads llama.cpp's request fields, where its tokenizer is). Every fact carries the
endpoint (or setting) it was read from, for ``/readyz`` and the ``upstream_server`` log
line. Each kind's module (``llama_server``, ``lemonade``, ``vllm``, ``ollama``,
``lmstudio``) reads them from that server's own endpoints; ``docs/servers/`` says which.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class PrefixCache(StrEnum):
    """How a server keeps prompts for reuse, as its documentation says.

    ``one_prompt``: each slot keeps the prompt it last evaluated, and a request goes to
    the slot whose prompt it shares most with (llama.cpp's server, so llama-server,
    Lemonade's llama.cpp backend, Ollama's runner, LM Studio): conversations of one agent
    take turns in one cache. ``block_hashed``: many prompts, cached by hashed blocks of
    tokens (vLLM's automatic prefix caching): each conversation keeps its own.
    ``unknown``: nothing is known (a gateway, another server).
    """

    ONE_PROMPT = "one_prompt"
    BLOCK_HASHED = "block_hashed"
    UNKNOWN = "unknown"


UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelFacts:
    """One model as its server reports it.

    ``context_tokens``: the prompt and answer tokens one request may take (None:
    unknown); ``context_source``: where that came from; ``provisional``: the model is not
    loaded, so its context may change when it loads (asked again soon);
    ``llama_cpp``: llama.cpp serves it and reads its request fields (``n_cache_reuse``,
    ``cache_prompt``); ``tokenize_url``: the endpoint that counts its tokens exactly
    (None: estimates); ``tokenize_model``: the model that endpoint's requests name (vLLM:
    the served model's id; None: they name none).
    """

    context_tokens: int | None = None
    context_source: str | None = None
    provisional: bool = False
    llama_cpp: bool = False
    tokenize_url: str | None = None
    tokenize_model: str | None = None


@dataclass(frozen=True)
class ServerFacts:
    """The server as a whole.

    ``kind``: a key of :data:`proxy.servers.probe.KIND_MODULES`, or ``unknown``;
    ``source``: the endpoint whose answer named it (None: nothing did); ``version``: as
    the server reports it (None: not reported); ``prefix_cache``: :class:`PrefixCache`; ``streams_tool_calls``: False for
    a server known to drop streamed tool calls (Ollama before v0.8.0);
    ``context_setting``: the server's own setting that sets a model's context (named in
    the log when a prompt would not fit); ``models``: the models it listed, with their
    facts, as read while identifying it (more are learned as requests name them).
    """

    kind: str = UNKNOWN
    source: str | None = None
    version: str | None = None
    prefix_cache: PrefixCache = PrefixCache.UNKNOWN
    streams_tool_calls: bool = True
    context_setting: str | None = None
    models: dict[str, ModelFacts] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return self.kind != UNKNOWN

    def shown(self) -> dict[str, Any]:
        """The server's facts as ``/readyz`` and the ``upstream_server`` log line show them
        (the models' are the probe's: :meth:`proxy.servers.probe.ServerProbe.shown`)."""
        shown = {name: value for name, value in asdict(self).items() if name != "models"}
        shown["prefix_cache"] = self.prefix_cache.value
        return shown


@dataclass(frozen=True)
class Overflow:
    """A server's answer that a request did not fit its context: ``message`` (the
    server's words), ``prompt_tokens`` and ``context_tokens`` where the server gave them
    (None: not given)."""

    message: str
    prompt_tokens: int | None = None
    context_tokens: int | None = None
