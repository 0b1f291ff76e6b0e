"""A Responses ``input`` written as the upstream saw it, for a conversation whose tools are
delivered in the conversation (:mod:`selection.clients.bridge`): each ``function_call`` of a
tool outside the block written back as the bridge call the model made (same ``call_id``,
``arguments`` ``{"name": …, "arguments": {…}}``), and the proxy's hidden exchanges spliced
back where they stood. Each forwarded ``input`` then extends the one before it, item for
item, and the upstream's KV cache serves the whole history.

Where an exchange stands: a round that ended in meta-calls only is re-issued with its
output items and one ``function_call_output`` per meta-call appended (the exchange, kept in
the conversation's state), after the request's ``input``, whose item count (as translated
for the upstream: :mod:`proxy.apis.responses.history`) is the exchange's ``at``. Some of
its items reached the client — a message or reasoning item the model wrote beside its
meta-call, a hosted search's call and output (:mod:`proxy.apis.responses.search`) — and
the client sends them back right there, at ``at``: those echoes are taken out and the
exchange put in their place whole, as the upstream saw it. An exchange at or past the end
of the ``input`` is this request's own, or an abandoned request's, and is left out.

With ``previous_response_id`` or ``conversation`` the upstream holds the conversation (the
stored response of the last round holds the hidden exchanges and the bridge call as the
model made it); the client sends only what is new, so nothing is rewritten. Shapes follow
OpenAI's Responses API reference (input items).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proxy.turn.turn import Turn, arguments_text, as_upstream_saw, exchanges_by_place
from selection.types import bridge_arguments, content_text

CALL = "function_call"
OUTPUT = "function_call_output"


def upstream_input(turn: Turn, items: list[Any]) -> list[Any]:
    """``items`` (the client's ``input``, translated for the upstream) as the upstream saw
    them (see the module docstring); as they are when the turn does not deliver in the
    conversation."""
    meta = turn.plan.meta
    hosted = meta.client_search if meta is not None else None
    return as_upstream_saw(turn, items, bridged_call,
                           lambda written, exchanges: spliced(written, exchanges, hosted))


def bridged_call(item: Any, bridged: Callable[[str], str | None], bridge: str) -> Any:
    """A ``function_call`` of a tool outside the block written as a call of ``bridge``
    (same ``call_id`` and ``id``) naming the tool as ``bridged`` says (the name its
    delivery showed); any other item as it is."""
    if not isinstance(item, Mapping) or item.get("type") != CALL:
        return item
    name = item.get("name")
    shown = bridged(name) if isinstance(name, str) else None
    if shown is None:
        return item
    arguments = bridge_arguments(shown, arguments_text(item.get("arguments")))
    return {**item, "name": bridge, "arguments": arguments}


def spliced(
    items: list[Any], exchanges: Sequence[Mapping[str, Any]], hosted: str | None
) -> list[Any]:
    """``items`` with each exchange's items put back after the first ``at`` of them (in
    recording order at one place), the client's echoes of what it was shown of them taken
    out (``hosted``: the function standing for hosted search, whose call and output the
    client was shown; None: none)."""
    by_place = exchanges_by_place(exchanges, len(items))
    if not by_place:
        return items
    result: list[Any] = []
    echoes: list[Mapping[str, Any]] = []
    for index, item in enumerate(items):
        if index in by_place:
            result.extend(by_place[index])
            echoes = shown_items(by_place[index], hosted)
        echoed = next((n for n, kept in enumerate(echoes) if echoes_item(item, kept)), None)
        if echoed is not None:
            del echoes[echoed]  # the exchange holds it, as the upstream saw it
            continue
        echoes = []  # the first item that echoes none ends the echoes
        result.append(item)
    return result


def shown_items(items: Sequence[Any], hosted: str | None) -> list[Mapping[str, Any]]:
    """The items of an exchange the client was shown and sends back: all but the
    meta-calls and their outputs, except a hosted search's call and output."""
    searches = {
        item.get("call_id") for item in items
        if hosted is not None and isinstance(item, Mapping) and item.get("type") == CALL
        and item.get("name") == hosted
    }
    return [
        item for item in items
        if isinstance(item, Mapping)
        and (item.get("type") not in (CALL, OUTPUT) or item.get("call_id") in searches)
    ]


def echoes_item(item: Any, kept: Mapping[str, Any]) -> bool:
    """Whether the client's ``item`` is its copy of the exchange's ``kept`` item: the same
    type, and the same ``call_id`` (a call or its output), else the same ``id`` (where
    both have one), else the same role and text."""
    if not isinstance(item, Mapping):
        return False
    kind = kept.get("type")
    if item.get("type", "message" if "role" in item else None) != kind:
        return False
    if kind in (CALL, OUTPUT):
        return item.get("call_id") == kept.get("call_id")
    if isinstance(item.get("id"), str) and isinstance(kept.get("id"), str):
        return item["id"] == kept["id"]
    return _rendered(item) == _rendered(kept)


def _rendered(item: Mapping[str, Any]) -> tuple[Any, str, str]:
    return (item.get("role"), content_text(item.get("content")), content_text(item.get("summary")))
