"""Output items of a Responses turn as the client sees them, where the request's tools
were translated (:mod:`proxy.apis.responses.tools`), and the client's search tool as the
turn core knows it.

Shapes follow OpenAI's Responses API reference and tool search guide:

* A call of a flattened namespace member (``function_call`` / ``custom_tool_call``)
  shows its ``name`` and ``namespace`` as the client declared them.
* A call of the function standing for a client-executed search becomes
  ``{"type": "tool_search_call", "id", "call_id", "execution": "client", "status",
  "arguments": {…}}``: the client runs the search and answers with a
  ``tool_search_output``.
* A call of the function standing for hosted search, which the proxy ran, becomes the
  pair ``tool_search_call`` + ``tool_search_output`` with ``execution`` ``server`` and
  ``call_id`` null, the output's ``tools`` the found definitions in the client's shape
  (namespace members under their namespace). Their ``id``s carry the upstream call id
  (:func:`client_search_id`), so the next turn's history gives the upstream the same call
  it saw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.apis.responses.bridge import bridged_item, is_bridge_item
from proxy.apis.responses.history import (
    CALL_ID_PREFIX,
    OUTPUT_ID_PREFIX,
    SEARCH_CALL,
    SEARCH_OUTPUT,
)
from proxy.apis.responses.tools import TOOL_SEARCH, ToolLayout
from proxy.turn.turn import Turn
from selection.types import ClientSearch, SearchResult

#: Output item types that name a tool the model called.
NAMED_CALLS = ("function_call", "custom_tool_call")


def parsed_arguments(arguments: Any) -> Any:
    """A call's ``arguments`` as the object a ``tool_search_call`` carries: JSON text
    parsed (``{}`` when it is not a JSON object), an object as it is."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def read_search_tool(layout: ToolLayout) -> ClientSearch | None:
    """The client's search tool the proxy emulates: hosted ``tool_search`` (a
    natural-language query), or None (none, or one the client executes itself: its calls
    are the client's)."""
    return ClientSearch("query", TOOL_SEARCH) if layout.hosted else None


def client_search_id(call_id: str, prefix: str = CALL_ID_PREFIX) -> str:
    """The ``id`` the client sees on a search item of the upstream call ``call_id``
    (read back by :func:`proxy.apis.responses.history.upstream_search_id`)."""
    return f"{prefix}{call_id}"


def is_search_call(turn: Turn, item: Any) -> bool:
    """Whether ``item`` is a ``function_call`` of the function standing for hosted search."""
    return (
        turn.plan.meta is not None and turn.plan.meta.client_search is not None
        and isinstance(item, Mapping) and item.get("type") == "function_call"
        and item.get("name") == turn.plan.meta.client_search
    )


def client_output(turn: Turn, layout: ToolLayout, items: Sequence[Any]) -> list[Any]:
    """Output items as the client sees them: meta-calls hidden, but a call of the function
    standing for hosted search shown as the search's ``tool_search_call`` +
    ``tool_search_output`` (:func:`shown_search`); a bridge call as the call it stands for
    (:func:`proxy.apis.responses.bridge.bridged_item`), hidden when it cannot be made; the
    others through :func:`client_item`."""
    shown: list[Any] = []
    for item in items:
        if is_search_call(turn, item):
            call_id = str(item.get("call_id"))
            shown += shown_search(layout, call_id, item.get("arguments"), turn.searches.get(call_id))
        elif is_bridge_item(turn, item):
            call = bridged_item(turn, item)
            shown += [client_item(layout, call)] if call is not None else []
        elif not (isinstance(item, Mapping) and item.get("type") == "function_call"
                  and turn.is_meta(item.get("name"))):
            shown.append(client_item(layout, item))
    return shown


def client_item(layout: ToolLayout, item: Any) -> Any:
    """One output item as the client sees it (see the module docstring); items that
    need no change are returned as they are."""
    if not isinstance(item, Mapping) or item.get("type") not in NAMED_CALLS:
        return item
    name = item.get("name")
    if item.get("type") == "function_call" and name == layout.client_search_name:
        search = {"type": SEARCH_CALL, "id": item.get("id") or client_search_id(str(item.get("call_id"))),
                  "call_id": item.get("call_id"), "execution": "client",
                  "status": item.get("status") or "completed",
                  "arguments": parsed_arguments(item.get("arguments"))}
        return search
    if not isinstance(name, str) or name not in layout.members:
        return item
    client_name, namespace = layout.client_name(name)
    if namespace is None:
        return item
    return {**item, "name": client_name, "namespace": namespace}


def shown_search(
    layout: ToolLayout, call_id: str, arguments: Any, result: SearchResult | None
) -> list[dict[str, Any]]:
    """The ``tool_search_call`` and ``tool_search_output`` items of a hosted search the
    proxy ran (see the module docstring). ``result`` None (the call was not run): the
    output loads nothing."""
    found = result.found if result is not None and result.error is None else ()
    common = {"call_id": None, "execution": "server", "status": "completed"}
    return [
        {"type": SEARCH_CALL, "id": client_search_id(call_id), **common,
         "arguments": parsed_arguments(arguments)},
        {"type": SEARCH_OUTPUT, "id": client_search_id(call_id, OUTPUT_ID_PREFIX), **common,
         "tools": layout.loaded_entries(list(found))},
    ]


def shown_search_events(items: Sequence[Any], first_index: int) -> list[dict[str, Any]]:
    """The item events that stream whole ``items`` (:func:`shown_search`'s, or any item the
    proxy adds) from output index ``first_index`` on: each item added, then done."""
    return [
        {"type": kind, "output_index": first_index + offset, "item": item}
        for offset, item in enumerate(items)
        for kind in ("response.output_item.added", "response.output_item.done")
    ]
