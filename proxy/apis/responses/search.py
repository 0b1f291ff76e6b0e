"""Output items of a Responses turn as the client sees them, where the request's tools
were translated (:mod:`proxy.apis.responses_tools`).

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
  (:data:`proxy.apis.responses_history.CALL_ID_PREFIX`), so the next turn's history
  gives the upstream the same call it saw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from proxy.apis.responses_history import (
    CALL_ID_PREFIX,
    OUTPUT_ID_PREFIX,
    SEARCH_CALL,
    SEARCH_OUTPUT,
)
from proxy.apis.responses_tools import ToolLayout
from selection.tool_search import SearchResult

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


def client_item(layout: ToolLayout, item: Any) -> Any:
    """One output item as the client sees it (see the module docstring); items that
    need no change are returned as they are."""
    if not isinstance(item, Mapping) or item.get("type") not in NAMED_CALLS:
        return item
    name = item.get("name")
    if item.get("type") == "function_call" and name == layout.client_search_name:
        search = {"type": SEARCH_CALL, "id": item.get("id") or f"{CALL_ID_PREFIX}{item.get('call_id')}",
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


def hosted_search_items(
    layout: ToolLayout, call_id: str, arguments: Any, result: SearchResult | None
) -> list[dict[str, Any]]:
    """The ``tool_search_call`` and ``tool_search_output`` items of a hosted search the
    proxy ran (see the module docstring). ``result`` None (the call was not run): the
    output loads nothing."""
    found = result.found if result is not None and result.error is None else ()
    common = {"call_id": None, "execution": "server", "status": "completed"}
    return [
        {"type": SEARCH_CALL, "id": f"{CALL_ID_PREFIX}{call_id}", **common,
         "arguments": parsed_arguments(arguments)},
        {"type": SEARCH_OUTPUT, "id": f"{OUTPUT_ID_PREFIX}{call_id}", **common,
         "tools": layout.loaded_entries(list(found))},
    ]
