"""The Anthropic Messages API (``POST /v1/messages``): request adapter and
plain-response adapter.

Follows Anthropic's Messages API reference. The conversation is ``system`` (a string or
text blocks) + ``messages`` whose ``content`` is a string or content blocks; assistant
``tool_use`` {id, name, input} blocks pin their tools as chat ``tool_calls`` do, user
``tool_result`` {tool_use_id, content} blocks are the tool results the query reads.
``tool_choice`` (``auto``, ``any``, ``none``, ``{"type": "tool", "name"}``, with
``disable_parallel_tool_use``) is always forwarded as sent. A meta-call is a ``tool_use``
block naming a meta-tool; the re-issued request appends the assistant turn with the
round's blocks and a user turn with one ``tool_result`` per meta-call.

Tool search (:mod:`proxy.apis.messages_search`): the client's deferral holds (tools
without ``defer_loading`` are its CORE); a tool search server tool is emulated (the
upstream gets a function, the client ``server_tool_use`` + ``tool_search_tool_result``
blocks); a request that defers tools without one runs its own search (``tool_reference``
blocks in a ``tool_result``), so toolprune offers no meta-tool of its own; the history's
search blocks and references are rewritten for the upstream and what they found stays
loaded; ``defer_loading`` never reaches the upstream.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from proxy.apis.adapter import RoundReply, UnreadableRequest
from proxy.apis.messages_search import (
    client_blocks,
    history_found,
    holds_search,
    is_search_call,
    is_search_tool,
    read_search_tool,
    server_id,
    upstream_messages,
)
from proxy.apis.messages_stream import MessagesRelay, stop_reason
from proxy.apis.tools import (
    keep_cache_markers,
    messages_tool,
    meta_entries,
    parse_flat_tools,
)
from proxy.chat.planner import NothingToPrune, PlanInput
from proxy.chat.round_reader import meta_call as checked_meta_call
from proxy.chat.turn import Turn, json_bytes
from proxy.http.forwarding import ClientRequest
from selection.catalog import DEFER_LOADING, without_deferral
from selection.history import ToolChoice


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
    Raises UnreadableRequest when ``messages`` is not a list."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise UnreadableRequest("messages is not a list")
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


def _is_custom(entry: Mapping[str, Any]) -> bool:
    return entry.get("type", "custom") == "custom"


class MessagesAdapter:
    """Request and response adapters of the Messages API."""

    api = "messages"

    # --- request ----------------------------------------------------------------
    def continued(self, request: ClientRequest) -> ClientRequest:
        """See :meth:`proxy.apis.adapter.ApiAdapter.continued`: the client's (Messages
        keeps no state on the server)."""
        return request

    def read(self, body: dict[str, Any]) -> PlanInput:
        """See :meth:`proxy.apis.adapter.ApiAdapter.read`."""
        if "tools" not in body:
            raise NothingToPrune()
        native = parse_flat_tools(body["tools"], _is_custom, "input_schema")
        if not len(native):
            raise NothingToPrune()
        search = read_search_tool(body["tools"])
        found = history_found(body.get("messages"), native)
        choice = read_choice(body)
        if search is None and native.deferred:  # the client runs its own search
            choice = replace(choice, offer_meta=False)
        elif search is not None and choice.pinned == search.name:  # forced: offer it
            choice = ToolChoice()
        # llama-server's Messages route keeps none of its own fields (n_cache_reuse): its
        # Anthropic conversion copies only temperature, top_p, top_k, stream and
        # chat_template_kwargs.
        reshaped = holds_search(body.get("messages")) or any(
            isinstance(entry, Mapping) and DEFER_LOADING in entry for entry in native.others
        )
        return PlanInput(
            body=body, native=native, messages=conversation_view(body), choice=choice,
            llama_fields=False, search=search, found=found, reshaped=reshaped,
        )

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """See :meth:`proxy.apis.adapter.ApiAdapter.upstream_body`."""
        assert turn.native is not None
        body = dict(turn.body)
        tools = [
            *(without_deferral(entry) for entry in turn.native.others if not is_search_tool(entry)),
            *turn.block_entries(meta_entries(turn.meta, messages_tool) if with_meta else []),
        ]
        body["tools"] = keep_cache_markers(turn.body["tools"], tools)
        messages = upstream_messages(body["messages"], turn.catalog)
        body["messages"] = [*messages, *turn.extra_messages]
        return json_bytes(body)

    def append_exchange(self, turn: Turn, reply: RoundReply, results: Sequence[str]) -> None:
        """See :meth:`proxy.apis.adapter.ApiAdapter.append_exchange`."""
        answers = [
            {"type": "tool_result", "tool_use_id": call.id, "content": result}
            for call, result in zip(reply.meta, results, strict=True)
        ]
        turn.extra_messages.append({"role": "assistant", "content": reply.items})
        turn.extra_messages.append({"role": "user", "content": answers})
        if any(is_search_call(turn, block) for block in reply.items):
            turn.shown += client_blocks(turn, reply.items)  # a plain response shows them

    # --- response ---------------------------------------------------------------
    def is_meta_block(self, turn: Turn, block: Any) -> bool:
        return (
            isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and turn.is_meta(block.get("name"))
        )

    def split_content(self, turn: Turn, content: list[Any]) -> RoundReply:
        """Meta-calls and client calls of a message's ``content`` blocks. A meta-call's
        block is kept with the ``id`` and ``input`` (a JSON object) it is run with, so
        the re-issued request pairs it with its ``tool_result``."""
        reply = RoundReply()
        for block in content:
            if self.is_meta_block(turn, block):
                call_id = block.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"
                if block["name"] == turn.meta.client_search:  # type: ignore[union-attr]
                    call_id = server_id(call_id)  # the id the client will send back
                call = checked_meta_call(
                    call_id, block["name"], json.dumps(block.get("input", {}), ensure_ascii=False)
                )
                reply.meta.append(call)
                block = {**block, "id": call.id, "input": json.loads(call.arguments)}
            elif isinstance(block, Mapping) and block.get("type") == "tool_use":
                reply.real_calls.append(str(block.get("name")))
            reply.items.append(block)
        return reply

    def read_reply(self, turn: Turn, data: dict[str, Any]) -> RoundReply:
        """See :meth:`proxy.apis.adapter.ApiAdapter.read_reply`."""
        content = data["content"]
        if not isinstance(content, list):
            raise TypeError("content is not a list")
        return self.split_content(turn, content)

    def finish_reply(
        self, turn: Turn, data: dict[str, Any], usage: dict[str, Any] | None, only_meta: bool
    ) -> None:
        """See :meth:`proxy.apis.adapter.ApiAdapter.finish_reply`."""
        data["content"] = [*turn.shown, *client_blocks(turn, data["content"])]
        data["stop_reason"] = stop_reason(data.get("stop_reason"), data["content"])
        if usage is not None:
            data["usage"] = usage

    def relay(self, turn: Turn) -> MessagesRelay:
        return MessagesRelay(self, turn)

