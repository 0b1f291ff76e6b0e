"""A scripted model for ``toolprune eval --live`` tests (``Upstream.behaviour``): it knows
what the user of each labelled case wants, and acts on what the request lets it see, as
a model would.

It finds its case by the request's conversation (the case's ``messages``: what the proxy
appended of its own — the hidden ``load_tools``/``search_tools`` exchanges — left out),
then, per :class:`Want`:

1. ``fail``: answers that HTTP status; ``overflow_above``: a request offering more tools
   than that is refused as llama-server refuses a prompt over its context (400
   ``exceed_context_size_error``);
2. no ``tool``: answers in text;
3. the request offers the tool (or toolprune's ``call_tool`` bridge, with the tool's
   definition delivered in the conversation): calls it;
4. else, at most :data:`MAX_SEARCHES` times: a ``load_tools`` whose description lists the
   tool by name gets its name; a ``search_tools`` gets the words of ``search`` (default:
   the case's last user message);
5. else answers in text.

Answers are chat completions, with llama-server's ``timings`` when ``timings`` is set:
``prompt_n`` = the request's bytes // 4 (as the upstream's default ``usage``), 0.5 ms a
prompt token, 10 ms of generation.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.support.agent_behaviour import Step as AgentStep
from benchmarks.support.agent_behaviour import callable_tool
from benchmarks.support.agent_requests import View, bare_name, is_search, read_request
from benchmarks.support.replies import CHAT_PATH, Raw, Reply
from benchmarks.support.upstream import Recorded

MAX_SEARCHES = 2
TEXT_ANSWER = "I cannot do that with the tools I have."
#: Names of toolprune's meta-tools, compared as :func:`bare_name` does.
META_NAMES = ("loadtools", "searchtools", "calltool")


@dataclass(frozen=True)
class Want:
    """What the user of one case wants the model to do: call ``tool`` (None: answer in
    text), searching with ``search`` when it cannot see it; or fail with ``fail`` (an HTTP
    status); or refuse requests offering more than ``overflow_above`` tools."""

    tool: str | None = None
    search: str | None = None
    fail: int | None = None
    overflow_above: int | None = None


def conversation_key(messages: Any) -> str:
    """The key a case is found by: its messages without toolprune's hidden exchanges."""
    kept, hidden = [], set()
    for message in messages if isinstance(messages, list) else []:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls and all(bare_name(str(c.get("function", {}).get("name"))).endswith(META_NAMES)
                         for c in calls if isinstance(c, dict)):
            hidden.update(str(c.get("id")) for c in calls if isinstance(c, dict))
            continue
        if isinstance(message, dict) and str(message.get("tool_call_id")) in hidden:
            continue
        kept.append(message)
    return json.dumps(kept, sort_keys=True)


def _arguments(schema: Any) -> dict[str, Any]:
    """Placeholder values for a schema's required properties."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    fill = {"string": "x", "number": 1, "integer": 1, "boolean": False, "array": [], "object": {}}
    return {name: fill.get(spec.get("type") if isinstance(spec, dict) else None, "x")
            for name, spec in schema["properties"].items() if name in schema.get("required", [])}


class LabelledModel:
    """``Upstream.behaviour`` for labelled cases (see the module docstring): ``wants`` by
    :func:`conversation_key` of each case's messages."""

    def __init__(self, wants: Mapping[str, Want], *, timings: bool = False) -> None:
        self.wants = dict(wants)
        self.timings = timings

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method != "POST" or not record.path.endswith(CHAT_PATH):
            return None
        body = record.json()
        want = self.wants.get(conversation_key(body.get("messages")))
        if want is None:
            return self._answer(record, text="I do not know this conversation.")
        if want.fail is not None:
            return Raw(want.fail, {"error": {"message": "the model crashed", "type": "server_error"}})
        tools = body.get("tools") or []
        if want.overflow_above is not None and len(tools) > want.overflow_above:
            return Raw(400, {"error": {
                "code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
                "n_ctx": 8192, "message": "the request exceeds the available context size, "
                "try increasing it"}})
        view = read_request(record.path, body)
        assert view is not None
        if want.tool is None:
            return self._answer(record, text=TEXT_ANSWER)
        own = callable_tool(view, AgentStep(tool=want.tool))
        if own is not None:
            arguments = _arguments(own.schema)
            if own.target is not None:  # through the bridge
                arguments = {"name": own.target, "arguments": arguments}
            return self._answer(record, call=(own.name, arguments))
        search = self._search(view, want, body)
        if search is not None:
            return self._answer(record, call=search)
        return self._answer(record, text=TEXT_ANSWER)

    @staticmethod
    def _search(view: View, want: Want, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        if view.searches >= MAX_SEARCHES:
            return None
        assert want.tool is not None
        for tool in (t for t in view.tools if is_search(t)):
            properties = tool.schema.get("properties", {})
            if "names" in properties and want.tool in tool.description:
                return tool.name, {"names": [want.tool]}
            if "query" in properties:
                users = [m for m in body["messages"] if m.get("role") == "user"]
                words = want.search or (str(users[-1].get("content")) if users else want.tool)
                return tool.name, {"query": words}
        return None

    def _answer(self, record: Recorded, *, text: str | None = None,
                call: tuple[str, dict[str, Any]] | None = None) -> Raw:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if call is not None:
            message["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                                      "function": {"name": call[0],
                                                   "arguments": json.dumps(call[1])}}]
        prompt = len(record.body) // 4
        body: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
            "model": "scripted", "created": 0,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 5,
                      "total_tokens": prompt + 5},
        }
        if self.timings:
            body["timings"] = {"prompt_n": prompt, "prompt_ms": prompt * 0.5,
                               "predicted_n": 5, "predicted_ms": 10.0}
        return Raw(200, body)
