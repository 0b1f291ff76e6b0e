"""One acting chat-completions request: its conversation id, its system-prompt tool block,
and how its body is rewritten (forwarded tools, text block, meta exchange appended).

Field names and shapes follow OpenAI's Chat Completions API reference: ``tools`` /
legacy ``functions``, ``tool_choice``, legacy ``function_call``, assistant ``tool_calls``
and ``tool`` messages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from selection.catalog import Catalog, canonical_json, fingerprint
from selection.history import KEEP, ToolChoice
from selection.meta_tools import MetaTools
from selection.query import content_text
from selection.selector import Selection
from selection.text_path import TextFormat, ToolBlock, detect


def conversation_id(
    header_value: bytes | None, body: Mapping[str, Any], catalog: Catalog
) -> str:
    """The ``X-Conversation-Id`` header; else a hash of (model, catalogue fingerprint,
    first system message, first user message), stable across the conversation's turns."""
    if header_value:
        return header_value.decode("latin-1")
    messages = [m for m in body.get("messages", []) if isinstance(m, Mapping)]

    def first(role: str) -> str:
        return next((content_text(m.get("content")) for m in messages if m.get("role") == role), "")

    key = [body.get("model"), catalog.fingerprint, first("system"), first("user")]
    return "h:" + fingerprint(key)[:32]


def log_id(conversation: str) -> str:
    """What logs show of a conversation id: a short hash, never the id itself."""
    return hashlib.sha256(conversation.encode()).hexdigest()[:12]


@dataclass
class MetaCall:
    """A meta-tool call the model made: ``id``, ``name``, ``arguments`` (JSON text)."""

    id: str
    name: str
    arguments: str


def arguments_text(value: Any) -> str:
    """Tool-call ``arguments`` as JSON text: the API sends a string; a server that sends
    the object itself gets it serialised."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)


@dataclass(frozen=True)
class TextPlan:
    """A tool block found in a system (or developer) message's text.

    ``message`` is the message's index in ``messages``; ``part`` the index of the text
    part when the content is a list of parts, else None.
    """

    message: int
    part: int | None
    text: str
    block: ToolBlock

    def rewrite_messages(self, messages: list[Any], keep: set[str]) -> list[Any]:
        """``messages`` with the block's dropped entries replaced by one line."""
        text = self.block.rewrite(self.text, keep)
        message = dict(messages[self.message])
        if self.part is None:
            message["content"] = text
        else:
            parts = list(message["content"])
            parts[self.part] = {**parts[self.part], "text": text}
            message["content"] = parts
        return [*messages[: self.message], message, *messages[self.message + 1 :]]


def find_text_plan(
    messages: Sequence[Any], formats: Sequence[TextFormat], min_entries: int
) -> TextPlan | None:
    """The first tool block (with at least ``min_entries`` entries) in a system or
    developer message, or None."""
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            continue
        content = message.get("content")
        texts: list[tuple[int | None, str]] = []
        if isinstance(content, str):
            texts.append((None, content))
        elif isinstance(content, list):
            texts.extend(
                (i, part["text"])
                for i, part in enumerate(content)
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
        for part, text in texts:
            block = detect(text, formats, min_entries)
            if block is not None:
                return TextPlan(index, part, text, block)
    return None


@dataclass
class Turn:
    """The acting request being served, possibly over several upstream rounds.

    ``catalog`` is what selection chose from: the native ``tools`` (``native``) and the
    entries of a text block (``text``), or either alone.
    """

    body: dict[str, Any]
    catalog: Catalog
    native: Catalog | None
    text: TextPlan | None
    conversation: str
    selection: Selection
    scores: np.ndarray | None
    pinned: list[str]
    meta: MetaTools | None
    tool_choice: ToolChoice
    offered: int
    top_k: int | None = None
    rounds: int = 0
    extra_messages: list[dict[str, Any]] = field(default_factory=list)
    meta_events: list[dict[str, Any]] = field(default_factory=list)
    #: Names of the real tool calls in the response the client got.
    response_calls: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        """Which prompt parts were pruned: ``native``, ``text`` or ``both``."""
        if self.native is not None and self.text is not None:
            return "both"
        return "native" if self.native is not None else "text"

    def is_meta(self, name: str | None) -> bool:
        return self.meta is not None and name in self.meta.names

    def forwarded_entries(self, with_meta: bool) -> list[Any]:
        """The forwarded ``tools`` (or ``functions``) array: other-typed entries, CORE in
        catalogue order, loaded tools in admission order, then the meta-tools (last: their
        tier line changes per turn)."""
        if self.native is None:
            return []
        definitions = {tool.name: tool.definition for tool in self.native.tools}
        selected = [t for t in self.selection.tools if t.name in definitions]
        core = [definitions[t.name] for t in selected if t.reason == "core"]
        rest = [definitions[t.name] for t in selected if t.reason != "core"]
        meta = list(self.meta.definitions) if with_meta and self.meta else []
        return [*self.native.others, *core, *rest, *meta]

    def schema_bytes_saved(self) -> int:
        """Bytes of tool definitions (JSON, or block text) not forwarded, less the
        meta-tools'."""
        forwarded = {tool.name for tool in self.selection.tools}
        dropped = sum(t.size_bytes for t in self.catalog.tools if t.name not in forwarded)
        meta = self.meta.definitions if self.meta else ()
        return dropped - sum(len(canonical_json(definition)) for definition in meta)

    def upstream_body(self, with_meta: bool) -> bytes:
        """The request body for the next upstream round (JSON, UTF-8)."""
        body = dict(self.body)
        if self.native is not None:
            body["functions" if self.native.legacy else "tools"] = self.forwarded_entries(with_meta)
        if self.text is not None:
            keep = {tool.name for tool in self.selection.tools}
            body["messages"] = self.text.rewrite_messages(body["messages"], keep)
        if self.extra_messages:
            body["messages"] = [*body.get("messages", []), *self.extra_messages]
        if self.tool_choice.forward is not KEEP:
            body["tool_choice"] = self.tool_choice.forward
        return json_bytes(body)

    def offer_meta_now(self, max_rounds: int) -> bool:
        """Meta-tools are offered until ``max_rounds`` re-issues have been made."""
        return self.meta is not None and self.rounds < max_rounds

    def append_meta_exchange(self, content: str | None, calls: Sequence[MetaCall], results: Sequence[str]) -> None:
        """Append the assistant's meta-calls and one answer per call, as the model will
        see them on the re-issued request."""
        if self.native is not None and self.native.legacy:
            call = calls[0]
            self.extra_messages.append(
                {
                    "role": "assistant",
                    "content": content,
                    "function_call": {"name": call.name, "arguments": call.arguments},
                }
            )
            self.extra_messages.append({"role": "function", "name": call.name, "content": results[0]})
            return
        self.extra_messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in calls
                ],
            }
        )
        for call, result in zip(calls, results, strict=True):
            self.extra_messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def json_bytes(value: Any) -> bytes:
    """``value`` as compact-enough UTF-8 JSON; ASCII-escaped when it holds a lone surrogate
    (valid in JSON text, not encodable as UTF-8)."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """Sum OpenAI ``usage`` objects (nested ``*_details`` counts too)."""
    if not isinstance(usage, Mapping):
        return total
    if total is None:
        return json.loads(json.dumps(usage))
    for key, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and isinstance(total.get(key), int | float):
            total[key] += value
        elif isinstance(value, Mapping) and isinstance(total.get(key), Mapping):
            total[key] = add_usage(dict(total[key]), value)
        elif key not in total:
            total[key] = value
    return total
