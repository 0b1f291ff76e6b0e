"""Anthropic's tool search on ``/v1/messages``, for an upstream that knows none of it.

Shapes follow Anthropic's tool search tool page and Messages API reference:

* the server tool ``{"type": "tool_search_tool_regex_20251119" | "tool_search_tool_bm25_20251119",
  "name": "tool_search_tool_regex" | "tool_search_tool_bm25"}`` (the undated type names
  too); it may not be deferred itself;
* what the API answers for the model's search: a ``server_tool_use`` block ``{id:
  "srvtoolu_…", name, input: {"query"}}`` then a ``tool_search_tool_result`` block
  ``{tool_use_id, content}`` whose content is ``{"type": "tool_search_tool_search_result",
  "tool_references": [{"type": "tool_reference", "tool_name"}]}`` or ``{"type":
  "tool_search_tool_result_error", "error_code", "error_message"}``;
* a client that runs its own search answers its tool's call with an ordinary
  ``tool_result`` whose content holds ``tool_reference`` blocks.

The proxy reads the search tool (:func:`read_search_tool`, an unknown version is a 400,
never a silent drop), the tools the history's references found (:func:`found_in_history`:
kept loaded), and rewrites the history for the upstream (:func:`upstream_history`): a
``server_tool_use`` becomes a ``tool_use`` of the function that stands for the search
tool, its result a ``tool_result`` in the next user turn holding the same text the model
read when the search ran (:meth:`selection.clients.tool_search.SearchResult.content`); so the
prompt is the same round to round and turn to turn. The ``tool_reference`` blocks of a
search the client ran itself (its own function's ``tool_result``) are taken out and
nothing is written in their place: a reference loads the tool, which the upstream's
``tools`` now carry (the client sends it, ``defer_loading``), and llama-server, sent the
client's request directly, renders a ``tool_reference`` as nothing too; a text naming or
describing the found tools would repeat what ``tools`` holds, in every later request.

Where tools are delivered in the conversation (the block stays as the upstream cached it,
:mod:`selection.clients.bridge`), a found tool the block does not hold is not in the
upstream's ``tools``: a search's result then carries the definitions of its finds outside
the block (:meth:`selection.types.Plan.deliver`), the emulated search's in its JSON, the
client's own search's as one text block where its ``tool_reference`` blocks stood; the
same text on every later request, rendered from the finds and the block alone.
:func:`client_output` writes what the client sees of a search the proxy ran.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proxy.turn.planner import InvalidToolRequest
from proxy.turn.turn import Turn
from selection.types import (
    UNAVAILABLE,
    Catalog,
    ClientSearch,
    SearchResult,
    free_name,
)

#: The search tool types toolprune emulates → their kind.
SEARCH_TYPES = {
    "tool_search_tool_regex_20251119": "regex",
    "tool_search_tool_regex": "regex",
    "tool_search_tool_bm25_20251119": "query",
    "tool_search_tool_bm25": "query",
}
#: Any version of Anthropic's tool search tool, known or not.
_ANY_SEARCH_TYPE = re.compile(r"tool_search_tool_")
#: The search tools' names (``server_tool_use`` blocks name them).
SEARCH_NAMES = {"regex": "tool_search_tool_regex", "query": "tool_search_tool_bm25"}
SERVER_TOOL_USE = "server_tool_use"
SEARCH_RESULT = "tool_search_tool_result"
TOOL_REFERENCE = "tool_reference"


def is_search_tool(entry: Any) -> bool:
    """Whether a ``tools`` entry is a tool search tool the proxy emulates."""
    return isinstance(entry, Mapping) and entry.get("type") in SEARCH_TYPES


def read_search_tool(tools: Sequence[Any]) -> ClientSearch | None:
    """The request's tool search tool, or None. Raises InvalidToolRequest for a version
    toolprune does not know (``tool_search_tool_regex_20991231``), a search tool marked
    ``defer_loading``, more than one, or a custom tool named like it."""
    found: ClientSearch | None = None
    for position, entry in enumerate(tools):
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if not isinstance(kind, str) or not _ANY_SEARCH_TYPE.match(kind):
            continue
        where = f"tools.{position}"
        if kind not in SEARCH_TYPES:
            known = ", ".join(t for t in SEARCH_TYPES if t[-1].isdigit())
            raise InvalidToolRequest(
                f"{where}.type: {kind!r} is a tool search version this server does not "
                f"support (supported: {known})"
            )
        if entry.get("defer_loading") is True:
            raise InvalidToolRequest(f"{where}: the tool search tool cannot be deferred "
                                     "(defer_loading: true)")
        if found is not None:
            raise InvalidToolRequest(f"{where}: only one tool search tool per request")
        search_kind = SEARCH_TYPES[kind]
        name = entry.get("name")
        found = ClientSearch(search_kind, name if isinstance(name, str) and name else
                             SEARCH_NAMES[search_kind])  # type: ignore[arg-type]
    if found is not None:
        for position, entry in enumerate(tools):
            if entry.get("name") == found.name and not is_search_tool(entry):
                raise InvalidToolRequest(
                    f"tools.{position}.name: {found.name!r} is the tool search tool's name; "
                    "tool names must be unique"
                )
    return found


def _content(block: Mapping[str, Any]) -> Any:
    return block.get("content")


def _references(content: Any) -> list[str]:
    """Tool names of the ``tool_reference`` blocks in a list of blocks."""
    if not isinstance(content, list):
        return []
    return [
        str(block.get("tool_name"))
        for block in content
        if isinstance(block, Mapping) and block.get("type") == TOOL_REFERENCE
    ]


def _search_references(block: Mapping[str, Any]) -> list[str]:
    """Tool names a ``tool_search_tool_result`` block references (none for an error)."""
    content = _content(block)
    return _references(content.get("tool_references") if isinstance(content, Mapping) else None)


def _result_of(block: Mapping[str, Any], kind: str) -> SearchResult:
    """A ``tool_search_tool_result`` block as the search result it reports."""
    content = _content(block)
    if isinstance(content, Mapping) and content.get("type") == "tool_search_tool_result_error":
        code = str(content.get("error_code") or UNAVAILABLE)
        message = content.get("error_message")
        return SearchResult(kind, None, error=code,  # type: ignore[arg-type]
                            message=str(message) if message else code)
    return SearchResult(kind, None, tuple(_search_references(block)))  # type: ignore[arg-type]


def _blocks_of(messages: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """``(where, block)`` of every content block of the conversation."""
    out = []
    for m, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for b, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, Mapping):
                out.append((f"messages.{m}.content.{b}", block))
    return out


def found_in_history(messages: Any, catalog: Catalog) -> tuple[str, ...]:
    """The tools earlier searches found: ``tool_reference``s of ``tool_search_tool_result``
    blocks and of ``tool_result`` contents, in order, once each. Raises
    InvalidToolRequest when one names a tool the request does not define."""
    found: dict[str, None] = {}
    for where, block in _blocks_of(messages):
        kind = block.get("type")
        if kind == SEARCH_RESULT:
            names = _search_references(block)
        elif kind == "tool_result":
            names = _references(_content(block))
        else:
            continue
        for name in names:
            if catalog.get(name) is None:
                raise InvalidToolRequest(
                    f"{where}: tool_reference names {name!r}, which is not among the "
                    "request's tools"
                )
            found.setdefault(name, None)
    return tuple(found)


def function_name(client_name: str, catalog: Catalog) -> str:
    """The name of the function that stands for the search tool called ``client_name``
    (as :func:`selection.clients.tool_search.search_meta_tools` names it)."""
    return free_name(client_name, set(catalog.names))


def _kind_of(name: Any) -> str:
    return "query" if name == SEARCH_NAMES["query"] else "regex"


def holds_searches(messages: Any) -> bool:
    """Whether the conversation holds search blocks or ``tool_reference``s, which
    :func:`upstream_history` rewrites for the upstream."""
    return any(block.get("type") in (SERVER_TOOL_USE, SEARCH_RESULT) or
               (block.get("type") == "tool_result" and _references(_content(block)))
               for _, block in _blocks_of(messages))


def upstream_history(
    messages: list[Any], catalog: Catalog, deliver: Delivery | None = None
) -> list[Any]:
    """``messages`` as a plain Anthropic-compatible server accepts them (see the module
    docstring); the client's list itself when nothing needs rewriting. ``deliver``: where
    tools are delivered in the conversation, a search result's text with the definitions
    of its finds outside the block (:meth:`selection.types.Plan.deliver`); None: they are
    not."""
    if not holds_searches(messages):
        return messages
    delivered = deliver if deliver is not None else _as_it_is
    out: list[Any] = []
    pending: list[dict[str, Any]] = []  # tool_results owed to the next user turn
    kinds: dict[Any, str] = {}
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            out.extend(_flush(pending, message))
            continue
        if message.get("role") != "assistant":
            out.extend(_flush(pending, {**message, "content": _user_blocks(content, delivered)}))
            continue
        segment: list[Any] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == SERVER_TOOL_USE and block.get("name") in SEARCH_NAMES.values():
                kinds[block.get("id")] = _kind_of(block.get("name"))
                segment.append({"type": "tool_use", "id": block.get("id"),
                                "name": function_name(str(block.get("name")), catalog),
                                "input": block.get("input", {})})
            elif kind == SEARCH_RESULT:
                result = _result_of(block, kinds.get(block.get("tool_use_id"), "regex"))
                pending.append({"type": "tool_result", "tool_use_id": block.get("tool_use_id"),
                                "content": delivered(result.content(catalog), result.found)})
                if segment:
                    out.append({**message, "content": segment})
                    segment = []
            else:
                if pending and not segment:
                    out.append({"role": "user", "content": pending[:]})
                    pending.clear()
                segment.append(block)
        if segment:
            out.append({**message, "content": segment})
    return [*out, *_flush(pending, None)]


def _flush(pending: list[dict[str, Any]], message: Any) -> list[Any]:
    """``message`` with the owed ``tool_result``s first (a user turn), or them alone
    before it (any other turn, or the end of the conversation)."""
    owed, pending[:] = pending[:], []
    if not owed:
        return [] if message is None else [message]
    if isinstance(message, Mapping) and message.get("role") == "user":
        content = message.get("content")
        rest = [{"type": "text", "text": content}] if isinstance(content, str) else [*(content or [])]
        return [{**message, "content": [*owed, *rest]}]
    return [{"role": "user", "content": owed}, *([] if message is None else [message])]


#: A search result's text (JSON) and its finds → the text the upstream reads
#: (:meth:`selection.types.Plan.deliver`).
Delivery = Callable[[str, Sequence[str]], str]


def _as_it_is(content: str, found: Sequence[str]) -> str:
    """A search result's text where tools are not delivered in the conversation."""
    return content


def _user_blocks(content: list[Any], delivered: Delivery) -> list[Any]:
    """A user turn's blocks, each ``tool_result`` without its ``tool_reference`` blocks
    (its other blocks kept); where they found tools outside the block, one text block
    with their definitions stands where the first of them stood."""
    out = []
    for block in content:
        found = _references(_content(block)) if isinstance(block, Mapping) \
            and block.get("type") == "tool_result" else []
        if found:
            text = delivered("{}", found)
            definitions = [{"type": "text", "text": text}] if text != "{}" else []
            kept: list[Any] = []
            for part in block["content"]:
                if isinstance(part, Mapping) and part.get("type") == TOOL_REFERENCE:
                    kept += definitions
                    definitions = []
                else:
                    kept.append(part)
            block = {**block, "content": kept}
        out.append(block)
    return out


def client_search_id(call_id: str) -> str:
    """A ``srvtoolu_`` id for the model's search call (its own id's suffix kept)."""
    if call_id.startswith("srvtoolu_"):
        return call_id
    suffix = call_id[len("toolu_"):] if call_id.startswith("toolu_") else ""
    return "srvtoolu_" + (suffix or uuid.uuid4().hex[:24])


def client_output(turn: Turn, blocks: Sequence[Any]) -> list[Any]:
    """What the client sees of a round's content blocks: a call of the search function
    becomes the ``server_tool_use`` + ``tool_search_tool_result`` pair of the search the
    proxy ran (``turn.searches``), other meta-calls go (a bridge call left in ``blocks`` is
    one that could not be made: a meta-call), the rest stays."""
    out: list[Any] = []
    for block in blocks:
        if is_search_call(turn, block):
            out += shown_search(turn, block)
        elif not (_is_call(block) and (turn.is_meta(block.get("name"))
                                       or turn.is_bridge(block.get("name")))):
            out.append(block)
    return out


def _is_call(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_use"


def is_search_call(turn: Turn, block: Any) -> bool:
    """Whether ``block`` is a ``tool_use`` of the function standing for the search tool."""
    return (
        _is_call(block) and turn.plan.meta is not None and turn.plan.meta.client_search is not None
        and block.get("name") == turn.plan.meta.client_search
    )


def shown_search(turn: Turn, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``server_tool_use`` and ``tool_search_tool_result`` blocks for the search
    function's call ``block`` (none when the proxy did not run it)."""
    call_id = client_search_id(str(block.get("id")))
    result = turn.searches.get(call_id)
    if result is None or turn.search is None:
        return []
    if result.error is not None:
        content: dict[str, Any] = {"type": "tool_search_tool_result_error",
                                   "error_code": result.error, "error_message": result.message}
    else:
        references = [{"type": TOOL_REFERENCE, "tool_name": name} for name in result.found]
        content = {"type": "tool_search_tool_search_result", "tool_references": references}
    return [
        {"type": SERVER_TOOL_USE, "id": call_id, "name": turn.search.name,
         "input": block.get("input", {})},
        {"type": SEARCH_RESULT, "tool_use_id": call_id, "content": content},
    ]


def shown_search_events(pair: list[dict[str, Any]], first_index: int) -> list[dict[str, Any]]:
    """The ``content_block_*`` events that stream ``pair`` from ``first_index`` on: the
    ``server_tool_use`` block started with an empty ``input`` and given whole in one
    ``input_json_delta``, the result block started whole."""
    events: list[dict[str, Any]] = []
    for offset, block in enumerate(pair):
        index = first_index + offset
        if block["type"] == SERVER_TOOL_USE:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": json.dumps(block["input"])}})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    return events
