"""What a chat-completions request says about the tools it needs, besides its text:
``tool_choice`` (or legacy ``function_call``) and the tools earlier assistant messages
called. Pure functions over the request body, shared by the proxy and the evaluation.

Shapes follow OpenAI's Chat Completions API reference: ``tool_choice`` is ``"none" |
"auto" | "required"``, a named function, or ``{"type": "allowed_tools", "allowed_tools":
{"mode", "tools"}}``; assistant messages carry ``tool_calls`` (or legacy
``function_call``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: ``ToolChoice.forward`` when the request's ``tool_choice`` is forwarded as it is.
KEEP = object()


@dataclass(frozen=True)
class ToolChoice:
    """What ``tool_choice`` (or legacy ``function_call``) means for pruning.

    ``offer_meta``: meta-tools may be offered (not for ``none`` or a named function).
    ``pinned``: the function it names, if any. ``allowed``: the ``allowed_tools`` set,
    if any. ``forward``: the value to send upstream (``KEEP`` keeps the field as is);
    ``allowed_tools`` becomes its plain mode, since the forwarded tools are then all
    allowed ones (and local servers rarely understand ``allowed_tools``).
    """

    offer_meta: bool = True
    pinned: str | None = None
    allowed: frozenset[str] | None = None
    forward: Any = KEEP


def _named(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    function = value.get("function") if value.get("type", "function") == "function" else None
    name = (function if isinstance(function, Mapping) else value).get("name")
    return name if isinstance(name, str) else None


def read_tool_choice(body: Mapping[str, Any]) -> ToolChoice:
    """Interpret ``tool_choice`` (or legacy ``function_call``)."""
    choice = body.get("tool_choice", body.get("function_call"))
    if choice == "none":
        return ToolChoice(offer_meta=False)
    if not isinstance(choice, Mapping):
        return ToolChoice()
    if choice.get("type") == "allowed_tools":
        spec = choice.get("allowed_tools", choice)
        spec = spec if isinstance(spec, Mapping) else {}
        tools = spec.get("tools") if isinstance(spec.get("tools"), list) else []
        allowed = frozenset(name for tool in tools if (name := _named(tool)))
        mode = spec.get("mode") if spec.get("mode") in ("auto", "required") else "auto"
        return ToolChoice(allowed=allowed, forward=mode)
    name = _named(choice)
    return ToolChoice(offer_meta=False, pinned=name) if name else ToolChoice(offer_meta=False)


def called_tools(messages: Sequence[Any]) -> list[str]:
    """Names of every tool an assistant message in the history called, first call first."""
    names: dict[str, None] = {}
    for message in messages:
        names.update(dict.fromkeys(message_calls(message)))
    return list(names)


def message_calls(message: Any) -> list[str]:
    """Names of the tools an assistant ``message`` calls (``tool_calls``, then a legacy
    ``function_call``), in order; none for any other message."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    names = [name for call in (calls if isinstance(calls, list) else [])
             if isinstance(call, Mapping) and (name := _named(call))]
    if name := _named(message.get("function_call")):
        names.append(name)
    return names
