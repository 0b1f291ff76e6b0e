"""What forwarding a tool costs in prompt tokens.

The upstream's tokenizer is the truth (llama-server ``POST /tokenize``); when the proxy has
no exact count for a tool it estimates one from the size of the tool's canonical JSON.

Calibration of :data:`BYTES_PER_TOKEN`: llama-server (SmolLM2-135M, Qwen2.5 tool template)
prompt tokens for the GitHub MCP server's tools grow from 3,014 at 8 tools to 32,933 at 117
while their compact JSON grows from 10,074 to 116,958 bytes: 3.57 bytes a token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from selection.catalog import Tool

#: Compact-JSON bytes of a tool definition per prompt token (see the module docstring).
BYTES_PER_TOKEN = 3.57


def estimated_tokens(tool: Tool) -> int:
    """Estimated prompt tokens of ``tool``'s definition (≥ 1), from its canonical JSON size."""
    return max(1, math.ceil(tool.size_bytes / BYTES_PER_TOKEN))


def tool_tokens(tool: Tool, exact: Mapping[str, int] | None = None) -> int:
    """Prompt tokens of ``tool``: the upstream's own count from ``exact`` (keyed by the
    tool's fingerprint) when known, else :func:`estimated_tokens`."""
    if exact is not None:
        count = exact.get(tool.fingerprint)
        if count is not None:
            return count
    return estimated_tokens(tool)
