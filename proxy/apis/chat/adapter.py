"""The Chat Completions API (``POST /v1/chat/completions``): request adapter.

Follows OpenAI's Chat Completions API reference: ``tools`` / legacy ``functions``,
``tool_choice``, legacy ``function_call``, assistant ``tool_calls`` and ``tool``
messages. The catalogue is the native tools (parsed once per distinct ``tools`` bytes,
:class:`selection.catalog.cache.CatalogCache`) and a tool block in a system message
(the text path, :mod:`selection.catalog.text_plan`, found by the front door). A body passes through when it is not a
JSON object or asks for ``n`` > 1 choices. A meta-call is an assistant ``tool_calls``
entry (or a legacy ``function_call``) naming a meta-tool; the re-issued request appends
the assistant message with the round's meta-calls and one ``tool`` message per call.
The client's view is :mod:`proxy.apis.chat.view`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.apis.chat.client import error_event
from proxy.apis.chat.history import upstream_history
from proxy.apis.chat.view import ChatView
from proxy.http.forwarding import ClientRequest
from proxy.http.upstream import UpstreamResponse
from proxy.turn.adapter import ClientOut, MalformedRequest, Reply, upstream_error_object
from proxy.turn.turn import MetaCall, Turn
from selection.types import (
    KEEP,
    CatalogCache,
    DecodedBody,
    RawHistory,
    TurnInput,
    encode_body,
    read_tool_choice,
)

#: Bodies larger than this are decoded in a worker thread, so the event loop keeps
#: relaying other streams meanwhile (bytes).
DECODE_IN_THREAD_BYTES = 256 * 1024
#: Request fields that only make sense with a tools (or functions) array.
_NEEDS_TOOLS = ("tool_choice", "parallel_tool_calls", "function_call")


async def read_chat(body: dict[str, Any], catalogs: CatalogCache) -> TurnInput:
    """What the planner reads of a Chat Completions ``body``: its native tools (``tools``,
    or legacy ``functions``), and that a tool block in a system message may be pruned too
    (the text path). ``tools`` or ``functions`` null is as absent. Raises
    MalformedRequest (``messages`` is not a list: a body the API refuses), CatalogError."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise MalformedRequest("messages is not a list")
    native = None
    if body.get("tools") is not None:
        native = catalogs.catalog(body["tools"], legacy=False)
    elif body.get("functions") is not None:
        native = catalogs.catalog(body["functions"], legacy=True)
    raw = body.raw.get("messages") if isinstance(body, DecodedBody) else None
    return TurnInput(body, native, messages, read_tool_choice(body), text_path=True,
                     bridges=True, raw_messages=RawHistory.of(raw) if raw is not None else None)


@dataclass
class ChatRequest:
    """One Chat Completions request as read (see :class:`proxy.turn.adapter.ApiRequest`)."""

    input: TurnInput
    #: The meta exchanges appended for re-issued rounds (assistant and ``tool`` messages).
    appended: list[dict[str, Any]] = field(default_factory=list)

    def forwarded_entries(self, turn: Turn, with_meta: bool) -> list[Any]:
        """The forwarded ``tools`` (or ``functions``) array: other-typed entries, then the
        block (:meth:`Turn.block_entries`)."""
        if turn.plan.native is None:
            return []
        meta = list(turn.plan.meta.definitions) if with_meta and turn.plan.meta else []
        return [*turn.plan.native.others, *turn.plan.block_entries(meta)]

    def upstream_body(self, turn: Turn, with_meta: bool) -> bytes:
        """See :meth:`proxy.turn.adapter.ApiRequest.upstream_body`. An empty tools array
        is never sent (vLLM and OpenAI answer 400): with no tool forwarded, the fields
        that need one (``tool_choice``, ``parallel_tool_calls``, legacy
        ``function_call``) go too. The messages are the plan's
        (:meth:`selection.types.Plan.upstream_messages`: a text block keeps only the
        selected entries, the client's own search results no definition the request
        forwards), then written as the upstream saw them where tools are delivered in the
        conversation (:func:`proxy.apis.chat.history.upstream_history`)."""
        body = dict(turn.body)
        if turn.plan.native is not None:
            key = "functions" if turn.plan.native.legacy else "tools"
            body[key] = self.forwarded_entries(turn, with_meta)
            if not body[key]:
                for field_name in (key, *_NEEDS_TOOLS):
                    body.pop(field_name, None)
        body["messages"] = upstream_history(turn, turn.plan.upstream_messages(body["messages"]))
        if self.appended:
            body["messages"] = [*body.get("messages", []), *self.appended]
        if turn.tool_choice.forward is not KEEP and ("tools" in body or "functions" in body):
            body["tool_choice"] = turn.tool_choice.forward
        turn.add_llama_fields(body)
        return encode_body(body, turn.body)

    def meta_reply(self, turn: Turn, call: MetaCall) -> Reply:
        """See :meth:`proxy.turn.adapter.ApiRequest.meta_reply`: an assistant message with
        no content, the call its ``tool_calls``."""
        return Reply(meta=[call], items=[{"role": "assistant", "content": None}])

    def history_length(self) -> int:
        """See :meth:`proxy.turn.adapter.ApiRequest.history_length`: the messages."""
        return len(self.input.messages)

    def append_exchange(self, turn: Turn, reply: Reply, results: Sequence[str]) -> list[Any]:
        """See :meth:`proxy.turn.adapter.ApiRequest.append_exchange`: the assistant
        message (``reply.items``: its content as shown) with the meta-calls as
        ``tool_calls``, then one ``tool`` message per call (legacy ``functions``: one
        ``function_call`` and its ``function`` message)."""
        (message,) = reply.items
        calls = reply.meta
        before = len(self.appended)
        if turn.plan.native is not None and turn.plan.native.legacy:
            call = calls[0]
            self.appended.append({
                **message, "function_call": {"name": call.name, "arguments": call.arguments},
            })
            self.appended.append({"role": "function", "name": call.name, "content": results[0]})
            return self.appended[before:]
        self.appended.append({
            **message,
            "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in calls
            ],
        })
        for call, result in zip(calls, results, strict=True):
            self.appended.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return self.appended[before:]

    def view(
        self, turn: Turn, out: ClientOut, first: UpstreamResponse, *, stream: bool
    ) -> ChatView:
        """The client gets the shape it asked for, whatever the upstream answers."""
        return ChatView(turn, out, first, stream=stream)


class ChatApi:
    """The Chat Completions adapter (see the module docstring)."""

    api = "chat_completions"

    def __init__(self, catalogs: CatalogCache) -> None:
        #: Request bodies are decoded through it: a catalogue seen before is not re-parsed.
        self.catalogs = catalogs

    def continued(self, request: ClientRequest) -> ClientRequest:
        """The client's (Chat Completions keeps no state on the server)."""
        return request

    async def decode(self, raw: bytes) -> dict[str, Any] | None:
        """The body as a JSON object (None when it asks for ``n`` > 1 choices: passed
        through), large ones decoded off the loop. Raises MalformedRequest (not a JSON
        object)."""
        if len(raw) > DECODE_IN_THREAD_BYTES:
            body = await asyncio.to_thread(self.catalogs.decode_body, raw)
        else:
            body = self.catalogs.decode_body(raw)
        if body is None:
            raise MalformedRequest("the body is not a JSON object")
        return body if body.get("n") in (None, 1) else None

    async def read(self, body: dict[str, Any]) -> ChatRequest:
        """See :func:`read_chat`."""
        return ChatRequest(await read_chat(body, self.catalogs))

    def stream_error(self, status: int, body: bytes) -> bytes:
        """An error answer as the ``error`` event a chat stream ends with."""
        return error_event(upstream_error_object(status, body))
