"""The Responses API (``POST /v1/responses``): request adapter and the client's view of a
plain answer (the streamed one is :mod:`proxy.apis.responses.stream`).

Follows OpenAI's Responses API reference. The conversation is ``instructions`` +
``input`` (a string, or items: messages, ``function_call`` {call_id, name, arguments},
``function_call_output`` {call_id, output}, reasoning and hosted-tool items). With
``conversation`` or ``previous_response_id`` the history lives on the server: the
conversation id is then derived from them (:class:`~proxy.apis.responses.chains.ResponseChains`),
the query from the new input. A meta-call is a ``function_call`` output item naming a
meta-tool; the re-issued request appends the round's output items and one
``function_call_output`` per meta-call to ``input``. A round's ending is its status:
``incomplete`` (or ``failed``) is cut off.

Tools delivered in the conversation (:mod:`selection.clients.bridge`): a ``function_call``
of the bridge reaches the client as the call it stands for, or is a meta-call when it
cannot be made (:mod:`proxy.apis.responses.bridge`); ``input`` is forwarded as the upstream
saw the conversation (:mod:`proxy.apis.responses.delivery`). A request whose ``input``
holds ``additional_tools`` items (tools the client adds mid-conversation, with no search
output to deliver them in) keeps to the block.

Tool search (OpenAI's tool search guide): the request's ``tools`` and ``input`` are
translated for a plain server (:mod:`proxy.apis.responses.tools`,
:mod:`proxy.apis.responses.history`; the request keeps its
:class:`~proxy.apis.responses.tools.ToolLayout`), ``defer_loading`` is the client's
deferral contract, hosted ``tool_search`` is emulated (its calls are meta-calls the
client sees as ``tool_search_call`` + ``tool_search_output``,
:mod:`proxy.apis.responses.search`), and a client-executed one is a client call.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from proxy.apis.responses.bridge import bridged_item, is_bridge_item
from proxy.apis.responses.chains import ResponseChains
from proxy.apis.responses.delivery import upstream_input
from proxy.apis.responses.history import ADDITIONAL_TOOLS, found_in_history, upstream_history
from proxy.apis.responses.search import client_output, is_search_call, read_search_tool
from proxy.apis.responses.stream import ResponsesStream, ending_of, note_item, responses_error
from proxy.apis.responses.tools import (
    TOOL_SEARCH,
    ToolLayout,
    ToolsRejected,
    declared_groups,
    read_layout,
    responses_tool,
)
from proxy.http.forwarding import ClientRequest
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import (
    ClientOut,
    ClientView,
    MalformedRequest,
    Reply,
    UnreadableRequest,
    json_object,
)
from proxy.turn.events import serves_a_stream, typed_event
from proxy.turn.json_view import JsonView
from proxy.turn.planner import InvalidToolRequest
from proxy.turn.tools import meta_entries
from proxy.turn.turn import MetaCall, Turn, arguments_text, meta_call
from selection.types import (
    KEEP,
    NothingToPrune,
    TurnInput,
    build_catalog,
    encode_body,
    free_name,
    parse_flat_tools,
    read_tool_choice,
)

#: Output item types that are calls the client must answer.
CLIENT_CALLS = ("function_call", "custom_tool_call")


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


@dataclass
class ResponsesRequest:
    """One Responses request as read (see :class:`proxy.turn.adapter.ApiRequest`):
    ``layout``, its tools as read (namespaces, the search tool)."""

    input: TurnInput
    layout: ToolLayout
    chains: ResponseChains
    #: The ``input`` items as the client sent them (None: a string).
    client_input: list[Any] | None = None
    #: The meta exchanges appended to ``input`` for re-issued rounds.
    appended: list[Any] = field(default_factory=list)
    #: What a plain response shows of rounds before the last: the hosted searches the
    #: proxy ran, with the items around them.
    shown: list[Any] = field(default_factory=list)

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """See :meth:`proxy.turn.adapter.ApiRequest.upstream_body`."""
        assert turn.plan.native is not None
        body = dict(turn.body)
        body["tools"] = [
            *turn.plan.native.others,
            *turn.plan.block_entries(meta_entries(turn.plan.meta, responses_tool) if with_meta else []),
        ]
        if turn.tool_choice.forward is not KEEP:
            body["tool_choice"] = turn.tool_choice.forward
        body["input"] = self.forwarded_input(turn)
        if self.appended:
            body["input"] = [*input_items(body.get("input")), *self.appended]
        turn.add_llama_fields(body)
        return encode_body(body, turn.body)

    def forwarded_input(self, turn: Turn) -> Any:
        """The ``input`` the upstream gets before the meta exchanges: the client's,
        translated for a plain server; where tools are delivered in the conversation, also
        with the found tools' definitions where the searches stand and written as the
        upstream saw the conversation (:func:`~proxy.apis.responses.delivery.upstream_input`).
        A string, or a conversation the upstream holds (``previous_response_id``,
        ``conversation``: the client sends only what is new), is forwarded as it is."""
        plan = turn.plan
        if not plan.delivers or self.client_input is None or self.input.server_history:
            return turn.body.get("input")
        items = upstream_history(self.client_input, self.layout, plan.catalog,
                                 deliver=plan.deliver)
        return upstream_input(turn, items)

    def meta_reply(self, turn: Turn, call: MetaCall) -> Reply:
        """See :meth:`proxy.turn.adapter.ApiRequest.meta_reply`: the call's ``function_call``
        output item alone."""
        item = {"type": "function_call", "id": f"fc_{call.id}", "call_id": call.id,
                "name": call.name, "arguments": call.arguments, "status": "completed"}
        return Reply(meta=[call], items=[item])

    def history_length(self) -> int:
        """See :meth:`proxy.turn.adapter.ApiRequest.history_length`: the ``input`` items."""
        return len(input_items(self.input.body.get("input")))

    def append_exchange(self, turn: Turn, reply: Reply, results: Sequence[str]) -> list[Any]:
        """See :meth:`proxy.turn.adapter.ApiRequest.append_exchange`. A round that ran a
        hosted search is also kept in :attr:`shown` as the client sees it (a plain
        response shows it before the last round's output, as a stream does)."""
        before = len(self.appended)
        self.appended.extend(reply.items)
        self.appended.extend(
            {"type": "function_call_output", "call_id": call.id, "output": result}
            for call, result in zip(reply.meta, results, strict=True)
        )
        if any(is_search_call(turn, item) for item in reply.items):
            self.shown.extend(self.client_output(turn, reply.items))
        return self.appended[before:]

    def view(
        self, turn: Turn, out: ClientOut, first: UpstreamResponse, *, stream: bool
    ) -> ClientView:
        """See :func:`proxy.turn.events.serves_a_stream`."""
        return (ResponsesStream if serves_a_stream(first, stream) else ResponsesJson)(turn, out, self)

    # --- answers ----------------------------------------------------------------
    @staticmethod
    def is_meta_item(turn: Turn, item: Any) -> bool:
        return (
            isinstance(item, Mapping)
            and item.get("type") == "function_call"
            and turn.is_meta(item.get("name"))
        )

    @staticmethod
    def is_bridge_item(turn: Turn, item: Any) -> bool:
        """See :func:`proxy.apis.responses.bridge.is_bridge_item`."""
        return is_bridge_item(turn, item)

    def client_output(self, turn: Turn, items: Sequence[Any]) -> list[Any]:
        """Output items as the client sees them (:func:`~proxy.apis.responses.search.client_output`)."""
        return client_output(turn, self.layout, items)

    def client_name(self, name: str) -> str:
        """The name the client knows an upstream tool by (a namespace member's own)."""
        return self.layout.client_name(name)[0]

    def is_client_search(self, item: Any) -> bool:
        """Whether ``item`` calls the function standing for a client-executed search."""
        name = self.layout.client_search_name
        return (
            name is not None and isinstance(item, Mapping)
            and item.get("type") == "function_call" and item.get("name") == name
        )

    @staticmethod
    def meta_call(item: Mapping[str, Any]) -> MetaCall:
        call_id = item.get("call_id") or f"call_{uuid.uuid4().hex[:24]}"
        return meta_call(call_id, item["name"], arguments_text(item.get("arguments")))

    def split_output(self, turn: Turn, output: list[Any]) -> Reply:
        """Meta-calls and client calls of a response's ``output`` (a bridge call is the
        client's call it stands for, its item made that call's, or a meta-call when it cannot
        be made). A meta-call's
        item is kept with the ``call_id`` and ``arguments`` (JSON object text) it is run
        with: llama-server answers 500 to an input ``function_call`` whose arguments are not
        JSON (cut off, or a small model's invented text)."""
        reply = Reply()
        for item in output:
            bridge = is_bridge_item(turn, item)
            bridged = bridged_item(turn, item) if bridge else None
            if self.is_meta_item(turn, item) or (bridge and bridged is None):
                call = self.meta_call(item)
                reply.meta.append(call)
                item = {**item, "call_id": call.id, "arguments": call.arguments}
            elif bridged is not None:  # the client's call (:mod:`proxy.apis.responses.bridge`)
                reply.real_calls.append(str(bridged["name"]))
                item = bridged  # read once: the client's output shows it as it is
            elif isinstance(item, Mapping) and item.get("type") in CLIENT_CALLS:
                reply.real_calls.append(str(item.get("name")))
            reply.items.append(item)
        return reply

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


class ResponsesJson(JsonView):
    """The client's view of a plain Responses answer (:class:`proxy.turn.json_view.JsonView`):
    the last round's response, the earlier rounds' hosted searches first."""

    def __init__(self, turn: Turn, out: ClientOut, request: ResponsesRequest) -> None:
        super().__init__(turn, out)
        self.request = request

    def read_reply(self, data: dict[str, Any]) -> Reply:
        output = data["output"]
        if not isinstance(output, list):
            raise TypeError("output is not a list")
        reply = self.request.split_output(self.turn, output)
        reply.ending = ending_of(data.get("status"), streamed=False)
        return reply

    def _output(self) -> list[Any]:
        output = self.data.get("output", [])
        return [*self.request.shown, *self.request.client_output(self.turn, output)]

    def shows_output(self) -> bool:
        return bool(self._output())

    def finish_reply(self, data: dict[str, Any]) -> None:
        """Earlier rounds that ran a hosted search come first (``shown``)."""
        output = [*self._output(), *(note_item(text) for text in self.notes)]
        data.update(self.request.client_response(self.turn, data, output, self.usage))


class ResponsesApi:
    """The Responses adapter (see the module docstring)."""

    api = "responses"

    def __init__(self, chains: ResponseChains | None = None) -> None:
        self.chains = chains or ResponseChains()

    def continued(self, request: ClientRequest) -> ClientRequest:
        """See :meth:`proxy.turn.adapter.Api.continued` (:meth:`ResponseChains.continued`)."""
        body = self.chains.continued(request.body)
        return request if body is None else replace(request, body=body)

    async def decode(self, raw: bytes) -> dict[str, Any] | None:
        """See :func:`proxy.turn.adapter.json_object`."""
        return json_object(raw)

    async def read(self, body: dict[str, Any]) -> ResponsesRequest:
        """See :meth:`proxy.turn.adapter.Api.read`. Also raises InvalidToolRequest
        (:class:`~proxy.apis.responses.tools.ToolsRejected`: answered 400); ``tools`` null
        is as absent. ``input`` of another type than a string or a list is a body the API
        refuses (MalformedRequest); absent, the proxy has no conversation to read (the
        API may take a stored ``prompt`` instead): UnreadableRequest, with tools."""
        if body.get("input") is not None and not isinstance(body["input"], str | list):
            raise MalformedRequest("input is neither a string nor a list of items")
        if body.get("tools") is None:
            raise NothingToPrune()
        try:
            layout = read_layout(body["tools"])
        except ToolsRejected as error:
            raise InvalidToolRequest(str(error)) from error
        value = body.get("input")
        if not isinstance(value, str | list):
            raise UnreadableRequest("input is neither a string nor a list of items")
        loaded = found_in_history(input_items(value), layout)
        functions = parse_flat_tools([*layout.functions, *loaded.injected], _is_function, "parameters")
        if not len(functions):
            raise NothingToPrune()
        others = [*layout.others, *([layout.client_search] if layout.client_search else [])]
        native = build_catalog(functions.tools, others, declared=declared_groups(layout))
        layout.hosted_name = free_name(TOOL_SEARCH, set(native.names))
        reshaped = layout.reshaped
        adds_tools = False
        if isinstance(value, list):
            adds_tools = any(isinstance(item, Mapping) and item.get("type") == ADDITIONAL_TOOLS
                             for item in value)
            items = upstream_history(value, layout, native)
            reshaped |= len(items) != len(value) or any(a is not b for a, b in zip(items, value, strict=False))
            body = {**body, "input": items}
        choice = read_tool_choice(body)
        conversation = _server_side_conversation(body, self.chains)
        plan_input = TurnInput(
            body=body,
            native=native,
            messages=conversation_view(body),
            choice=choice,
            conversation=conversation,
            search=read_search_tool(layout),
            client_runs_search=layout.client_search is not None,
            found=tuple(loaded.found),
            reshaped=reshaped,
            bridges=not adds_tools,
            server_history=conversation is not None,
        )
        return ResponsesRequest(plan_input, layout, self.chains,
                                value if isinstance(value, list) else None)

    def stream_error(self, status: int, body: bytes) -> bytes:
        """An error answer as the Responses ``error`` event (:func:`responses_error`)."""
        return typed_event(responses_error(status, body))
