"""What forwarding a tool costs in prompt tokens.

The upstream's tokenizer is the truth (llama-server ``POST /tokenize``); when the proxy has
no exact count for a tool it estimates one from the size of the tool's canonical JSON.

Calibration of :data:`BYTES_PER_TOKEN`: llama-server (SmolLM2-135M, Qwen2.5 tool template)
prompt tokens for the GitHub MCP server's tools grow from 3,014 at 8 tools to 32,933 at 117
while their compact JSON grows from 10,074 to 116,958 bytes: 3.57 bytes a token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from selection.catalog.catalog import Catalog, Tool

#: Compact-JSON bytes of a tool definition per prompt token (see the module docstring).
BYTES_PER_TOKEN = 3.57
#: A bound on ``search_tools``' definition without its group names and tier: its fixed
#: text and parameters (95 tokens estimated on the GitHub MCP server's catalogue), rounded
#: up.
SEARCH_TOOLS_TOKENS = 120


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


def catalog_tokens(catalog: Catalog) -> int:
    """Estimated prompt tokens of every function tool of ``catalog`` together, from their
    compact-JSON size (:data:`~selection.catalog.tokens.BYTES_PER_TOKEN`); O(1) after the first call."""
    return math.ceil(catalog.size_bytes / BYTES_PER_TOKEN)


def expected_saving(catalog: Catalog, top_k: int, tier_size: int) -> float:
    """The share of ``catalog``'s schema tokens a pruned first turn is expected to save:
    1 − (``top_k`` tools at the catalogue's mean cost + the meta-tool's bound,
    :func:`meta_reserve_tokens`, its tier no longer than the tools left out) /
    :func:`catalog_tokens`. Negative when the pruned turn would cost more than the whole
    catalogue; 0 for an empty one."""
    total = catalog_tokens(catalog)
    if not len(catalog) or total <= 0:
        return 0.0
    kept = min(top_k, len(catalog))
    tier = min(tier_size, len(catalog) - kept)
    pruned = kept * total / len(catalog) + meta_reserve_tokens(catalog, tier)
    return 1.0 - pruned / total


def meta_reserve_tokens(catalog: Catalog, tier_size: int,
                        search_groups: Sequence[str] | None = None) -> int:
    """A bound on the meta-tool's prompt tokens and a tier of ``tier_size`` lines (name and
    short purpose, ~25 tokens each) in it. ``load_tools`` (``search_groups`` None) holds
    an enum of every tool name of ``catalog`` (each quoted, with a separator; the names'
    length is computed once per catalogue:
    :attr:`~selection.catalog.catalog.Catalog.name_chars`); ``search_tools``, offered for
    a catalogue too large to list, holds no names but those of the groups its description
    lists (``search_groups``) beside its fixed text (:data:`SEARCH_TOOLS_TOKENS`)."""
    if search_groups is None:
        listed = math.ceil((catalog.name_chars + 3 * len(catalog)) / BYTES_PER_TOKEN)
    else:
        group_chars = sum(len(name) + 2 for name in search_groups)
        listed = SEARCH_TOOLS_TOKENS + math.ceil(group_chars / BYTES_PER_TOKEN)
    return listed + 25 * tier_size
