"""Prompt tokens of a model request counted from its body alone, without a model: what
the request gives the model to read, in any of the three APIs, counted the same way for a
client's request sent directly and for what the proxy forwards.

:func:`prompt_text` is the request's readable text: its instructions (``system``,
``instructions``), each tool definition as compact JSON of its name, description and
parameter schema (a Responses ``namespace``: its name and description, then each member
under its flattened name; a Responses ``tool_search`` entry under the name its calls have,
``tool_search``), and each
message or input item: its texts, a call's arguments as JSON (an object, or the JSON text
the client wrote), the definitions a search result carries (a Responses
``tool_search_output``'s ``tools``, counted as tool definitions), and the name of the
search a ``tool_search_call`` calls. Ids, types, roles, cache markers and other
bookkeeping are left out. :func:`count_tokens` counts its words and
punctuation marks (``\\w+`` runs and single other characters): no tokenizer's exact count,
but one that moves with every byte of text that is added or removed, for both sides alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from benchmarks.support.plain_responses import flat_request

_TOKENS = re.compile(r"\w+|[^\w\s]")
#: Keys whose values are bookkeeping, not read by the model.
_SKIPPED = frozenset({"id", "call_id", "tool_call_id", "tool_use_id", "type", "role",
                      "cache_control", "status", "signature", "defer_loading", "strict",
                      "index", "annotations", "logprobs", "execution"})
#: The Responses API's search tool type, and the name its calls have.
SEARCH_TYPE = "tool_search"
#: Keys of a tool definition the model reads.
_TOOL_KEYS = ("name", "description", "parameters", "input_schema")


def count_tokens(text: str) -> int:
    """Words and punctuation marks of ``text``."""
    return len(_TOKENS.findall(text))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_text(tool: Any) -> str:
    if not isinstance(tool, dict):
        return _compact(tool)
    definition = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    if tool.get("type") == SEARCH_TYPE:
        definition = {"name": SEARCH_TYPE, **definition}
    return _compact({key: definition[key] for key in _TOOL_KEYS if key in definition})


def _tools_text(tools: Any) -> Iterator[str]:
    for tool in tools if isinstance(tools, list) else [tools]:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            yield _tool_text({key: tool[key] for key in ("name", "description") if key in tool})
            yield from _tools_text(flat_request({"tools": [tool]})["tools"])
        else:
            yield _tool_text(tool)


def _texts(value: Any) -> Iterator[str]:
    """A message's or item's text: strings as they are, objects without text as JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        if value.get("type") == f"{SEARCH_TYPE}_call":
            yield SEARCH_TYPE
        for key, item in value.items():
            if key in _SKIPPED:
                continue
            if key == "tools":  # a search result's definitions
                yield from _tools_text(item)
            elif key in ("input", "arguments") and not isinstance(item, str):
                yield _compact(item)  # a call's input or arguments as an object
            else:
                yield from _texts(item)


def prompt_text(path: str, body: dict[str, Any]) -> str:
    """The readable text of a model request to ``path`` (see the module docstring)."""
    parts = list(_texts(body.get("system"))) + list(_texts(body.get("instructions")))
    parts += list(_tools_text(body.get("tools") or []))
    conversation = body.get("messages") if "messages" in body else body.get("input")
    parts += list(_texts(conversation))
    return "\n".join(parts)


def body_tokens(path: str, body: dict[str, Any]) -> int:
    """:func:`count_tokens` of :func:`prompt_text`."""
    return count_tokens(prompt_text(path, body))
