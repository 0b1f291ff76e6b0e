"""The ``tools`` of a Responses request as a plain OpenAI-compatible server can take them:
namespaces flattened, ``defer_loading`` and the ``tool_search`` entry taken out.

Shapes follow OpenAI's Responses API reference and tool search guide:

* ``{"type": "function", "name", "description"?, "parameters"?, "strict"?,
  "defer_loading"?}``: a function; with ``defer_loading: true`` the client leaves it for
  a search to load.
* ``{"type": "namespace", "name", "description", "tools": [function | custom …]}``: a
  group of functions the model calls by ``name`` plus ``namespace``. Each member is
  flattened into one upstream function named ``<namespace>__<name>``
  (:data:`NAMESPACE_SEPARATOR`); :class:`ToolLayout` maps the names back (the client's
  items carry ``name`` and ``namespace``). ``defer_loading`` on the namespace defers
  every member.
* ``{"type": "tool_search", "execution"?: "server" | "client", "description"?,
  "parameters"?}``: the client's search. Hosted (``server``, the default) is emulated by
  the proxy; ``client`` is offered upstream as a function (:attr:`ToolLayout.client_search`)
  whose calls go back to the client as ``tool_search_call`` items.

Every other entry type (``web_search``, ``mcp``, ``custom``…, known or future) is
forwarded as it is, without ``defer_loading`` (only function tools can be deferred and
searched here; the others always reach the upstream, so none is lost). Rejected with a
clear message (:class:`ToolsRejected`, answered 400): an ``execution`` other than
``server``/``client``, an unknown ``tool_search…`` type, a search tool marked deferred
or given twice, a malformed namespace or one holding an unknown type, and two tools
that reach the upstream under one name. An entry that is not an object, and a function
without a valid name, are the catalogue's to refuse (:class:`~selection.errors.CatalogError`:
the request is forwarded unchanged, decision ``fallback``, as on the other APIs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from selection.types import CatalogError, DeclaredGroup, free_name

#: Joins a namespace and a member's name into the upstream function's name.
NAMESPACE_SEPARATOR = "__"
#: The client's deferral flag (never forwarded).
DEFER_LOADING = "defer_loading"
#: The search tool's type and its ``execution`` values.
TOOL_SEARCH = "tool_search"
EXECUTIONS = ("server", "client")
#: Member types a namespace may hold.
MEMBER_TYPES = ("function", "custom")
#: Arguments of a client-executed search whose client gave no ``parameters``: the paths
#: (tool or namespace names) to load, the shape OpenAI's agents runner executes.
DEFAULT_CLIENT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Names of the tools or namespaces to load.",
        }
    },
    "required": ["paths"],
}
DEFAULT_CLIENT_DESCRIPTION = "Search for more tools and load the ones you need."


class ToolsRejected(ValueError):
    """The request's tools cannot be served as the client meant them (see the module
    docstring): answered 400 in OpenAI's error shape. ``str(error)`` says what."""


@dataclass(frozen=True)
class Member:
    """Where an upstream function name comes from: ``name`` and ``namespace`` (None: a
    top-level tool) as the client knows it; ``entry``: the client's definition (the
    namespace member as it sent it)."""

    name: str
    namespace: str | None
    entry: Mapping[str, Any]


@dataclass
class ToolLayout:
    """A Responses request's tools as read (see the module docstring).

    ``functions``: function entries, flattened, in request order (members of a
    namespace at its place), each with ``defer_loading`` as the client meant it (the
    catalogue reads it; the forwarded definition drops it). ``others``: entries forwarded
    as they are, always (flattened custom members of namespaces included). ``members``:
    upstream name → :class:`Member`, for every flattened or top-level function and
    custom tool. ``namespaces``: namespace name → its entry. ``hosted``: the client
    brings hosted ``tool_search``. ``client_search``: the function standing for a
    client-executed search (Responses function shape), or None. ``hosted_name``: the
    name of the function standing for hosted search. ``reshaped``: the tools reach the
    upstream in another shape than the client's beyond the functions' ``defer_loading``
    (a namespace, a ``tool_search`` entry, ``defer_loading`` on another type).
    """

    functions: list[dict[str, Any]] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    hosted: bool = False
    client_search: dict[str, Any] | None = None
    reshaped: bool = False
    #: The name of the function standing for hosted search (set once the catalogue is
    #: known: ``tool_search`` unless a catalogue function has it).
    hosted_name: str = TOOL_SEARCH

    @property
    def client_search_name(self) -> str | None:
        return self.client_search["name"] if self.client_search else None

    def client_name(self, upstream: str) -> tuple[str, str | None]:
        """``(name, namespace)`` the client knows an upstream tool name by."""
        member = self.members.get(upstream)
        return (member.name, member.namespace) if member else (upstream, None)

    def upstream_name(self, name: Any, namespace: Any) -> Any:
        """The upstream name of the client's ``name`` in ``namespace`` (as it is when the
        namespace is not one of the request's: an earlier turn's tool stays named)."""
        if isinstance(namespace, str) and namespace in self.namespaces and isinstance(name, str):
            return flat_name(namespace, name)
        return name

    def loaded_entries(self, names: Sequence[str]) -> list[Any]:
        """Definitions of upstream tools ``names`` in the client's shape, for a
        ``tool_search_output``'s ``tools``, in the order given: top-level functions as the
        client sent them, namespace members under their namespace (its ``name`` and
        ``description``; consecutive members of one namespace share one entry, so
        flattening the entries again gives ``names`` in their order)."""
        entries: list[Any] = []
        for upstream in names:
            member = self.members.get(upstream)
            if member is None:
                continue
            if member.namespace is None:
                entries.append(member.entry)
                continue
            last = entries[-1] if entries else None
            if isinstance(last, dict) and last.get("type") == "namespace" and last["name"] == member.namespace:
                last["tools"].append(member.entry)
                continue
            space = self.namespaces[member.namespace]
            entries.append({"type": "namespace", "name": member.namespace,
                            "description": space.get("description", ""),
                            "tools": [member.entry]})
        return entries


def responses_tool(function: Mapping[str, Any]) -> dict[str, Any]:
    """A ``{"name", "description", "parameters"}`` function as a Responses function tool
    (``strict`` false: the meta-tools' schemas are not written for strict mode)."""
    return {
        "type": "function",
        "name": function["name"],
        "description": function["description"],
        "parameters": function["parameters"],
        "strict": False,
    }


def declared_groups(layout: ToolLayout) -> list[DeclaredGroup]:
    """The request's namespaces as groups of the catalogue (their flattened function
    names, in request order, and their ``description``): selection ranks and lists the
    tools under them (:mod:`selection.catalog.groups`)."""
    members: dict[str, list[str]] = {space: [] for space in layout.namespaces}
    for upstream, member in layout.members.items():
        if member.namespace is not None:
            members[member.namespace].append(upstream)
    groups = []
    for space, names in members.items():
        description = layout.namespaces[space].get("description")
        groups.append(DeclaredGroup(
            space, tuple(names), description if isinstance(description, str) else ""
        ))
    return groups


def flat_name(namespace: str, name: str) -> str:
    """The upstream name of ``name`` in ``namespace``."""
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}"


def _without_deferral(entry: Mapping[str, Any]) -> Any:
    if DEFER_LOADING not in entry:
        return entry
    return {key: value for key, value in entry.items() if key != DEFER_LOADING}


def _name(entry: Mapping[str, Any], what: str) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ToolsRejected(f"{what} has no name")
    return name


class _Reader:
    """Builds a :class:`ToolLayout` entry by entry."""

    def __init__(self) -> None:
        self.layout = ToolLayout()
        self.search: Mapping[str, Any] | None = None

    def claim(self, upstream: str, member: Member) -> None:
        if upstream in self.layout.members:
            where = f"namespace {member.namespace!r}" if member.namespace else "the tools"
            raise ToolsRejected(
                f"tool name clash: {member.name!r} in {where} is forwarded as {upstream!r}, "
                "which another tool of the request already has"
            )
        self.layout.members[upstream] = member

    def entry(self, entry: Any) -> None:
        if not isinstance(entry, Mapping):
            raise CatalogError("a tools entry is not an object")
        kind = entry.get("type")
        if kind == "function":
            if isinstance(entry.get("name"), str):  # no name: the catalogue reports it
                self.claim(entry["name"], Member(entry["name"], None, entry))
            self.layout.functions.append(dict(entry))
        elif kind == "namespace":
            self.namespace(entry)
        elif kind == TOOL_SEARCH:
            self.tool_search(entry)
        elif isinstance(kind, str) and kind.startswith(TOOL_SEARCH):
            raise ToolsRejected(
                f"unknown tool type {kind!r}: this proxy emulates {TOOL_SEARCH!r} only"
            )
        else:
            if kind == "custom" and isinstance(entry.get("name"), str):
                self.claim(entry["name"], Member(entry["name"], None, entry))
            self.layout.reshaped |= DEFER_LOADING in entry
            self.layout.others.append(_without_deferral(entry))

    def namespace(self, entry: Mapping[str, Any]) -> None:
        space = _name(entry, "a namespace")
        members = entry.get("tools")
        if not isinstance(members, list):
            raise ToolsRejected(f"namespace {space!r} has no tools array")
        if space in self.layout.namespaces:
            raise ToolsRejected(f"namespace {space!r} is given twice")
        self.layout.namespaces[space] = entry
        self.layout.reshaped = True
        deferred = entry.get(DEFER_LOADING) is True
        for member in members:
            kind = member.get("type") if isinstance(member, Mapping) else None
            if kind not in MEMBER_TYPES:
                raise ToolsRejected(
                    f"namespace {space!r} holds a tool of type {kind!r}; "
                    f"a namespace holds {' and '.join(MEMBER_TYPES)} tools"
                )
            name = _name(member, f"a tool of namespace {space!r}")
            upstream = flat_name(space, name)
            self.claim(upstream, Member(name, space, member))
            flattened = {**member, "name": upstream}
            if kind == "function":
                if deferred:
                    flattened[DEFER_LOADING] = True
                self.layout.functions.append(flattened)
            else:
                self.layout.others.append(_without_deferral(flattened))

    def tool_search(self, entry: Mapping[str, Any]) -> None:
        if self.search is not None:
            raise ToolsRejected(f"{TOOL_SEARCH!r} is given twice")
        if entry.get(DEFER_LOADING) is True:
            raise ToolsRejected(f"the {TOOL_SEARCH!r} tool cannot be deferred (defer_loading)")
        execution = entry.get("execution", "server")
        if execution is None:
            execution = "server"
        if execution not in EXECUTIONS:
            raise ToolsRejected(
                f"unknown {TOOL_SEARCH} execution {execution!r}: expected 'server' or 'client'"
            )
        self.search = entry
        self.layout.hosted = execution == "server"
        self.layout.reshaped = True

    def finish(self) -> ToolLayout:
        search = self.search
        if search is not None and not self.layout.hosted:
            description = search.get("description")
            parameters = search.get("parameters")
            self.layout.client_search = {
                "type": "function",
                "name": free_name(TOOL_SEARCH, set(self.layout.members)),
                "description": description if isinstance(description, str) and description
                else DEFAULT_CLIENT_DESCRIPTION,
                "parameters": parameters if isinstance(parameters, Mapping)
                else DEFAULT_CLIENT_PARAMETERS,
                "strict": False,
            }
        return self.layout


def read_layout(tools: Any) -> ToolLayout:
    """Read a request's ``tools`` (see the module docstring). Raises ToolsRejected, and
    CatalogError for an entry that is not an object; a ``tools`` that is not a list reads
    as no tools."""
    reader = _Reader()
    for entry in tools if isinstance(tools, list) else ():
        reader.entry(entry)
    return reader.finish()
