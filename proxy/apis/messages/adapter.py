"""The Anthropic Messages API (``POST /v1/messages``): request adapter and the client's
view of a plain answer (the streamed one is :mod:`proxy.apis.messages.stream`).

Follows Anthropic's Messages API reference. The conversation is ``system`` (a string or
text blocks) + ``messages`` whose ``content`` is a string or content blocks; assistant
``tool_use`` {id, name, input} blocks pin their tools as chat ``tool_calls`` do, user
``tool_result`` {tool_use_id, content} blocks are the tool results the query reads.
``tool_choice`` (``auto``, ``any``, ``none``, ``{"type": "tool", "name"}``, with
``disable_parallel_tool_use``) is always forwarded as sent. A meta-call is a ``tool_use``
block naming a meta-tool; the re-issued request appends the assistant turn with the
round's blocks and a user turn with one ``tool_result`` per meta-call.

Tool search (:mod:`proxy.apis.messages.search`): the client's deferral holds (tools
without ``defer_loading`` are its CORE); a tool search server tool is emulated (the
upstream gets a function, the client ``server_tool_use`` + ``tool_search_tool_result``
blocks); a request that defers tools without one runs its own search (``tool_reference``
blocks in a ``tool_result``), so toolprune offers no meta-tool of its own; the history's
search blocks and references are rewritten for the upstream and what they found stays
loaded; ``defer_loading`` never reaches the upstream. The deferred-tool menu of a client
that runs its own search moves from ``messages`` to the end of ``system``
(:mod:`proxy.apis.messages.menus`).

Tools found after a conversation's first request may reach the model in the conversation
(:attr:`selection.types.Plan.delivers`): a ``call_tool`` bridge call becomes the client's
``tool_use`` (:mod:`proxy.apis.messages.bridge`), and each later request's history is
written as the upstream saw it (:mod:`proxy.apis.messages.history`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.apis.messages.bridge import is_bridge_block, with_client_calls
from proxy.apis.messages.history import upstream_history as delivered_history
from proxy.apis.messages.menus import menus_in_system
from proxy.apis.messages.search import (
    client_output,
    client_search_id,
    found_in_history,
    holds_searches,
    is_search_call,
    is_search_tool,
    read_search_tool,
    upstream_history,
)
from proxy.apis.messages.stream import MessagesStream, anthropic_error, ending_of, stop_reason
from proxy.apis.messages.tools import is_custom, keep_cache_markers, messages_tool
from proxy.http.forwarding import ClientRequest
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, ClientView, MalformedRequest, Reply, json_object
from proxy.turn.events import serves_a_stream, typed_event
from proxy.turn.json_view import JsonView
from proxy.turn.tools import meta_entries
from proxy.turn.turn import MetaCall, Turn, meta_call
from selection.types import (
    DEFER_LOADING,
    NothingToPrune,
    ToolChoice,
    TurnInput,
    encode_body,
    parse_flat_tools,
    without_deferral,
)


def read_choice(body: Mapping[str, Any]) -> ToolChoice:
    """What Anthropic's ``tool_choice`` means for pruning (forwarded as it is): ``none``
    and a named tool offer no meta-tools; a named tool is pinned."""
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "none":
        return ToolChoice(offer_meta=False)
    if kind == "tool":
        name = choice.get("name")
        return ToolChoice(offer_meta=False, pinned=name if isinstance(name, str) else None)
    return ToolChoice()


def _blocks(content: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    arguments = json.dumps(block.get("input", {}))
    return {"id": block.get("id"), "type": "function",
            "function": {"name": block.get("name"), "arguments": arguments}}


def conversation_view(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation in Chat Completions shape (what query and pins are read from).
    Raises MalformedRequest when ``messages`` is not a list (the API requires one)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise MalformedRequest("messages is not a list")
    view: list[dict[str, Any]] = []
    if isinstance(body.get("system"), str | list):
        view.append({"role": "system", "content": body["system"]})
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            view.append({"role": role, "content": content})
        elif role == "assistant":
            calls = [_call(block) for block in _blocks(content, "tool_use")]
            view.append({"role": role, "content": _blocks(content, "text"),
                         **({"tool_calls": calls} if calls else {})})
        elif isinstance(content, list):
            view += [
                {"role": "tool", "tool_call_id": block.get("tool_use_id"),
                 "content": block.get("content", "")}
                for block in _blocks(content, "tool_result")
            ]
            rest = [b for b in content if isinstance(b, Mapping) and b.get("type") != "tool_result"]
            if rest:
                view.append({"role": role, "content": rest})
    return view


@dataclass
class MessagesRequest:
    """One Messages request as read (see :class:`proxy.turn.adapter.ApiRequest`)."""

    input: TurnInput
    #: The meta exchanges appended for re-issued rounds (assistant and user turns).
    appended: list[dict[str, Any]] = field(default_factory=list)
    #: What a plain response shows of rounds before the last: the client's search tool's
    #: exchanges with the blocks around them.
    shown: list[Any] = field(default_factory=list)

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """See :meth:`proxy.turn.adapter.ApiRequest.upstream_body`. The history is the
        client's as the upstream saw it where tools are delivered in the conversation
        (:func:`proxy.apis.messages.history.upstream_history`), then rewritten for a
        server without tool search (:func:`proxy.apis.messages.search.upstream_history`)."""
        plan = turn.plan
        assert plan.native is not None
        body = dict(turn.body)
        tools = [
            *(without_deferral(entry) for entry in plan.native.others if not is_search_tool(entry)),
            *plan.block_entries(meta_entries(plan.meta, messages_tool) if with_meta else []),
        ]
        body["tools"] = keep_cache_markers(turn.body["tools"], tools)
        messages = delivered_history(turn, body["messages"])
        messages = upstream_history(messages, plan.catalog,
                                    plan.deliver if plan.delivers else None)
        if turn.finder is not None:  # the client runs its own search: its menu goes first
            system, messages = menus_in_system(body.get("system"), messages, plan.catalog.names)
            if system is not None:
                body["system"] = system
        body["messages"] = [*messages, *self.appended]
        return encode_body(body, turn.body)

    def meta_reply(self, turn: Turn, call: MetaCall) -> Reply:
        """See :meth:`proxy.turn.adapter.ApiRequest.meta_reply`: an assistant turn of the
        call's ``tool_use`` block alone."""
        block = {"type": "tool_use", "id": call.id, "name": call.name,
                 "input": json.loads(call.arguments)}
        return Reply(meta=[call], items=[block])

    def history_length(self) -> int:
        """See :meth:`proxy.turn.adapter.ApiRequest.history_length`: the messages."""
        messages = self.input.body.get("messages")
        return len(messages) if isinstance(messages, list) else 0

    def append_exchange(self, turn: Turn, reply: Reply, results: Sequence[str]) -> list[Any]:
        """See :meth:`proxy.turn.adapter.ApiRequest.append_exchange`: the assistant message
        (the round's blocks, meta-calls as they were run) and the user message with one
        ``tool_result`` per meta-call, both returned: the exchange later requests put back
        where it stood (a round that ran the client's search tool too: what the client
        was shown of it is taken from its next assistant message there,
        :mod:`proxy.apis.messages.history`). Such a round is also kept in :attr:`shown`,
        as the client sees it."""
        before = len(self.appended)
        answers = [
            {"type": "tool_result", "tool_use_id": call.id, "content": result}
            for call, result in zip(reply.meta, results, strict=True)
        ]
        self.appended.append({"role": "assistant", "content": reply.items})
        self.appended.append({"role": "user", "content": answers})
        if any(is_search_call(turn, block) for block in reply.items):
            self.shown += client_output(turn, reply.items)  # a plain response shows them
        return self.appended[before:]

    def view(
        self, turn: Turn, out: ClientOut, first: UpstreamResponse, *, stream: bool
    ) -> ClientView:
        """See :func:`proxy.turn.events.serves_a_stream`."""
        return (MessagesStream if serves_a_stream(first, stream) else MessagesJson)(turn, out, self)

    # --- answers ----------------------------------------------------------------
    @staticmethod
    def is_meta_block(turn: Turn, block: Any) -> bool:
        return (
            isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and turn.is_meta(block.get("name"))
        )

    def split_content(self, turn: Turn, content: list[Any]) -> Reply:
        """Meta-calls and client calls of a message's ``content`` blocks (bridge calls
        already made the client's calls: :mod:`proxy.apis.messages.bridge`; one left is a
        meta-call). A meta-call's block is kept with the ``id`` and ``input`` (a JSON
        object) it is run with, so the re-issued request pairs it with its
        ``tool_result``; an ``input`` given as text (a streamed call whose JSON did not
        parse) is read as the model wrote it."""
        reply = Reply()
        for block in content:
            if self.is_meta_block(turn, block) or is_bridge_block(turn, block):
                call_id = block.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"
                if block["name"] == turn.plan.meta.client_search:  # type: ignore[union-attr]
                    call_id = client_search_id(call_id)  # the id the client will send back
                given = block.get("input", {})
                arguments = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
                call = meta_call(call_id, block["name"], arguments)
                reply.meta.append(call)
                block = {**block, "id": call.id, "input": json.loads(call.arguments)}
            elif isinstance(block, Mapping) and block.get("type") == "tool_use":
                reply.real_calls.append(str(block.get("name")))
            reply.items.append(block)
        return reply


class MessagesJson(JsonView):
    """The client's view of a plain Messages answer (:class:`proxy.turn.json_view.JsonView`):
    the last round's message, the earlier rounds' search exchanges first."""

    def __init__(self, turn: Turn, out: ClientOut, request: MessagesRequest) -> None:
        super().__init__(turn, out)
        self.request = request

    def read_reply(self, data: dict[str, Any]) -> Reply:
        content = data["content"]
        if not isinstance(content, list):
            raise TypeError("content is not a list")
        content = data["content"] = with_client_calls(self.turn, content)
        reply = self.request.split_content(self.turn, content)
        reply.ending = ending_of(data.get("stop_reason"))
        return reply

    def _content(self) -> list[Any]:
        return [*self.request.shown, *client_output(self.turn, self.data.get("content", []))]

    def shows_output(self) -> bool:
        return bool(self._content())

    def finish_reply(self, data: dict[str, Any]) -> None:
        content = self._content() + [{"type": "text", "text": text} for text in self.notes]
        data["content"] = content
        data["stop_reason"] = stop_reason(data.get("stop_reason"), content)
        if self.usage is not None:
            data["usage"] = self.usage


class MessagesApi:
    """The Messages adapter (see the module docstring)."""

    api = "messages"

    def continued(self, request: ClientRequest) -> ClientRequest:
        """The client's (Messages keeps no state on the server)."""
        return request

    async def decode(self, raw: bytes) -> dict[str, Any] | None:
        """See :func:`proxy.turn.adapter.json_object`."""
        return json_object(raw)

    async def read(self, body: dict[str, Any]) -> MessagesRequest:
        """See :meth:`proxy.turn.adapter.Api.read`; ``tools`` null is as absent."""
        if not isinstance(body.get("messages"), list):  # with tools or without
            raise MalformedRequest("messages is not a list")
        if body.get("tools") is None:
            raise NothingToPrune()
        native = parse_flat_tools(body["tools"], is_custom, "input_schema")
        if not len(native):
            raise NothingToPrune()
        search = read_search_tool(body["tools"])
        found = found_in_history(body.get("messages"), native)
        choice = read_choice(body)
        if search is not None and choice.pinned == search.name:  # forced: offer it
            choice = ToolChoice()
        # llama-server's Messages route keeps none of its own fields (n_cache_reuse): its
        # Anthropic conversion copies only temperature, top_p, top_k, stream and
        # chat_template_kwargs.
        reshaped = holds_searches(body.get("messages")) or any(
            isinstance(entry, Mapping) and DEFER_LOADING in entry for entry in native.others
        )
        return MessagesRequest(TurnInput(
            body=body, native=native, messages=conversation_view(body), choice=choice,
            llama_fields=False, search=search, found=found, reshaped=reshaped, bridges=True,
            # Deferred tools without a search tool: the client runs its own search.
            client_runs_search=search is None and bool(native.deferred),
        ))

    def stream_error(self, status: int, body: bytes) -> bytes:
        """An error answer as Anthropic's ``error`` event (:func:`anthropic_error`)."""
        return typed_event(anthropic_error(status, body))
