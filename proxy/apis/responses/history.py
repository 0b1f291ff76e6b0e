"""A Responses request's ``input`` items as a plain OpenAI-compatible server takes them,
and the tools earlier searches loaded.

Shapes follow OpenAI's Responses API reference and tool search guide. Translated, always
the same way so a conversation's prompt prefix stays the same from turn to turn:

* ``tool_search_call`` ``{"call_id", "execution", "arguments": {…}}`` → a ``function_call``
  of the function that stands for the search (``arguments`` as JSON text, as the proxy
  hands the model's call back on a re-issued round; text a client sent is kept). A hosted (``server``) call has
  ``call_id`` null: its id is read from the item ``id`` the proxy gave it
  (:func:`upstream_search_id`), else numbered by its place among the input's hosted calls.
* ``tool_search_output`` ``{"call_id", "tools": [definitions]}`` → the
  ``function_call_output`` of that call. A hosted search's: the found tools' names and
  purposes, the text the proxy answered the live call with
  (:meth:`selection.clients.tool_search.SearchResult.content`). A client-executed search's
  (``execution: "client"``): empty, since the upstream's ``tools`` carry what it found (a
  text naming or describing them would repeat it in every later request). Its ``tools``
  are loaded for the conversation (:attr:`Loaded.found`); a definition the request's
  ``tools`` lack (a client-executed search may return any) joins the catalogue. Where
  tools are delivered in the conversation (``deliver``: the finds the block does not
  hold, :mod:`selection.clients.bridge`), either output also carries the definitions of
  those finds and how to call them (``tools``, ``note``; a client-executed search's is
  that object alone), the same text on every request while the block stays.
* ``additional_tools`` ``{"tools": [definitions]}`` → removed; its tools are loaded the
  same way.
* ``function_call`` / ``custom_tool_call`` with a ``namespace`` → the flattened name
  (:mod:`proxy.apis.responses.tools`), ``namespace`` removed; ``namespace`` on an output
  item is removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.apis.responses.tools import DEFER_LOADING, Member, ToolLayout, flat_name
from selection.types import Catalog, SearchResult

SEARCH_CALL = "tool_search_call"
SEARCH_OUTPUT = "tool_search_output"
ADDITIONAL_TOOLS = "additional_tools"
#: Prefixes of the ids the proxy gives the hosted search items it emulates: the item
#: ``id`` carries the upstream call id, which the API's ``call_id`` (null) cannot.
CALL_ID_PREFIX = "tsc_tp_"
OUTPUT_ID_PREFIX = "tso_tp_"


def upstream_search_id(item: Mapping[str, Any], prefix: str) -> str | None:
    """The upstream call id of a search item: its ``call_id``, or what its proxy-given
    ``id`` holds after ``prefix``; None when neither says."""
    call_id = item.get("call_id")
    if isinstance(call_id, str) and call_id:
        return call_id
    item_id = item.get("id")
    if isinstance(item_id, str) and item_id.startswith(prefix) and len(item_id) > len(prefix):
        return item_id[len(prefix):]
    return None


@dataclass
class Loaded:
    """Tools an input's earlier searches loaded: ``found`` upstream names in loading
    order; ``injected`` flattened function definitions of those the request's ``tools``
    lack (deferred: they are loaded by being found, never the client's CORE)."""

    found: list[str] = field(default_factory=list)
    injected: list[dict[str, Any]] = field(default_factory=list)


def _definitions(tools: Any) -> list[tuple[str, str | None, Mapping[str, Any]]]:
    """``(upstream name, namespace, definition)`` of the functions in a list of
    definitions (namespace members flattened; ``definition`` as the list has it); other
    types are skipped."""
    found: list[tuple[str, str | None, Mapping[str, Any]]] = []
    for entry in tools if isinstance(tools, list) else ():
        if not isinstance(entry, Mapping):
            continue
        if entry.get("type") == "function" and isinstance(entry.get("name"), str):
            found.append((entry["name"], None, entry))
        elif entry.get("type") == "namespace" and isinstance(entry.get("name"), str):
            for member in entry.get("tools") if isinstance(entry.get("tools"), list) else ():
                if (isinstance(member, Mapping) and member.get("type") == "function"
                        and isinstance(member.get("name"), str)):
                    found.append((flat_name(entry["name"], member["name"]), entry["name"], member))
    return found


def found_in_history(items: Sequence[Any], layout: ToolLayout) -> Loaded:
    """What the ``tool_search_output`` and ``additional_tools`` items of ``items`` load
    (see the module docstring). Tools the request's ``tools`` lack are registered in
    ``layout`` (their names map back to the client's, like the request's own)."""
    loaded = Loaded()
    for item in items:
        if not isinstance(item, Mapping) or item.get("type") not in (SEARCH_OUTPUT, ADDITIONAL_TOOLS):
            continue
        for upstream, namespace, definition in _definitions(item.get("tools")):
            if upstream not in layout.members:
                layout.members[upstream] = Member(str(definition["name"]), namespace, definition)
                if namespace is not None:
                    layout.namespaces.setdefault(namespace, {"name": namespace, "tools": []})
                loaded.injected.append({**definition, "name": upstream, DEFER_LOADING: True})
            if upstream not in loaded.found:
                loaded.found.append(upstream)
    return loaded


class _Translator:
    """Translates one input (see the module docstring)."""

    def __init__(
        self, layout: ToolLayout, catalog: Catalog,
        deliver: Callable[[str, Sequence[str]], str] | None,
    ) -> None:
        self.layout = layout
        self.catalog = catalog
        self.deliver = deliver
        self.hosted_calls = 0
        self.unanswered: list[str] = []  # hosted call ids awaiting their output

    def call_id(self, item: Mapping[str, Any]) -> str:
        known = upstream_search_id(item, CALL_ID_PREFIX)
        if known is None:
            self.hosted_calls += 1
            known = f"tool_search_{self.hosted_calls}"
        if item.get("execution") != "client":
            self.unanswered.append(known)
        return known

    def output_call_id(self, item: Mapping[str, Any]) -> str:
        known = upstream_search_id(item, OUTPUT_ID_PREFIX)
        if known is not None:
            if known in self.unanswered:
                self.unanswered.remove(known)
            return known
        return self.unanswered.pop(0) if self.unanswered else "tool_search_0"

    def search_output(self, item: Mapping[str, Any]) -> str:
        """The text the upstream reads where a ``tool_search_output`` stands (see the
        module docstring)."""
        names = tuple(name for name, _, _ in _definitions(item.get("tools")))
        client = item.get("execution") == "client"
        content = "" if client else SearchResult("query", None, names).content(self.catalog)
        if self.deliver is None:
            return content
        delivered = self.deliver(content or "{}", list(dict.fromkeys(names)))
        return content if delivered == (content or "{}") else delivered

    def item(self, item: Any) -> list[Any]:
        if not isinstance(item, Mapping):
            return [item]
        kind = item.get("type")
        if kind == SEARCH_CALL:
            arguments = item.get("arguments")
            name = self.layout.hosted_name
            if item.get("execution") == "client" and self.layout.client_search_name:
                name = self.layout.client_search_name
            if not isinstance(arguments, str):  # the API's object; some clients send text
                arguments = json.dumps(arguments if arguments is not None else {},
                                       ensure_ascii=False)
            return [{"type": "function_call", "call_id": self.call_id(item), "name": name,
                     "arguments": arguments}]
        if kind == SEARCH_OUTPUT:
            return [{"type": "function_call_output", "call_id": self.output_call_id(item),
                     "output": self.search_output(item)}]
        if kind == ADDITIONAL_TOOLS:
            return []
        if "namespace" not in item:
            return [item]
        translated = {key: value for key, value in item.items() if key != "namespace"}
        if kind in ("function_call", "custom_tool_call"):
            translated["name"] = self.layout.upstream_name(item.get("name"), item["namespace"])
        return [translated]


def upstream_history(
    items: Sequence[Any], layout: ToolLayout, catalog: Catalog, *,
    deliver: Callable[[str, Sequence[str]], str] | None = None,
) -> list[Any]:
    """``items`` translated for the upstream (see the module docstring); ``catalog``: the
    request's (for the found tools' purposes and definitions); ``deliver``: where tools
    are delivered in the conversation, a search output's text with the definitions of its
    finds outside the block (:meth:`selection.types.Plan.deliver`); None: they are not."""
    translator = _Translator(layout, catalog, deliver)
    return [translated for item in items for translated in translator.item(item)]
