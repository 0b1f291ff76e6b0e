"""Flat ``tools`` arrays (Responses, Messages): reading them into a catalogue, and the
meta-tools in an API's own tool shape. Each API says which entries are its function
tools and where their JSON schema is (:mod:`proxy.apis.responses.adapter`,
:mod:`proxy.apis.messages.adapter`); only those are pruned and counted, the others are
forwarded always and as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from selection.catalog import Catalog, build_catalog, parse_function
from selection.errors import CatalogError
from selection.meta_tools import MetaTools


def parse_flat_tools(
    tools: Any, is_function: Callable[[Mapping[str, Any]], bool], schema_key: str
) -> Catalog:
    """Parse a flat ``tools`` array: entries for which ``is_function`` holds become
    catalogue tools (``schema_key`` names their JSON-schema field), the rest are kept in
    ``others``. Raises CatalogError when ``tools`` is not a list of objects, a function
    entry has no valid name, or names repeat."""
    if not isinstance(tools, list):
        raise CatalogError("tools is not an array")
    parsed, others = [], []
    for entry in tools:
        if not isinstance(entry, Mapping):
            raise CatalogError("a tools entry is not an object")
        if is_function(entry):
            function = {
                "name": entry.get("name"),
                "description": entry.get("description"),
                "parameters": entry.get(schema_key),
            }
            parsed.append(parse_function(function, entry))
        else:
            others.append(entry)
    return build_catalog(parsed, others)


def meta_entries(meta: MetaTools | None, shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The meta-tools (built in Chat Completions shape) in the API's tool shape."""
    if meta is None:
        return []
    return [shape(definition["function"]) for definition in meta.definitions]
