"""A client that defers its own tools behind a plain search function.

Coding agents keep large tool sets (their MCP tools) out of the request's ``tools``: the
prompt names them in a list (the *deferred-tool menu*: one name per line, with or without
a purpose), the model is given an ordinary function that fetches a named or described
tool's definition, and the request after a fetch carries the fetched tool in ``tools``
(plain, or marked ``defer_loading``). Claude Code's ``ToolSearch`` (with
``ENABLE_TOOL_SEARCH``) and Qwen Code's ``tool_search`` work so; the client executes the
function itself, so the upstream needs no emulation and no second discovery tool.

Recognised by structure, not by one client's strings:

* the search function: a function whose name's words (split at ``_``, ``-``, ``.`` and
  case changes) pair ``tool``/``tools`` with a finding verb (:data:`FINDING_VERBS`) and
  that takes a string argument and is not itself deferred;
* the menu: in the request's system texts, a run of at least :data:`MENU_MIN_NAMES`
  consecutive lines each starting with an identifier (optionally bulleted or quoted,
  optionally followed by ``:``, `` - `` and a purpose), at least half of them shaped like
  tool names (:func:`name_like`), naming no tool of the request.

A client is deferring when it brings such a function and either a menu or a tool marked
``defer_loading``. A wrong guess costs savings, never a tool: the client's tools are then
forwarded as it sent them. No I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog, Tool
from selection.conversation.query import content_text

#: Verbs that, beside ``tool``/``tools`` in a function's name, make it a tool finder.
FINDING_VERBS = frozenset(
    {"search", "find", "fetch", "load", "discover", "lookup", "select", "query", "resolve"}
)
#: Fewest names a menu lists.
MENU_MIN_NAMES = 3

_WORD_BREAK = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
#: One menu line: an optional bullet, the name (optionally quoted), then the end of the
#: line or a separator before a purpose.
_MENU_LINE = re.compile(
    r"^[ \t]*(?:[-*\u2022][ \t]+|\d{1,3}[.)][ \t]+)?"
    r"(?P<q>[`\"']?)(?P<name>[A-Za-z_][A-Za-z0-9_.:-]{0,127})(?P=q)"
    r"[ \t]*(?:$|:|\(|[ \t]-[ \t]|[ \t]?[\u2013\u2014][ \t]?)"
)
_NAME_TOKEN = re.compile(r"[A-Za-z0-9_.:-]+")


def name_words(name: str) -> list[str]:
    """The lower-case words of an identifier: ``ToolSearch`` → ``["tool", "search"]``."""
    return [word.lower() for word in _WORD_BREAK.split(name) if word]


def name_like(name: str) -> bool:
    """Whether ``name`` is shaped like a tool name rather than a word: it joins words
    with ``_``, ``-``, ``.``, ``:`` or a case change (``list_issues``, ``CronCreate``)."""
    return len(name_words(name)) > 1


def is_search_function(tool: Tool) -> bool:
    """Whether ``tool`` is a function that finds other tools (see the module docstring)."""
    words = set(name_words(tool.name))
    if not words & {"tool", "tools"} or not words & FINDING_VERBS:
        return False
    properties = tool.parameters.get("properties")
    return isinstance(properties, Mapping) and any(
        isinstance(schema, Mapping) and schema.get("type") == "string"
        for schema in properties.values()
    )


@dataclass(frozen=True)
class DeferredMenu:
    """A deferred-tool menu found in the prompt: ``names`` in the order listed."""

    names: tuple[str, ...]


def deferred_menu(texts: Iterable[str], known: Iterable[str]) -> DeferredMenu | None:
    """The deferred-tool names the system ``texts`` list (runs of menu lines, see the
    module docstring), leaving out ``known`` names (the request's tools); None when no
    run qualifies."""
    known_names = set(known)
    names: dict[str, None] = {}
    for text in texts:
        run: list[str] = []
        for line in [*text.splitlines(), ""]:
            match = _MENU_LINE.match(line)
            if match is not None:
                run.append(match.group("name"))
                continue
            _take_run(run, known_names, names)
            run = []
    return DeferredMenu(tuple(names)) if names else None


def _take_run(run: list[str], known: set[str], names: dict[str, None]) -> None:
    unknown = [name for name in dict.fromkeys(run) if name not in known]
    if len(unknown) >= MENU_MIN_NAMES and 2 * sum(map(name_like, unknown)) >= len(unknown):
        names.update(dict.fromkeys(unknown))


@dataclass(frozen=True)
class ClientDeferral:
    """The client defers tools behind its own search function ``search`` (a catalogue
    tool's name). ``menu``: the deferred-tool menu of its prompt (None: it marks
    deferred tools ``defer_loading`` instead)."""

    search: str
    menu: DeferredMenu | None


def client_deferral(
    catalog: Catalog, system_texts: Sequence[str]
) -> ClientDeferral | None:
    """The request's own deferral through a plain search function, or None (see the
    module docstring). ``system_texts``: its system/developer texts, in order."""
    search = catalog.derived("client_search", _first_search_function)
    if search is None:
        return None
    menu = deferred_menu(system_texts, catalog.names)
    if menu is None and not catalog.deferred:
        return None
    return ClientDeferral(search, menu)


def _first_search_function(catalog: Catalog) -> str | None:
    """The catalogue's first search function (:func:`is_search_function`) the client did
    not defer (a deferred function is not callable until found: not the finder)."""
    return next(
        (tool.name for tool in catalog.tools if not tool.deferred and is_search_function(tool)),
        None,
    )


def found_by_search(messages: Sequence[Any], search: str, catalog: Catalog) -> tuple[str, ...]:
    """Catalogue tools named in the results of earlier calls of the client's search
    function ``search``, in the order found (``messages``: Chat Completions shape —
    assistant ``tool_calls``, ``tool`` results by ``tool_call_id``). The search function
    itself is never among them."""
    calls: set[str] = set()
    found: dict[str, None] = {}
    names = set(catalog.names) - {search}
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "assistant":
            calls.update(_search_call_ids(message.get("tool_calls"), search))
        elif message.get("role") == "tool" and message.get("tool_call_id") in calls:
            text = _result_text(message.get("content"))
            found.update(dict.fromkeys(t for t in _NAME_TOKEN.findall(text) if t in names))
    return tuple(found)


def _search_call_ids(tool_calls: Any, search: str) -> Iterable[str]:
    if not isinstance(tool_calls, list):
        return ()
    return [
        call["id"] for call in tool_calls
        if isinstance(call, Mapping) and isinstance(call.get("id"), str)
        and isinstance(call.get("function"), Mapping) and call["function"].get("name") == search
    ]


def _result_text(content: Any) -> str:
    """A result's text; content that is neither text nor text parts is read as its JSON."""
    text = content_text(content)
    if text or content is None:
        return text
    try:
        return json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""


#: Keys under which a tool definition carries its parameter schema (OpenAI, Gemini-style
#: JSON schema, Anthropic, MCP).
SCHEMA_KEYS = ("parameters", "parametersJsonSchema", "input_schema", "inputSchema")
#: Longest result text searched for definitions (characters); a longer one goes as it is.
MAX_COMPACTED_CHARS = 256 * 1024


def compact_definitions(text: str, forwarded: Mapping[str, Tool]) -> str:
    """``text`` (a search function's result) with each JSON object that defines a tool of
    ``forwarded`` (a ``name`` and a parameter schema, :data:`SCHEMA_KEYS`) replaced by the
    tool's name and description: the request's ``tools`` carries the definition, so it is
    not prefilled twice. Everything else is kept byte for byte."""
    if len(text) > MAX_COMPACTED_CHARS or "{" not in text:
        return text
    decoder = json.JSONDecoder()
    out: list[str] = []
    done = start = 0
    while (start := text.find("{", start)) >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start += 1
            continue
        name = value.get("name") if isinstance(value, dict) else None
        tool = forwarded.get(name) if isinstance(name, str) else None
        if tool is None or not any(key in value for key in SCHEMA_KEYS):
            start += 1
            continue
        short = {"name": tool.name, "description": tool.description}
        out += [text[done:start], json.dumps(short, ensure_ascii=False)]
        done = start = end
    return "".join(out) + text[done:] if out else text


def compact_search_results(
    messages: Sequence[Any], search: str, forwarded: Mapping[str, Tool]
) -> list[Any]:
    """``messages`` (Chat Completions shape) with the text of each result of the client's
    search function ``search`` compacted (:func:`compact_definitions`); the other
    messages, and results with nothing to compact, are the same objects."""
    calls: set[str] = set()
    compacted: list[Any] = []
    for message in messages:
        if isinstance(message, Mapping):
            if message.get("role") == "assistant":
                calls.update(_search_call_ids(message.get("tool_calls"), search))
            elif message.get("role") == "tool" and message.get("tool_call_id") in calls:
                message = _compacted(message, forwarded)
        compacted.append(message)
    return compacted


def _compacted(message: Mapping[str, Any], forwarded: Mapping[str, Tool]) -> Mapping[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        new: Any = compact_definitions(content, forwarded)
    elif isinstance(content, list):
        new = [
            {**part, "text": compact_definitions(part["text"], forwarded)}
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) else part
            for part in content
        ]
    else:
        return message
    return message if new == content else {**message, "content": new}
