"""The Responses API (``POST /v1/responses``): request adapter and plain-response adapter.

Follows OpenAI's Responses API reference. The conversation is ``instructions`` +
``input`` (a string, or items: messages, ``function_call`` {call_id, name, arguments},
``function_call_output`` {call_id, output}, reasoning and hosted-tool items). With
``conversation`` or ``previous_response_id`` the history lives on the server: the
conversation id is then derived from them (:class:`ResponseChains`), the query from the
new input. A meta-call is a ``function_call`` output item naming a meta-tool; the
re-issued request appends the round's output items and one ``function_call_output`` per
meta-call to ``input``.

Tool search (OpenAI's tool search guide): the request's ``tools`` and ``input`` are
translated for a plain server (:mod:`proxy.apis.responses_tools`,
:mod:`proxy.apis.responses_history`; the turn's ``api_view`` is the
:class:`~proxy.apis.responses_tools.ToolLayout`), ``defer_loading`` is the client's
deferral contract, hosted ``tool_search`` is emulated (its calls are meta-calls the
client sees as ``tool_search_call`` + ``tool_search_output``,
:mod:`proxy.apis.responses_search`), and a client-executed one is a client call.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from proxy.apis.adapter import RoundReply, UnreadableRequest
from proxy.apis.responses_history import loaded_tools, upstream_items
from proxy.apis.responses_search import client_item, hosted_search_items
from proxy.apis.responses_stream import ResponsesRelay
from proxy.apis.responses_tools import TOOL_SEARCH, ToolLayout, ToolsRejected, read_layout
from proxy.apis.tools import meta_entries, parse_flat_tools, responses_tool
from proxy.chat.calls import arguments_text
from proxy.chat.planner import InvalidToolRequest, NothingToPrune, PlanInput
from proxy.chat.round_reader import meta_call as checked_meta_call
from proxy.chat.turn import MetaCall, Turn, json_bytes
from proxy.http.forwarding import ClientRequest
from selection.catalog import build_catalog
from selection.history import KEEP, read_tool_choice
from selection.meta_tools import free_name
from selection.tool_search import ClientSearch

#: Response ids remembered per process (response id → conversation id).
CHAIN_ENTRIES = 10_000
#: Output item types that are calls the client must answer.
CLIENT_CALLS = ("function_call", "custom_tool_call")
#: A ``previous_response_id`` value in a raw body (a cheap look before decoding it).
_PREVIOUS_ID = re.compile(rb'"previous_response_id"\s*:\s*"([^"\\]{1,256})"')


class ResponseChains:
    """What the proxy knows of the response ids it served, for requests that continue a
    conversation with ``previous_response_id``: the conversation (so its loaded tools
    are kept) and, for a streamed response that took several rounds, the upstream id of
    its last round (the stream shows the client the first round's id, as the SDKs
    require one id per stream; the last round's stored response is the one holding the
    whole exchange), which every continuation is forwarded with, pruned or not (both ids
    name the conversation). Bounded LRU, in process: an id this process did not serve
    starts a conversation keyed on it and is forwarded as it is."""

    def __init__(self, size: int = CHAIN_ENTRIES) -> None:
        self._size = size
        self._ids: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def remember(self, response_id: Any, conversation: str, upstream_id: Any = None) -> None:
        """Record a response id the client got (``upstream_id``: the id the upstream
        stored its answer under, when different)."""
        if not isinstance(response_id, str) or not response_id:
            return
        stored = upstream_id if isinstance(upstream_id, str) and upstream_id else response_id
        # The stored id too: a continuation is planned after it is rewritten to it.
        for known in dict.fromkeys((stored, response_id)):
            self._ids[known] = (conversation, stored)
            self._ids.move_to_end(known)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def conversation_of(self, response_id: str) -> str:
        known = self._ids.get(response_id)
        return known[0] if known else "resp:" + response_id

    def upstream_id(self, response_id: str) -> str:
        known = self._ids.get(response_id)
        return known[1] if known else response_id

    def continued(self, raw: bytes) -> bytes | None:
        """``raw`` (a request body) with its ``previous_response_id`` replaced by the
        stored id of that response when they differ, or None (nothing to replace). For
        every request, pruned or forwarded as it is: the first round's stored response
        holds the hidden meta-call and not the answer."""
        found = {match.decode("latin-1") for match in _PREVIOUS_ID.findall(raw)}
        if not any(self.upstream_id(value) != value for value in found):
            return None
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        if not isinstance(previous, str) or self.upstream_id(previous) == previous:
            return None
        body["previous_response_id"] = self.upstream_id(previous)
        return json_bytes(body)


def input_items(value: Any) -> list[Any]:
    """``input`` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _text(content: Any) -> Any:
    """A message's or output's content for the chat view: a string as is, a list of
    parts (``input_text``/``output_text`` carry ``text``) as those parts."""
    return content if isinstance(content, str | list) else ""


def conversation_view(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation in Chat Completions shape (what query and pins are read from).
    Raises UnreadableRequest when ``input`` is neither a string nor a list."""
    value = body.get("input")
    if not isinstance(value, str | list):
        raise UnreadableRequest("input is neither a string nor a list of items")
    view: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        view.append({"role": "system", "content": body["instructions"]})
    for item in input_items(value):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role")
            view.append({"role": role, "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            view.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            view.append({"role": "tool", "tool_call_id": item.get("call_id"),
                         "content": _text(item.get("output"))})
    return view


def view_of(turn: Turn) -> ToolLayout:
    """The turn's tool layout (:meth:`ResponsesAdapter.read` gives it)."""
    view = turn.api_view
    return view if isinstance(view, ToolLayout) else ToolLayout()


def _is_function(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") == "function"


def _server_side_conversation(body: Mapping[str, Any], chains: ResponseChains) -> str | None:
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conv:" + conversation
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous:
        return chains.conversation_of(previous)
    return None


class ResponsesAdapter:
    """Request and response adapters of the Responses API."""

    api = "responses"

    def __init__(self, chains: ResponseChains | None = None) -> None:
        self.chains = chains or ResponseChains()

    # --- request ----------------------------------------------------------------
    def continued(self, request: ClientRequest) -> ClientRequest:
        """See :meth:`proxy.apis.adapter.ApiAdapter.continued` (:meth:`ResponseChains.continued`)."""
        body = self.chains.continued(request.body)
        return request if body is None else replace(request, body=body)

    def read(self, body: dict[str, Any]) -> PlanInput:
        """See :meth:`proxy.apis.adapter.ApiAdapter.read`. Also raises InvalidToolRequest
        (:class:`~proxy.apis.responses_tools.ToolsRejected`: answered 400)."""
        if "tools" not in body:
            raise NothingToPrune()
        try:
            layout = read_layout(body["tools"])
        except ToolsRejected as error:
            raise InvalidToolRequest(str(error)) from error
        value = body.get("input")
        if not isinstance(value, str | list):
            raise UnreadableRequest("input is neither a string nor a list of items")
        loaded = loaded_tools(input_items(value), layout)
        functions = parse_flat_tools([*layout.functions, *loaded.injected], _is_function, "parameters")
        if not len(functions):
            raise NothingToPrune()
        others = [*layout.others, *([layout.client_search] if layout.client_search else [])]
        native = build_catalog(functions.tools, others)
        layout.hosted_name = free_name(TOOL_SEARCH, set(native.names))
        reshaped = layout.reshaped
        if isinstance(value, list):
            items = upstream_items(value, layout, native)
            reshaped |= len(items) != len(value) or any(a is not b for a, b in zip(items, value))
            body = {**body, "input": items}
        choice = read_tool_choice(body)
        if layout.client_search is not None:  # the client's search is the one discovery
            choice = replace(choice, offer_meta=False)
        return PlanInput(
            body=body,
            native=native,
            messages=conversation_view(body),
            choice=choice,
            conversation=_server_side_conversation(body, self.chains),
            search=ClientSearch("query", TOOL_SEARCH) if layout.hosted else None,
            found=tuple(loaded.found),
            reshaped=reshaped,
            api_view=layout,
        )

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """See :meth:`proxy.apis.adapter.ApiAdapter.upstream_body`."""
        assert turn.native is not None
        body = dict(turn.body)
        body["tools"] = [
            *turn.native.others,
            *turn.block_entries(meta_entries(turn.meta, responses_tool) if with_meta else []),
        ]
        if turn.tool_choice.forward is not KEEP:
            body["tool_choice"] = turn.tool_choice.forward
        if turn.extra_messages:
            body["input"] = [*input_items(body.get("input")), *turn.extra_messages]
        turn.add_llama_fields(body)
        return json_bytes(body)

    def append_exchange(self, turn: Turn, reply: RoundReply, results: Sequence[str]) -> None:
        """See :meth:`proxy.apis.adapter.ApiAdapter.append_exchange`. A round that ran a
        hosted search is also kept in ``turn.shown`` as the client sees it (a plain
        response shows it before the last round's output, as a stream does)."""
        turn.extra_messages.extend(reply.items)
        turn.extra_messages.extend(
            {"type": "function_call_output", "call_id": call.id, "output": result}
            for call, result in zip(reply.meta, results, strict=True)
        )
        if any(self.is_hosted_search(turn, item) for item in reply.items):
            turn.shown.extend(self.client_items(turn, reply.items))

    # --- response ---------------------------------------------------------------
    def is_meta_item(self, turn: Turn, item: Any) -> bool:
        return (
            isinstance(item, Mapping)
            and item.get("type") == "function_call"
            and turn.is_meta(item.get("name"))
        )

    def meta_call(self, item: Mapping[str, Any]) -> MetaCall:
        call_id = item.get("call_id") or f"call_{uuid.uuid4().hex[:24]}"
        return checked_meta_call(call_id, item["name"], arguments_text(item.get("arguments")))

    def client_items(self, turn: Turn, items: Sequence[Any]) -> list[Any]:
        """Output items as the client sees them: meta-calls hidden, but a call of the
        function standing for hosted search shown as the search's
        ``tool_search_call`` + ``tool_search_output`` (:func:`hosted_search_items`); the
        others through :func:`~proxy.apis.responses_search.client_item`."""
        layout = view_of(turn)
        shown: list[Any] = []
        for item in items:
            if self.is_hosted_search(turn, item):
                call_id = str(item.get("call_id"))
                shown += hosted_search_items(
                    layout, call_id, item.get("arguments"), turn.searches.get(call_id)
                )
            elif not self.is_meta_item(turn, item):
                shown.append(client_item(layout, item))
        return shown

    def client_name(self, turn: Turn, name: str) -> str:
        """The name the client knows an upstream tool by (a namespace member's own)."""
        return view_of(turn).client_name(name)[0]

    def is_hosted_search(self, turn: Turn, item: Any) -> bool:
        return (
            turn.meta is not None and turn.meta.client_search is not None
            and isinstance(item, Mapping) and item.get("type") == "function_call"
            and item.get("name") == turn.meta.client_search
        )

    def is_client_search(self, turn: Turn, item: Any) -> bool:
        name = view_of(turn).client_search_name
        return (
            name is not None and isinstance(item, Mapping)
            and item.get("type") == "function_call" and item.get("name") == name
        )

    def split_output(self, turn: Turn, output: list[Any]) -> RoundReply:
        """Meta-calls and client calls of a response's ``output``. A meta-call's item is
        kept with the ``call_id`` and ``arguments`` (JSON object text) it is run with:
        llama-server answers 500 to an input ``function_call`` whose arguments are not
        JSON (cut off, or a small model's invented text)."""
        reply = RoundReply()
        for item in output:
            if self.is_meta_item(turn, item):
                call = self.meta_call(item)
                reply.meta.append(call)
                item = {**item, "call_id": call.id, "arguments": call.arguments}
            elif isinstance(item, Mapping) and item.get("type") in CLIENT_CALLS:
                reply.real_calls.append(str(item.get("name")))
            reply.items.append(item)
        return reply

    def read_reply(self, turn: Turn, data: dict[str, Any]) -> RoundReply:
        """See :meth:`proxy.apis.adapter.ApiAdapter.read_reply`."""
        output = data["output"]
        if not isinstance(output, list):
            raise TypeError("output is not a list")
        return self.split_output(turn, output)

    def client_response(
        self, turn: Turn, response: dict[str, Any], output: list[Any],
        usage: dict[str, Any] | None, client_id: str | None = None,
    ) -> dict[str, Any]:
        """A response object as the client sees it: ``output`` given (meta-calls
        removed), ``usage`` summed, the request's ``tools`` and ``tool_choice`` echoed as
        the client sent them, ``id`` the ``client_id`` when given. Remembers the id for
        ``previous_response_id``."""
        upstream_id = response.get("id")
        response = {**response, "output": output}
        if client_id is not None:
            response["id"] = client_id
        if usage is not None:
            response["usage"] = usage
        for echoed in ("tools", "tool_choice"):
            if echoed in response and echoed in turn.body:
                response[echoed] = turn.body[echoed]
        self.chains.remember(response.get("id"), turn.conversation, upstream_id)
        return response

    def finish_reply(
        self, turn: Turn, data: dict[str, Any], usage: dict[str, Any] | None, only_meta: bool
    ) -> None:
        """See :meth:`proxy.apis.adapter.ApiAdapter.finish_reply`. Earlier rounds that ran
        a hosted search come first (``turn.shown``)."""
        output = [*turn.shown, *self.client_items(turn, data["output"])]
        data.update(self.client_response(turn, data, output, usage))

    def relay(self, turn: Turn) -> ResponsesRelay:
        return ResponsesRelay(self, turn)

