"""Tools delivered in the conversation, and the one bridge the model calls them through.

Once a conversation's tool block is in the upstream's KV cache, a tool found later is not
added to the block (the block stands before every message, and a server evaluates
everything after a change again: llama.cpp's chunk reuse stops at inserted text, and a
model with sliding-window or hybrid attention cannot reuse past any change). It reaches the
model where the search result stands, as Anthropic's tool search and Qwen Code's deferred
tools do: the result of a ``load_tools`` / ``search_tools`` call (or of the client's own
search) carries the tool's definition (:func:`definitions`), and the model calls it through
``call_tool`` (:func:`bridge_definition`), a function of the block that never changes. A
local server's tool-call grammar only lets a model name a function of ``tools``, hence one
bridge rather than the tool's own name.

The proxy turns a ``call_tool`` call into the call its client expects
(:mod:`selection.clients.bridge_calls`: the tool's name and arguments, repaired where models
get the shape wrong, checked against its schema), and writes the client's later history
back into ``call_tool`` calls (:func:`bridge_arguments`), so every forwarded prompt extends
the one before it. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from selection.catalog.catalog import Catalog, Tool
from selection.clients.meta_tools import CALL_TOOL, MetaTools, answer_text, free_name
from selection.clients.shown_names import shown_names


def how_to_call(bridge: str) -> str:
    """How the model calls a delivered tool through ``bridge``: the same words in every
    result that delivers a tool and in every refused bridge call."""
    return (f'Call one with {bridge}: {{"name": "<its name>", "arguments": {{<its arguments, '
            'as its parameters say>}}.')


def bridge_definition(name: str, legacy: bool) -> dict[str, Any]:
    """The bridge function (``name``: ``call_tool``, renamed on a clash with a client
    tool), in OpenAI's function-tool shape (``legacy``: a ``functions`` entry)."""
    function = {
        "name": name,
        "description": (
            "Calls a tool whose definition a tool search or load result gave you (it is not "
            "in your tool list): name is the tool's name, arguments are its arguments, as "
            "its parameters say."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The loaded tool's name."},
                "arguments": {"type": "object", "description": "The loaded tool's arguments."},
            },
            "required": ["name", "arguments"],
        },
    }
    return function if legacy else {"type": "function", "function": function}


def definition(tool: Tool, shown: str) -> dict[str, Any]:
    """The definition a result delivers: ``name`` (``shown``: the name the tool is shown
    by, :mod:`selection.clients.shown_names`), ``description``, ``parameters`` (the tool's
    schema as its client gave it), whatever the client's API."""
    return {"name": shown, "description": tool.description, "parameters": dict(tool.parameters)}


def definitions(names: Sequence[str], catalog: Catalog) -> list[dict[str, Any]]:
    """The definitions of the known ``names``, in order, each by the name it is shown
    by."""
    shown = shown_names(catalog).shown
    return [definition(tool, shown.get(name, name))
            for name in names if (tool := catalog.get(name)) is not None]


def bridge_arguments(name: str, arguments: str) -> str:
    """A real call (``name``: the tool's name as the bridge call wrote it, the name it is
    shown by; ``arguments``: its JSON text) written back as the bridge call's arguments,
    ``{"name": ..., "arguments": {...}}`` (arguments that are not a JSON object are kept
    as the string they are)."""
    try:
        inner: Any = json.loads(arguments) if arguments.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        inner = arguments
    return json.dumps({"name": name, "arguments": inner}, ensure_ascii=False)


def delivering(content: str, names: Sequence[str], catalog: Catalog, bridge: str = CALL_TOOL) -> str:
    """A ``load_tools`` / ``search_tools`` result (JSON object text) that delivers the
    tools it loaded (``names``) in the conversation, each by the name it is shown by (under
    ``loaded`` as well): their definitions under ``tools`` and
    the words that say how to call them through ``bridge`` (``note``; tools it names as
    ``already_available``, or lists under ``found`` beside the delivered ones, are in the
    model's tool list, and called directly). A delivered tool is not listed under
    ``found`` as well (its definition says more). The text is compact
    (:func:`~selection.clients.meta_tools.answer_text`). A result that is not a JSON
    object, or loads nothing, is returned as it is."""
    try:
        result = json.loads(content)
    except json.JSONDecodeError:
        return content
    delivered = definitions(names, catalog)
    if not isinstance(result, dict) or not delivered:
        return content
    listed = _not_delivered(result.pop("found", None), set(names))
    if listed:
        result["found"] = listed
    if isinstance(result.get("loaded"), list):
        shown = shown_names(catalog).shown
        result["loaded"] = [shown.get(name, name) if name in names and isinstance(name, str)
                            else name for name in result["loaded"]]
    result["tools"] = delivered
    note = 'The tools under "tools" are not in your tool list. ' + how_to_call(bridge)
    for key in ("already_available", "found"):
        if result.get(key):
            note += f' Those under "{key}" are: call them directly.'
    result["note"] = note
    return answer_text(result)


def _not_delivered(found: Any, delivered: set[str]) -> Any:
    """The entries of a result's ``found`` list (``{"name", "purpose"}`` objects) whose
    tool is not among the ``delivered`` names; anything else as it is."""
    if not isinstance(found, list):
        return found
    return [entry for entry in found
            if not (isinstance(entry, dict) and entry.get("name") in delivered)]


def delivered_results(
    contents: Sequence[str], loads: Sequence[Sequence[str]], forwarded: set[str],
    delivered: list[str], catalog: Catalog, *, bridge: str = CALL_TOOL,
) -> list[str]:
    """The results of one round's meta-calls (``contents``, JSON text each) delivering
    what each loaded or found (``loads``) outside the block (``forwarded``), by
    :func:`delivering`: every time, so a tool loaded again (its earlier result lost to the
    model, or never shown it: a round whose results were not re-issued) comes with its
    definition; ``delivered`` (the conversation's record) is extended with what is new."""
    results = []
    for content, names in zip(contents, loads, strict=True):
        new = [name for name in dict.fromkeys(names) if name not in forwarded]
        results.append(delivering(content, new, catalog, bridge))
        delivered.extend(name for name in new if name not in delivered)
    return results


def with_bridge(meta: MetaTools | None, catalog: Catalog) -> MetaTools:
    """``meta`` (None: no meta-tool) with the bridge offered after its definitions, named
    ``call_tool`` unless a tool of ``catalog`` has that name (:func:`free_name`)."""
    name = free_name(CALL_TOOL, set(catalog.names))
    definition_ = bridge_definition(name, catalog.legacy)
    if meta is None:
        return MetaTools(None, None, (definition_,), bridge=name)
    return replace(meta, definitions=(*meta.definitions, definition_), bridge=name)
