"""The meta-tools (built in Chat Completions shape, :class:`selection.types.MetaTools`) in
an API's own tool shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from selection.types import MetaTools


def meta_entries(meta: MetaTools | None, shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The meta-tools (built in Chat Completions shape) in the API's tool shape."""
    if meta is None:
        return []
    return [shape(definition["function"]) for definition in meta.definitions]
