"""The catalogue's groups: the servers, namespaces and toolkits its tools come in.

Agents that bring large catalogues bring them as servers: Claude Code names an MCP tool
``mcp__<server>__<tool>``, most MCP clients and gateways ``<server>__<tool>``, opencode
``<server>_<tool>``; OpenAI's Responses API groups functions in ``namespace`` entries
(flattened by the proxy to ``<namespace>__<name>``); RapidAPI's tools (ToolBench) end in
``_for_<toolkit>``. A group is found, in this order of precedence, from:

1. what the request declares (``declared``: Responses namespaces, with their
   description);
2. the policy's configured bundles (with their description);
3. the names: an explicit namespace separator (``__``, ``/``, ``.``, ``:``), a shared
   ``_for_<toolkit>`` suffix, or a shared ``<server>_`` prefix whose first word is not an
   action verb (``get_``, ``list_``, ``GET_`` are how tools start, not servers) and is
   not used inside other tools' names.

Each tool belongs to at most one group (the first source that places it); groups of one
tool are dropped, and name-derived groups count only when the catalogue has at least two
of them (one prefix shared by every tool says nothing). A catalogue with no group is
ranked exactly as without this module.

A tool's own name is its name without its server's (:func:`namespace_prefix`,
:func:`server_prefixes`: also with one server only, and with ``-`` as the separator);
finding a tool by name reads it (:mod:`selection.clients.name_search`). Pure functions, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from selection.catalog.catalog import Catalog, fingerprint, name_words

GroupSource = Literal["namespace", "bundle", "server", "toolkit", "prefix"]

#: Least members of a group.
MIN_MEMBERS = 2
#: The share of a catalogue's tools its groups must hold for it to be ranked by them.
MIN_GROUPED_SHARE = 0.5
#: Name-derived groups count only when the catalogue has at least this many.
MIN_NAME_GROUPS = 2
#: Explicit separators between a namespace and a tool name, strongest first.
_NAMESPACE_SEPARATORS = ("__", "/", ":", ".")
#: RapidAPI's ``<endpoint>_for_<toolkit>``.
_TOOLKIT_SUFFIX = "_for_"
#: The share of a catalogue's names that must carry ``_for_`` for it to name toolkits.
MIN_SUFFIX_SHARE = 0.5
_PREFIX_SEPARATOR = "_"
#: Words that start a tool's own name (an action, an HTTP method), never a server's.
ACTION_WORDS = frozenset(["add", "analyse", "analyze", "append", "apply", "approve", "archive", "assign", "attach", "authenticate", "authorize", "batch", "book", "build", "buy", "calc", "calculate", "call", "cancel", "change", "check", "clear", "click", "clone", "close", "compare", "compile", "compose", "compute", "configure", "connect", "convert", "copy", "count", "create", "decode", "decrypt", "delete", "deploy", "describe", "detect", "diff", "disable", "download", "draft", "draw", "edit", "enable", "encode", "encrypt", "estimate", "evaluate", "execute", "export", "extract", "fetch", "fill", "filter", "find", "fix", "follow", "format", "forward", "generate", "get", "give", "go", "handle", "import", "insert", "install", "invite", "join", "kill", "launch", "list", "load", "lock", "log", "login", "logout", "lookup", "make", "manage", "mark", "merge", "modify", "move", "navigate", "notify", "open", "optimize", "order", "parse", "patch", "pause", "pay", "ping", "plan", "play", "post", "predict", "press", "preview", "print", "process", "publish", "pull", "push", "put", "query", "rank", "rate", "read", "recommend", "record", "refresh", "register", "reject", "reload", "remove", "rename", "render", "reply", "report", "request", "reset", "resize", "resolve", "restart", "restore", "resume", "retrieve", "return", "review", "revoke", "run", "save", "scan", "schedule", "score", "scrape", "search", "select", "send", "set", "share", "show", "sign", "simulate", "sort", "split", "start", "stop", "stream", "submit", "subscribe", "summarize", "switch", "sync", "tag", "take", "test", "track", "transfer", "translate", "trigger", "undo", "unlock", "unsubscribe", "update", "upload", "upsert", "validate", "verify", "view", "watch", "write", "head", "options"])


@dataclass(frozen=True)
class Group:
    """One group of tools: ``name`` as the client or catalogue spells it (a server,
    namespace, toolkit or bundle), ``members`` (tool names, as declared or in catalogue order),
    ``description`` (declared or configured; empty when found from names) and
    ``source`` (where it was found)."""

    name: str
    members: tuple[str, ...]
    description: str = ""
    source: GroupSource = "server"


@dataclass(frozen=True)
class CatalogGroups:
    """A catalogue's groups. ``of``: int32 ``(len(catalog),)``, each tool's group index
    in ``groups`` (−1: none). ``fingerprint``: identifies the grouping (names, members,
    descriptions), for caches of what is built from it."""

    groups: tuple[Group, ...]
    of: np.ndarray = field(compare=False)  # follows from ``groups`` and the catalogue
    fingerprint: str = ""

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def shapes_ranking(self) -> bool:
        """Whether the groups cover at least :data:`MIN_GROUPED_SHARE` of the catalogue's
        tools: only then is the catalogue ranked by them (a few small groups in a flat
        catalogue say little about it)."""
        return bool(len(self.groups)) and float((self.of >= 0).mean()) >= MIN_GROUPED_SHARE

    @property
    def listed(self) -> tuple[Group, ...]:
        """The groups the meta-tools show (headings, ``search_tools``' ``server``): all of
        them when they shape the ranking, else only those the request declares or the
        policy configures (a few shared name prefixes in a flat catalogue are no servers)."""
        if self.shapes_ranking:
            return self.groups
        return tuple(g for g in self.groups if g.source in ("namespace", "bundle"))

    def group_of(self, position: int) -> Group | None:
        index = int(self.of[position])
        return self.groups[index] if index >= 0 else None


def namespace_prefix(name: str, separators: Sequence[str] = _NAMESPACE_SEPARATORS) -> str | None:
    """The namespace an explicit separator gives ``name``: ``mcp__github__get_me`` →
    ``github``, ``github__get_me`` → ``github``, ``github/get_me`` → ``github``; None
    without one. ``separators``: those tried, in order (default: every client's)."""
    for separator in separators:
        parts = [part for part in name.split(separator) if part]
        if len(parts) >= 2:
            if separator == "__" and parts[0] == "mcp" and len(parts) >= 3:
                return parts[1]
            return parts[0]
    return None


def toolkit_suffix(name: str) -> str | None:
    """RapidAPI's toolkit of ``name``: ``count_for_suivi_colis`` → ``suivi_colis``."""
    head, found, toolkit = name.rpartition(_TOOLKIT_SUFFIX)
    return toolkit if found and head and toolkit else None


def shared_prefixes(
    names: Sequence[str], separator: str = _PREFIX_SEPARATOR, *, own_repeats: bool = False
) -> dict[str, list[str]]:
    """``<server><separator><tool>`` groups: names by first ``separator`` word, kept when
    that word is no action word, starts at least two names, and occurs in no other name
    as a later word (``own_repeats``: in no name outside the group; a server whose tools
    repeat its name, ``git_git_status``, is kept); each named by its members' longest
    common ``separator`` prefix (``Ant_Design_Components``)."""
    tokens = {name: [t for t in name.split(separator) if t] for name in names}
    by_first: dict[str, list[str]] = defaultdict(list)
    later: dict[str, set[str]] = defaultdict(set)  # a later word → the first words using it
    for name, parts in tokens.items():
        if len(parts) >= 2:
            by_first[parts[0]].append(name)
        for part in parts[1:]:
            later[part.lower()].add(parts[0])
    groups: dict[str, list[str]] = {}
    for first, members in by_first.items():
        word = first.lower()
        users = later[word] - {first} if own_repeats else later[word]
        if len(members) < MIN_MEMBERS or word in ACTION_WORDS or users:
            continue
        common = tokens[members[0]][:-1]
        for member in members[1:]:
            parts = tokens[member][:-1]
            length = 0
            while length < min(len(common), len(parts)) and common[length] == parts[length]:
                length += 1
            common = common[:length]
        groups[separator.join(common)] = members
    return groups


def server_prefixes(names: Sequence[str]) -> dict[str, str]:
    """Each name's ``<server><separator>`` prefix (``github_``, ``mcp-simple-arxiv_``), for
    names with no explicit namespace separator (:func:`namespace_prefix`): the
    :func:`shared_prefixes` of ``_`` (opencode's ``github_search_code``) or of ``-``
    (``github-search_code``), whichever cover more names (a client joins server and tool
    one way; ``_`` on a tie), a server whose tools repeat its name included. Empty when
    they cover less than :data:`MIN_GROUPED_SHARE` of those names: a few shared prefixes
    in a flat catalogue (GitHub's own ``actions_get``, ``projects_list``) are no servers.
    Names without one are left out."""
    rest = [name for name in names if namespace_prefix(name) is None]
    best: dict[str, str] = {}
    for separator in (_PREFIX_SEPARATOR, "-"):
        found = {member: prefix + separator
                 for prefix, members in shared_prefixes(rest, separator, own_repeats=True).items()
                 for member in members if member.startswith(prefix + separator)}
        if len(found) > len(best):
            best = found
    return best if len(best) >= MIN_GROUPED_SHARE * len(rest) else {}


def _name_groups(names: Sequence[str]) -> list[tuple[str, list[str], GroupSource]]:
    """Groups found from names alone (see the module docstring), by first member."""
    found: dict[str, tuple[list[str], GroupSource]] = {}
    placed: set[str] = set()
    for name in names:
        namespace = namespace_prefix(name)
        if namespace is not None:
            found.setdefault("ns:" + namespace, ([], "server"))[0].append(name)
            placed.add(name)
    rest = [name for name in names if name not in placed]
    suffixed = [name for name in rest if toolkit_suffix(name) is not None]
    if rest and len(suffixed) >= MIN_SUFFIX_SHARE * len(rest):
        for name in suffixed:
            found.setdefault("tk:" + str(toolkit_suffix(name)), ([], "toolkit"))[0].append(name)
            placed.add(name)
        rest = [name for name in rest if name not in placed]
    for prefix, members in shared_prefixes(rest).items():
        found["px:" + prefix] = (members, "prefix")
    groups = [(key.split(":", 1)[1], members, source)
              for key, (members, source) in found.items() if len(members) >= MIN_MEMBERS]
    return groups if len(groups) >= MIN_NAME_GROUPS else []


def find_groups(catalog: Catalog, bundles: Iterable[Group] = ()) -> CatalogGroups:
    """The groups of ``catalog`` (see the module docstring): those the request declares
    (``catalog.declared``), then ``bundles`` (the policy's), then found from the names of
    the tools not placed yet. Members not in the catalogue are dropped; a tool is in one
    group at most."""
    names = catalog.names
    known = set(names)
    placed: set[str] = set()
    chosen: list[Group] = []
    declared = [Group(g.name, g.members, g.description, "namespace") for g in catalog.declared]
    for group in [*declared, *bundles]:
        members = tuple(m for m in dict.fromkeys(group.members) if m in known and m not in placed)
        if len(members) >= MIN_MEMBERS:
            chosen.append(Group(group.name, members, group.description, group.source))
            placed.update(members)
    rest = [name for name in names if name not in placed]
    for name, members, source in _name_groups(rest):
        chosen.append(Group(name, tuple(members), "", source))
    of = np.full(len(catalog), -1, dtype=np.int32)
    for index, group in enumerate(chosen):
        for member in group.members:
            position = catalog.index_of(member)
            if position is not None:
                of[position] = index
    key = fingerprint([[g.name, list(g.members), g.description] for g in chosen])
    return CatalogGroups(tuple(chosen), of, key)


def group_label(group: Group) -> str:
    """The group's name as words (``mcp-simple-arxiv`` → ``mcp simple arxiv``)."""
    return name_words(group.name.replace("-", " "))
