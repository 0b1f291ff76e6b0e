"""Whether a planned prompt fits the model's context, and what to tell when it does not.

The token cap keeps the forwarded tools within the context, but it cannot shrink the
messages: a history longer than the context, or tools the request pins, can still make a
prompt the server cannot take. llama-server, Lemonade, vLLM and LM Studio refuse it (the
client gets the error in its API's shape: :mod:`proxy.servers.overflow`); Ollama cuts it
from the front behind a 200, tool definitions first, and the model answers as if it had
no tools. So a turn whose expected prompt (the plan's :class:`CacheExpectation`: system
prompt, tools, meta-tool, messages, estimated or counted) and the chat template's reserve
exceed the context gets ``X-Tool-Pruning-Warning`` and a ``prompt_exceeds_context`` log
line naming the server's setting that sets the context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.servers.facts import ModelFacts, ServerFacts
from selection.types import TEMPLATE_RESERVE_TOKENS, CacheExpectation

#: The response header of a turn whose prompt is expected not to fit.
WARNING_HEADER = b"x-tool-pruning-warning"


@dataclass(frozen=True)
class Shortfall:
    """A prompt expected to exceed the context: ``prompt_tokens`` (expected, template
    included), ``context_tokens`` and where that came from, the server's ``kind`` and
    its ``setting`` that sets the context."""

    prompt_tokens: int
    context_tokens: int
    context_source: str | None
    kind: str
    setting: str | None

    def header(self) -> bytes:
        """``context_overflow; prompt_tokens=N; context_tokens=M; server=KIND``."""
        return (f"context_overflow; prompt_tokens={self.prompt_tokens}; "
                f"context_tokens={self.context_tokens}; server={self.kind}").encode()

    def fields(self) -> dict[str, Any]:
        """The log line's fields: the counts, the source and the fix."""
        return {
            "server": self.kind, "prompt_tokens": self.prompt_tokens,
            "context_tokens": self.context_tokens, "context_source": self.context_source,
            "cut_silently": self.kind == "ollama",
            "fix": f"raise the context: {self.setting}" if self.setting else
                   "raise the server's context, or set TOOLPRUNE_CONTEXT_TOKENS to it",
        }


def shortfall(expectation: CacheExpectation | None, model: ModelFacts,
              server: ServerFacts) -> Shortfall | None:
    """The turn's shortfall, or None when it fits or nothing is known to compare."""
    if expectation is None or model.context_tokens is None:
        return None
    prompt = expectation.reused + expectation.evaluated + TEMPLATE_RESERVE_TOKENS
    if prompt <= model.context_tokens:
        return None
    return Shortfall(prompt, model.context_tokens, model.context_source, server.kind,
                     server.context_setting)
