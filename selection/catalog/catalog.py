"""The catalogue: a request's ``tools`` (or legacy ``functions``) parsed into tools.

Follows OpenAI's Chat Completions API reference: ``tools`` is a list of
``{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}``;
the legacy ``functions`` is a list of the inner function objects. Entries whose type is
not ``function`` are kept as they are and never pruned.

Deferral (the client's own, every API): a tool whose entry carries ``"defer_loading":
true`` (at its top level, as Anthropic's Messages and OpenAI's Responses put it, or in a
Chat Completions entry's ``function`` object) is one the client leaves for a search to
load; the others are the client's CORE (:attr:`Catalog.kept`). The flag is for the
client's API only: :attr:`Tool.forwarded_definition` is the entry without it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from selection.errors import CatalogError

T = TypeVar("T")

_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_\-.:/\s]+")


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, UTF-8 (a lone surrogate, valid
    in JSON text, is kept as its escape so hashing never fails)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", errors="backslashreplace")


def fingerprint(value: Any) -> str:
    """sha256 hex digest of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


#: The field by which a client defers a tool (Anthropic Messages, OpenAI Responses and
#: Chat Completions tool entries).
DEFER_LOADING = "defer_loading"


def defers_loading(definition: Mapping[str, Any]) -> bool:
    """Whether a tool entry is deferred by its client: ``defer_loading`` is ``true`` on the
    entry or, in a Chat Completions entry, on its ``function`` object."""
    if definition.get(DEFER_LOADING) is True:
        return True
    function = definition.get("function")
    return isinstance(function, Mapping) and function.get(DEFER_LOADING) is True


def without_deferral(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    """``definition`` without its ``defer_loading`` fields (a copy; the same object when it
    has none): what an upstream that knows no deferral accepts."""
    function = definition.get("function")
    nested = isinstance(function, Mapping) and DEFER_LOADING in function
    if DEFER_LOADING not in definition and not nested:
        return definition
    copy = {key: value for key, value in definition.items() if key != DEFER_LOADING}
    if nested:
        copy["function"] = {k: v for k, v in function.items() if k != DEFER_LOADING}
    return copy


def name_words(name: str) -> str:
    """A tool name as words: ``get_pull_request`` / ``getPullRequest`` /
    ``github__get_pr`` → ``get pull request`` / ``get Pull Request`` / ``github get pr``."""
    spaced = _WORD_BOUNDARY.sub(" ", name)
    return " ".join(part for part in _SEPARATORS.split(spaced) if part)


@dataclass(frozen=True)
class Tool:
    """One function tool of the catalogue.

    ``definition`` is the entry exactly as the client sent it (a ``tools`` item, or a
    legacy ``functions`` item); ``fingerprint`` is the hash of its canonical JSON and
    ``size_bytes`` that JSON's length (what forwarding the tool costs, before tokenising).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    definition: Mapping[str, Any]
    fingerprint: str
    size_bytes: int

    @cached_property
    def deferred(self) -> bool:
        """Whether the client deferred this tool (:func:`defers_loading`)."""
        return defers_loading(self.definition)

    @cached_property
    def forwarded_definition(self) -> Mapping[str, Any]:
        """The definition as forwarded upstream: without ``defer_loading``
        (:func:`without_deferral`; the client's own object when it had none)."""
        return without_deferral(self.definition)

    def required_parameters(self) -> list[str]:
        """The names the schema's ``required`` lists (strings only; none when it is
        absent or not a list)."""
        required = self.parameters.get("required")
        return [name for name in required if isinstance(name, str)] if isinstance(required, list) else []

    def parameter_texts(self) -> list[str]:
        """``name: description`` of each top-level parameter, in schema order."""
        properties = self.parameters.get("properties")
        if not isinstance(properties, Mapping):
            return []
        texts = []
        for param, schema in properties.items():
            about = schema.get("description") if isinstance(schema, Mapping) else None
            words = name_words(str(param))
            texts.append(f"{words}: {about}" if isinstance(about, str) and about else words)
        return texts


@dataclass(frozen=True)
class DeclaredGroup:
    """A group of tools the request itself declares (a Responses API ``namespace``):
    its ``name``, its members' tool names as the catalogue has them (flattened), and its
    ``description``."""

    name: str
    members: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Catalog:
    """A parsed catalogue.

    ``tools``: the function tools, in request order (the only prunable entries).
    ``others``: entries of any other type, forwarded always and as they are.
    ``legacy``: parsed from ``functions`` rather than ``tools``.
    ``fingerprint``: hash over the function tools' fingerprints, in order (and the
    declared groups, when there are any).
    ``declared``: the groups the request declares (:class:`DeclaredGroup`).
    """

    tools: tuple[Tool, ...]
    others: tuple[Any, ...] = ()
    legacy: bool = False
    fingerprint: str = ""
    _by_name: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    declared: tuple[DeclaredGroup, ...] = ()
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        """The function tools' names, in order (a new list each call; built once)."""
        return list(self._names)

    @cached_property
    def _names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)

    @cached_property
    def name_set(self) -> frozenset[str]:
        """The function tools' names as a set (built once)."""
        return frozenset(self._names)

    @cached_property
    def size_bytes(self) -> int:
        """Compact-JSON bytes of the function tools' definitions together (computed once)."""
        return sum(tool.size_bytes for tool in self.tools)

    @cached_property
    def name_chars(self) -> int:
        """Characters of the function tools' names together (computed once)."""
        return sum(len(name) for name in self._names)

    @cached_property
    def deferred(self) -> frozenset[str]:
        """Names of the tools the client deferred (``defer_loading``; computed once)."""
        return frozenset(tool.name for tool in self.tools if tool.deferred)

    @cached_property
    def kept(self) -> tuple[str, ...]:
        """The client's CORE, in catalogue order: when the client deferred any tool, the
        tools it did not defer (forwarded every round); else none (no deferral: the whole
        catalogue is toolprune's to select from, as without this contract)."""
        if not self.deferred:
            return ()
        return tuple(tool.name for tool in self.tools if not tool.deferred)

    def derived(self, key: Hashable, compute: Callable[[Catalog], T]) -> T:
        """``compute(self)``, computed once per catalogue object and kept under ``key``
        (a request that brings a catalogue seen before gets the same object from the
        catalogue cache, so what depends on the catalogue alone is not walked again per
        request). ``compute`` must read nothing but the catalogue. Shared: never mutate
        the value."""
        try:
            return self._derived[key]
        except KeyError:
            value = self._derived[key] = compute(self)
            return value

    def index_of(self, name: str) -> int | None:
        """Position of the tool called ``name``, or None."""
        return self._by_name.get(name)

    def get(self, name: str) -> Tool | None:
        position = self._by_name.get(name)
        return None if position is None else self.tools[position]

    def restricted_to(self, names: set[str]) -> Catalog:
        """The same catalogue with only the named function tools (order kept)."""
        return build_catalog(
            [t for t in self.tools if t.name in names], self.others, self.legacy, self.declared
        )


def _parse_function(function: Any, definition: Mapping[str, Any]) -> Tool:
    if not isinstance(function, Mapping):
        raise CatalogError("a function tool has no function object")
    name = function.get("name")
    if not isinstance(name, str) or not name:  # names are opaque: MCP allows "github/create_issue"
        raise CatalogError("a function tool has a missing or empty name")
    description = function.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise CatalogError(f"tool {name!r} has a non-string description")
    parameters = function.get("parameters", {})
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, Mapping):
        raise CatalogError(f"tool {name!r} has non-object parameters")
    canonical = canonical_json(definition)
    digest = hashlib.sha256(canonical).hexdigest()
    return Tool(name, description, parameters, definition, digest, len(canonical))


def parse_function(function: Any, definition: Mapping[str, Any]) -> Tool:
    """One function tool from its ``{"name", "description"?, "parameters"?}`` object;
    ``definition`` is the entry as the client sent it, in its API's shape (kept for
    forwarding). Raises CatalogError."""
    return _parse_function(function, definition)


def build_catalog(
    tools: Sequence[Tool], others: Sequence[Any] = (), legacy: bool = False,
    declared: Sequence[DeclaredGroup] = (),
) -> Catalog:
    """Assemble a catalogue from parsed tools and the groups the request declares (members
    not among ``tools`` are dropped; groups left empty too). Raises CatalogError on
    duplicate names."""
    by_name: dict[str, int] = {}
    for position, tool in enumerate(tools):
        if tool.name in by_name:
            raise CatalogError(f"duplicate tool name {tool.name!r}")
        by_name[tool.name] = position
    digest = hashlib.sha256()
    for tool in tools:
        digest.update(tool.fingerprint.encode())
    digest.update(b"legacy" if legacy else b"tools")
    groups = []
    for group in declared:
        members = tuple(name for name in group.members if name in by_name)
        if members:
            groups.append(DeclaredGroup(group.name, members, group.description))
    if groups:
        digest.update(canonical_json([[g.name, list(g.members), g.description] for g in groups]))
    return Catalog(tuple(tools), tuple(others), legacy, digest.hexdigest(), by_name, tuple(groups))


def parse_tools(tools: Any) -> Catalog:
    """Parse a ``tools`` array. Raises CatalogError when it is not a list of objects, or a
    function entry lacks a valid name, or names repeat."""
    if not isinstance(tools, list):
        raise CatalogError("tools is not an array")
    parsed: list[Tool] = []
    others: list[Any] = []
    for entry in tools:
        if not isinstance(entry, Mapping):
            raise CatalogError("a tools entry is not an object")
        if entry.get("type", "function") == "function":
            parsed.append(_parse_function(entry.get("function"), entry))
        else:
            others.append(entry)
    return build_catalog(parsed, others)


def parse_functions(functions: Any) -> Catalog:
    """Parse a legacy ``functions`` array (deprecated by OpenAI in favour of ``tools``)."""
    if not isinstance(functions, list):
        raise CatalogError("functions is not an array")
    parsed = [_parse_function(entry, entry) for entry in functions]
    return build_catalog(parsed, legacy=True)


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
