"""The session oracle's tool block: what a proxy that knew the whole session in advance
would forward: the client's request with ``tools`` reduced to the client's own tools
(its search or loading tool aside) plus exactly the MCP tools the session calls, no
search and no bridge. The scripted agent then calls every tool by its own name, as it
does directly (:mod:`benchmarks.support.agent_behaviour`).

Per client mode (:data:`benchmarks.support.agent_clients.MODES`):

* a client that sends every tool (Claude Code's and Codex's default modes, opencode):
  the MCP tools the session does not call leave its request (a Responses ``namespace``
  keeps its members the session calls); the conversation is the direct one, tools aside.
* a client that defers its MCP tools behind its own search (Claude Code's ``ToolSearch``,
  Codex's client ``tool_search``, Qwen Code's ``tool_search``): its search tool leaves the
  request and the session's MCP tools are in it from the first request, undeferred
  (``defer_loading`` dropped), as the client writes them once found (:func:`known_tools`
  reads them from the client's direct session); the model calls them without searching
  and the client runs the call (it knows every MCP tool; deferring only kept them out of
  the prompt). The client's own prompt (its list of deferred tool names) is left as sent.

The oracle's session is also counted with its requests' ``tools`` reduced further to the
MCP tools alone (:func:`called_only`): exactly the tools the session calls, the block of a
proxy that also knew the client's own tools would not be called (the scripted agent
calls none; the conversation is the same, so no session is run for it).

A tool is an MCP tool when its name is a catalogue tool's after a prefix ending in ``_``
(``mcp__github__list_pull_requests``, ``github_list_pull_requests``) or it is a member of
a Responses namespace whose members are catalogue tools by their own names. Shapes:
OpenAI's Chat Completions and Responses references (``tools``, ``namespace``,
``tool_search``), Anthropic's Messages reference (``tools``, ``defer_loading``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from benchmarks.support.agent_requests import SEARCH_NAMES, bare_name
from benchmarks.support.github_mcp import catalog_tools

#: A tool written as its client writes it: the Chat ``{"type": "function", "function"}``,
#: the Messages ``{"name", "input_schema"}``, or a Responses namespace member with its
#: namespace's name under ``namespace``.
Definition = dict[str, Any]
CATALOGUE = frozenset(tool["name"] for tool in catalog_tools())


class OracleError(ValueError):
    """The oracle's block cannot be written: a tool the session calls has no definition
    as the client writes it."""


def catalogue_name(name: str, catalogue: Collection[str] = CATALOGUE) -> str | None:
    """The catalogue tool a client's function ``name`` is, behind its prefix (None: none:
    a client's own tool)."""
    found = [tool for tool in catalogue if name.endswith("_" + tool)]
    return max(found, key=len) if found else None


def _is_search(tool: Mapping[str, Any]) -> bool:
    kind = str(tool.get("type", "function"))
    if kind in ("tool_search",) or kind.startswith("tool_search_tool_"):
        return True
    name = tool.get("name") or (tool.get("function") or {}).get("name") or ""
    return any(bare_name(str(name)).endswith(search) for search in SEARCH_NAMES)


def _name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, dict) else tool.get("name"))


def _undeferred(tool: Definition) -> Definition:
    return {key: value for key, value in tool.items() if key != "defer_loading"}


def _members(namespace: Mapping[str, Any]) -> list[Any]:
    return [member for member in namespace.get("tools") or [] if isinstance(member, dict)]


def _is_mcp_namespace(namespace: Mapping[str, Any], catalogue: Collection[str]) -> bool:
    members = _members(namespace)
    return bool(members) and all(member.get("name") in catalogue for member in members)


def known_tools(bodies: Iterable[Any], catalogue: Collection[str] = CATALOGUE) -> dict[str, Definition]:
    """Every MCP tool the requests ``bodies`` define (in ``tools``, or in a Responses
    ``tool_search_output``), by catalogue name, as the client writes it (the first seen);
    a namespace member carries its namespace's name under ``namespace``."""
    known: dict[str, Definition] = {}

    def note(tools: Any) -> None:
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace" and _is_mcp_namespace(tool, catalogue):
                for member in _members(tool):
                    known.setdefault(member["name"], {**member, "namespace": tool.get("name")})
            elif (found := catalogue_name(_name(tool), catalogue)) is not None:
                known.setdefault(found, tool)

    for body in bodies:
        if not isinstance(body, dict):
            continue
        note(body.get("tools"))
        for item in body.get("input") if isinstance(body.get("input"), list) else []:
            if isinstance(item, dict) and item.get("type") == "tool_search_output":
                note(item.get("tools"))
    return known


def oracle_tools(tools: list[Any], called: list[str], known: Mapping[str, Definition],
                 catalogue: Collection[str] = CATALOGUE) -> list[Any]:
    """``tools`` (a request's) reduced to the oracle's block (module docstring): the
    client's own tools but its search, then the MCP tools of ``called`` (catalogue
    names): those the request defines where it defines them, the others from ``known``
    (namespace members into their namespace, added after the client's tools when the
    request has none). Raises :class:`OracleError` for a called tool nowhere defined."""
    kept: list[Any] = []
    present: set[str] = set()
    namespaces: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if not isinstance(tool, dict) or _is_search(tool):
            continue
        if tool.get("type") == "namespace" and _is_mcp_namespace(tool, catalogue):
            members = [_undeferred(m) for m in _members(tool) if m["name"] in called]
            present.update(member["name"] for member in members)
            namespaces[str(tool.get("name"))] = namespace = {**tool, "tools": members}
            kept.append(namespace)
            continue
        found = catalogue_name(_name(tool), catalogue)
        if found is None:
            kept.append(tool)
        elif found in called:
            present.add(found)
            kept.append(_undeferred(tool))
    for name in called:
        if name in present:
            continue
        if name not in known:
            raise OracleError(f"no definition of {name} as the client writes it: run the "
                              "direct session first (its requests define it)")
        definition = _undeferred(dict(known[name]))
        group = definition.pop("namespace", None)
        if group is None:
            kept.append(definition)
            continue
        if group not in namespaces:
            namespaces[group] = {"type": "namespace", "name": group,
                                 "description": f"Tools in the {group} namespace.", "tools": []}
            kept.append(namespaces[group])
        namespaces[group]["tools"].append(definition)
    return [tool for tool in kept if tool.get("type") != "namespace" or tool["tools"]]


def oracle_body(body: Any, called: list[str], known: Mapping[str, Definition]) -> Any:
    """A model request's body with the oracle's block (a body without ``tools``, or not
    a JSON object, as it is)."""
    if not isinstance(body, dict) or not isinstance(body.get("tools"), list) or not body["tools"]:
        return body
    return {**body, "tools": oracle_tools(body["tools"], called, known)}


def called_only(body: Any) -> Any:
    """An oracle request's body with its client's own tools removed too (module
    docstring): only MCP tools left in ``tools`` and in its namespaces."""
    if not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        return body
    return {**body, "tools": [tool for tool in body["tools"] if _is_mcp(tool)]}


def _is_mcp(tool: Any) -> bool:
    if not isinstance(tool, dict):
        return False
    if tool.get("type") == "namespace":
        return _is_mcp_namespace(tool, CATALOGUE)
    return tool.get("type", "function") == "function" and catalogue_name(_name(tool)) is not None


class OracleRewrite:
    """The rewriting hop's function (``RecordingRelay(rewrite=…)``): each JSON body of a
    model request with :func:`oracle_body`; any other body unchanged."""

    def __init__(self, called: list[str], known: Mapping[str, Definition]) -> None:
        self.called = called
        self.known = known

    def __call__(self, path: str, body: bytes) -> bytes:
        if not path.endswith(("/chat/completions", "/messages", "/responses")):
            return body
        try:
            parsed = json.loads(body)
        except ValueError:
            return body
        rewritten = oracle_body(parsed, self.called, self.known)
        return body if rewritten is parsed else json.dumps(rewritten).encode()
