"""The meta-tools the proxy injects and answers itself: ``load_tools`` and
``search_tools`` (the escape hatch: no tool of the catalogue is ever unreachable).

Definitions follow OpenAI's function-tool shape. Without a tier, a meta-tool's
definition depends on the catalogue only (byte-identical for a conversation). With a
tier (tiered exposure: the next-best tools of this turn, by name and short purpose, so
the model can load them in one round without paying their schemas), the tier line is
the only part that depends on the turn: it ends the description. The proxy forwards the
meta-tool after the tools of a block's first request and keeps its text and place while
the block grows (tools admitted later follow it), so it stays in the KV-cached prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog, Tool
from selection.catalog.groups import Group
from selection.catalog.policy import Bundle

LOAD_TOOLS = "load_tools"
SEARCH_TOOLS = "search_tools"
#: The bridge to tools delivered in the conversation (:mod:`selection.clients.bridge`).
CALL_TOOL = "call_tool"
#: Characters of a tool's description shown on its menu line.
PURPOSE_CHARS = 60
#: Nearest-match suggestions offered for an unknown name.
SUGGESTIONS = 3
#: Unknown names of one ``load_tools`` call answered with suggestions; the rest are only
#: counted (a call naming thousands would fill the next prompt with suggestions).
MAX_UNKNOWN = 8
#: Characters of an unknown name echoed and matched (a tool name has at most 64).
UNKNOWN_NAME_CHARS = 128
#: ``search_tools`` names every group in its description up to this many (more would
#: cost more tokens than they help: the tier's headings name the groups that matter now).
MAX_LISTED_GROUPS = 24
#: Least rapidfuzz WRatio of a ``server`` argument to the group it is taken for.
SERVER_MATCH = 80.0
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


def answer_text(value: Any) -> str:
    """An answer the proxy writes for the model (a meta-tool's result, a refused bridge
    call) as JSON text: compact (no space after ``,`` and ``:``), non-ASCII as it is. A
    result that delivers tools repeats their definitions whole; compact, GitHub MCP's
    definitions are 9% fewer tokens than in :func:`json.dumps`' default spacing (37,598 →
    34,202 over 127 tools, SmolLM2's tokenizer through llama-server's ``/tokenize``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def short_purpose(tool: Tool) -> str:
    """First sentence of the description, cut at a word boundary to ``PURPOSE_CHARS``."""
    first = _SENTENCE_END.split(tool.description.strip(), maxsplit=1)[0].strip()
    if len(first) <= PURPOSE_CHARS:
        return first.rstrip(".")
    return first[:PURPOSE_CHARS].rsplit(" ", 1)[0] + "…"


def free_name(base: str, taken: AbstractSet[str]) -> str:
    """``base``, or ``toolprune_<base>``, ``toolprune_<base>_2``… if a client tool has it."""
    if base not in taken:
        return base
    candidate, n = f"toolprune_{base}", 2
    while candidate in taken:
        candidate, n = f"toolprune_{base}_{n}", n + 1
    return candidate


def _menu(catalog: Catalog, listed: set[str], bundles: Sequence[Bundle | Group]) -> str:
    lines: list[str] = []
    grouped: set[str] = set()
    for bundle in bundles:
        members = [m for m in bundle.members if m in listed and m not in grouped]
        if not members:
            continue
        heading = f"{bundle.name}: {bundle.description}" if bundle.description else bundle.name
        lines.append(f"[{heading}]")
        for name in members:
            tool = catalog.get(name)
            assert tool is not None
            lines.append(f"- {name} — {short_purpose(tool)}")
        grouped.update(members)
    rest = [tool for tool in catalog.tools if tool.name in listed and tool.name not in grouped]
    if rest and grouped:
        lines.append("[other]")
    lines.extend(f"- {tool.name} — {short_purpose(tool)}" for tool in rest)
    return "\n".join(lines)


@dataclass(frozen=True)
class MetaTools:
    """The meta-tools offered with one request.

    ``load_name`` / ``search_name``: the names used (renamed on a clash with a client tool;
    None when not offered). ``definitions``: entries to append to ``tools`` (or, for a
    legacy request, to ``functions``). ``client_search``: the function that stands for
    the client's own search tool (:mod:`selection.clients.tool_search`), offered instead of both
    (one discovery mechanism per request); None otherwise. ``bridge``: the function tools
    delivered in the conversation are called through (:mod:`selection.clients.bridge`;
    None: not offered), its definition last.
    """

    load_name: str | None
    search_name: str | None
    definitions: tuple[dict[str, Any], ...]
    client_search: str | None = None
    bridge: str | None = None

    @property
    def names(self) -> set[str]:
        """The functions whose calls the proxy answers itself (the bridge's calls are the
        client's calls, renamed)."""
        names = (self.load_name, self.search_name, self.client_search)
        return {name for name in names if name}


def _function(name: str, description: str, parameters: dict[str, Any], legacy: bool) -> dict:
    function = {"name": name, "description": description, "parameters": parameters}
    return function if legacy else {"type": "function", "function": function}


def _tier_lines(catalog: Catalog, tier: Sequence[str], groups: Sequence[Bundle | Group]) -> str:
    """One line per tier tool; when some are grouped, under their group's ``[name]``
    heading (groups in the order of their best tool, tools best first), the rest under
    ``[other]``."""
    known = [name for name in tier if catalog.get(name) is not None]
    _, group_of = catalog.derived(  # once per catalogue and grouping, not per request
        ("group_of", *map(id, groups)),  # the groups are kept with it: their ids stay theirs
        lambda _: (tuple(groups), {m: group.name for group in groups for m in group.members}),
    )
    headings = list(dict.fromkeys(group_of[name] for name in known if name in group_of))
    if not headings:
        return "\n".join(_line(catalog, name) for name in known)
    lines: list[str] = []
    for heading in [*headings, None]:
        members = [name for name in known if group_of.get(name) == heading]
        if members:
            lines.append(f"[{heading or 'other'}]")
            lines.extend(_line(catalog, name) for name in members)
    return "\n".join(lines)


def _line(catalog: Catalog, name: str) -> str:
    tool = catalog.get(name)
    assert tool is not None
    return f"- {name} — {short_purpose(tool)}"


def build_meta_tools(
    catalog: Catalog,
    core: set[str],
    bundles: Sequence[Bundle | Group],
    *,
    search: bool,
    tier: Sequence[str] = (),
) -> MetaTools:
    """Definitions for this catalogue.

    ``bundles``: the catalogue's groups (its servers, namespaces, toolkits and configured
    bundles, :attr:`selection.catalog.policy.CatalogLayout.groups`; or bundles alone).
    ``search=False``: ``load_tools(names)``, ``names`` an array whose items are an enum of
    every catalogue name (servers with grammar-constrained tool calls then reject invented
    names). Its description lists, one line each, the ``tier`` (this turn's next-best
    tools, under their groups' headings) when given, else a menu of every non-CORE tool
    grouped by group.
    ``search=True`` (catalogues too large to list): ``search_tools(query, server?)``, its
    description naming the groups (at most :data:`MAX_LISTED_GROUPS`) and ending with the
    tier's lines when given; ``server`` (offered when there are groups) limits a search to
    one group's tools.
    """
    taken = catalog.name_set
    if search:
        name = free_name(SEARCH_TOOLS, taken)
        listed = len(catalog) - sum(1 for name in core if name in taken)  # the non-CORE tools
        description = (
            f"Finds tools among {listed} (yours included). Describe what you need "
            "to do; the best matching tools are loaded and you can call them next."
        )
        if bundles and len(bundles) <= MAX_LISTED_GROUPS:
            description += " Tool groups: " + "; ".join(b.name for b in bundles) + "."
        if tier:
            description += " Likely useful now (search by name):\n" + _tier_lines(
                catalog, tier, bundles
            )
        properties: dict[str, Any] = {
            "query": {"type": "string", "description": "What the tool must do."}
        }
        if bundles:
            properties["server"] = {
                "type": "string",
                "description": "Optional: search only this group's tools (a [name] shown "
                "here, or a server prefix of a tool name).",
            }
        parameters = {"type": "object", "properties": properties, "required": ["query"]}
        definition = _function(name, description, parameters, catalog.legacy)
        return MetaTools(None, name, (definition,))
    name = free_name(LOAD_TOOLS, taken)
    description = (
        "More tools exist than the ones you have. To use one, first load it by name with "
        "this function, then call it. "
    )
    if tier:
        description += "Likely useful now:\n" + _tier_lines(catalog, tier, bundles)
    else:
        description += "Tools you can load:\n" + _menu(
            catalog, {name for name in catalog.names if name not in core}, bundles)
    parameters = {
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"type": "string", "enum": catalog.names}}
        },
        "required": ["names"],
    }
    return MetaTools(name, None, (_function(name, description, parameters, catalog.legacy),))


def _arguments(arguments: str) -> Any:
    """A tool call's ``arguments`` parsed (JSON text per the API; None when malformed)."""
    try:
        return json.loads(arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return None


def requested_names(arguments: str) -> list[str] | None:
    """The ``names`` argument of a ``load_tools`` call (a lone string is accepted as one
    name); None when the arguments are not JSON of that shape."""
    parsed = _arguments(arguments)
    names = parsed.get("names") if isinstance(parsed, dict) else None
    if isinstance(names, str):
        return [names]
    if isinstance(names, list) and all(isinstance(item, str) for item in names):
        return names
    return None


def search_query(arguments: str) -> str | None:
    """The ``query`` argument of a ``search_tools`` call, or None when malformed."""
    parsed = _arguments(arguments)
    query = parsed.get("query") if isinstance(parsed, dict) else None
    return query if isinstance(query, str) and query.strip() else None


def search_server(arguments: str) -> str | None:
    """The ``server`` argument of a ``search_tools`` call (None when absent or blank)."""
    parsed = _arguments(arguments)
    server = parsed.get("server") if isinstance(parsed, dict) else None
    return server.strip() if isinstance(server, str) and server.strip() else None


def find_group(server: str, groups: Sequence[Group]) -> Group | None:
    """The group a ``server`` argument names: by name (case folded), else the closest by
    rapidfuzz WRatio at or above :data:`SERVER_MATCH`; None when none is that close."""
    folded = server.casefold()
    for group in groups:
        if group.name.casefold() == folded:
            return group
    if not groups:
        return None
    from rapidfuzz import fuzz, process

    match = process.extractOne(
        folded, [group.name.casefold() for group in groups], scorer=fuzz.WRatio,
        score_cutoff=SERVER_MATCH,
    )
    return groups[match[2]] if match is not None else None


def unknown_group(server: str, groups: Sequence[Group]) -> str:
    """The answer (JSON text) to a ``search_tools`` call whose ``server`` names no group:
    an error and the closest group names (:func:`closest_names`)."""
    return answer_text({"error": f"no tool group is named {server!r}",
                        "did_you_mean": closest_names(server, [g.name for g in groups])})


def closest_names(name: str, names: Sequence[str]) -> list[str]:
    """The :data:`SUGGESTIONS` of ``names`` closest to an unknown ``name``, closest first
    (rapidfuzz WRatio; the library is imported on the first unknown name, 2 MiB kept off
    an idle proxy)."""
    from rapidfuzz import fuzz, process

    return [match for match, _, _ in process.extract(name, names, scorer=fuzz.WRatio,
                                                      limit=SUGGESTIONS)]


@dataclass(frozen=True)
class LoadOutcome:
    """Result of one meta-call: tools to admit, and the ``tool`` message content for the
    model (JSON text)."""

    admit: tuple[str, ...]
    content: str


def execute_load(names: Sequence[str] | None, catalog: Catalog, forwarded: set[str]) -> LoadOutcome:
    """Answer ``load_tools``: known names are loaded (already forwarded ones are an
    idempotent no-op), the first :data:`MAX_UNKNOWN` unknown names (their first
    :data:`UNKNOWN_NAME_CHARS` characters) get nearest-match suggestions (rapidfuzz
    WRatio), and further unknown names are counted (``unknown_more``)."""
    if names is None:
        message = {"error": 'arguments must be JSON like {"names": ["tool_name"]}'}
        return LoadOutcome((), answer_text(message))
    loaded, already, unknown, more = [], [], {}, 0
    for name in dict.fromkeys(names):
        if catalog.get(name) is None:
            if len(unknown) < MAX_UNKNOWN:
                shown = name[:UNKNOWN_NAME_CHARS]
                unknown[shown] = closest_names(shown, catalog.names)
            else:
                more += 1
        elif name in forwarded:
            already.append(name)
        else:
            loaded.append(name)
    result: dict[str, Any] = {"loaded": loaded}
    if already:
        result["already_available"] = already
    if unknown:
        result["unknown"] = {name: {"did_you_mean": s} for name, s in unknown.items()}
    if more:
        result["unknown_more"] = more
    if loaded or already:
        result["note"] = "Loaded tools are available now: call them directly."
    return LoadOutcome(tuple(loaded), answer_text(result))


def search_outcome(
    matches: Sequence[str], catalog: Catalog, forwarded: set[str], server: str | None = None,
    listed: Sequence[str] = (),
) -> LoadOutcome:
    """Answer ``search_tools`` with the tools retrieval found for the model's query (none:
    nothing is loaded, and the model is told to search with other terms; ``server``: the
    group the search was limited to, named in the answer; ``listed``: more finds, named
    with their purpose but not loaded)."""
    new = [name for name in matches if name not in forwarded]
    found, more = _purposes(matches, catalog), _purposes(listed, catalog)
    result: dict[str, Any] = {"loaded": new, "found": found}
    if more:
        result["not_loaded"] = more
    if server is not None:
        result["server"] = server
    result["note"] = "Call the found tools directly." if found else (
        "No tool matched: search again with other terms, or a tool's name."
    )
    if more:
        result["note"] += " To load one that is not loaded, search for its name."
    return LoadOutcome(tuple(new), answer_text(result))


def _purposes(names: Sequence[str], catalog: Catalog) -> list[dict[str, str]]:
    """Each known name of ``names`` with its :func:`short_purpose`."""
    return [{"name": name, "purpose": short_purpose(tool)}
            for name in names if (tool := catalog.get(name)) is not None]
