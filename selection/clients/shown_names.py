"""The name a tool delivered in the conversation is shown by, and called by through the
bridge: its own name, without the namespace its client puts in front, where that names
one tool.

The model writes a delivered tool's name inside every call of the bridge, and each
token it writes costs decode, 10–55× slower per token than prefill (issue 57). A bridge
call is ~11 tokens longer than the same call by the tool's own name (SmolLM2's
tokenizer), and Codex's and Claude Code's namespace is 5 more: ``mcp__github__issue_read``
against ``issue_read``. So a delivered tool is shown (its definition, the names of a
result that loads it) by its shortest own name after an explicit namespace separator
(``__``, ``.``, ``/``, ``:``: :func:`selection.clients.name_search.own_names`) that is
written like a function name (letters, digits, ``_``, ``-``), has two name words or more,
and is no tool's name, no other tool's own name and no meta-tool's, compared as name
words (:func:`~selection.clients.name_search.name_form`: ``issue_read`` is taken where
``issue-read`` or ``IssueRead`` is a name, which the bridge reads alike); else by its
name. ``mcp__github__search_code`` beside ``mcp__gitlab__search_code`` is shown as
``github__search_code``; beside a tool named ``issue_read``, ``mcp__github__issue_read``
as ``github__issue_read``. A prefix joined by ``_`` (opencode's ``github_issue_read``) is
kept: it cannot be told from a tool's own name (Playwright MCP's ``browser_click``). The
block's tools keep their names: the model calls them directly, by the names the client
gave. A name the conversation's earlier results showed keeps meaning its tool when the
catalogue grows a tool that shares it (:func:`delivered_tool`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from selection.catalog.catalog import Catalog
from selection.clients.meta_tools import CALL_TOOL, LOAD_TOOLS, SEARCH_TOOLS
from selection.clients.name_search import name_form, own_names
from selection.indexes.tool_index import LRUCache

#: Names a shown name never takes: the meta-tools' and the bridge's (a bridge call of
#: such a name runs the meta-tool).
RESERVED = frozenset({LOAD_TOOLS, SEARCH_TOOLS, CALL_TOOL})
#: Fewest name words of a shown name ("status" alone says too little of ``git_status``).
MIN_SHOWN_WORDS = 2
#: How a shown name is written: OpenAI's function-name characters, a letter or digit first.
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class ShownNames:
    """A catalogue's shown names: ``shown`` tool name → the name it is shown by (only
    those shown otherwise), ``tools`` the reverse."""

    shown: Mapping[str, str]
    tools: Mapping[str, str]


_SHOWN: LRUCache[str, ShownNames] = LRUCache(32)


def shown_names(catalog: Catalog) -> ShownNames:
    """The shown names of ``catalog``'s tools (see the module docstring), built once per
    catalogue."""

    def build() -> ShownNames:
        owns = {name: own_names(name)[1:] for name in catalog.names}
        holders = Counter(form for forms in owns.values() for form in {name_form(o) for o in forms})
        taken = {name_form(name) for name in (*catalog.names, *RESERVED)}
        shown: dict[str, str] = {}
        for name, forms in owns.items():
            shown_as = next((own for own in reversed(forms) if _FUNCTION_NAME.fullmatch(own)
                             and holders[form := name_form(own)] == 1 and form not in taken
                             and len(form.split()) >= MIN_SHOWN_WORDS), None)
            if shown_as is not None:
                shown[name] = shown_as
        return ShownNames(shown, {own: name for name, own in shown.items()})

    return _SHOWN.get_or_build(catalog.fingerprint, build)


def shown_name(name: str, catalog: Catalog) -> str:
    """The name tool ``name`` of ``catalog`` is shown by when delivered (``name`` itself
    for a name the catalogue does not show otherwise)."""
    return shown_names(catalog).shown.get(name, name)


def tool_shown_as(given: str, catalog: Catalog) -> str | None:
    """The tool of ``catalog`` shown by the name ``given`` (None: no tool is)."""
    return shown_names(catalog).tools.get(given)


def tool_named(given: str, catalog: Catalog) -> str:
    """The tool ``given`` names: the tool of that name, else the tool shown by it, else
    ``given`` as it is (a name no tool has)."""
    if catalog.get(given) is not None:
        return given
    return tool_shown_as(given, catalog) or given


def delivered_tool(given: str, delivered: Collection[str]) -> str | None:
    """The one tool of ``delivered`` (those the conversation's results delivered) whose
    own name ``given`` is, exactly as written (None: none, or several)."""
    tools = [name for name in delivered if given in own_names(name)[1:]]
    return tools[0] if len(tools) == 1 else None
