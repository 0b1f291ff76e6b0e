"""Model requests of the three APIs read the way an agent reads them: the tools offered
(functions, Responses ``namespace`` members, Responses ``tool_search``, Anthropic server
search tools; deferred ones apart, and those a client search found in the history added),
the tool results in the history with the name of the call each answers (through
toolprune's ``call_tool`` bridge: the tool it calls), the searches made, and every string of
the request. Used by the scripted agent behaviour
(:mod:`benchmarks.support.agent_behaviour`) and by the tests that look at what reached the
upstream.

Shapes: OpenAI's Chat Completions and Responses API references (``function_call``,
``namespace``, ``tool_search_call``/``tool_search_output``), Anthropic's Messages API
reference (``tool_use``, ``tool_result``, ``tool_reference``, ``server_tool_use``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Names of search or loading tools, compared without ``_``, ``-`` and case; a prefixed
#: copy (``toolprune_search_tools``) counts too.
SEARCH_NAMES = ("loadtools", "searchtools", "toolsearch")
ANTHROPIC_SERVER_SEARCH = re.compile(r"^tool_search_tool_(regex|bm25)")


@dataclass
class Offered:
    """A tool the request offers: ``kind`` is ``function``, ``client_search`` (Responses
    ``tool_search``) or ``server_search`` (an Anthropic server search tool)."""

    kind: str
    name: str
    schema: dict[str, Any]
    description: str = ""
    namespace: str | None = None
    #: For toolprune's bridge: the tool it calls (delivered in the conversation).
    target: str | None = None


@dataclass
class View:
    """What the behaviour reads from one request."""

    tools: list[Offered]
    #: Tools sent with ``defer_loading: true`` (found through a server search).
    deferred: list[Offered]
    #: (called tool name, result text) for every tool result in the history.
    results: list[tuple[str, str]]
    searches: int
    #: Every string of the request, to find the tool's full name in menus and prompts.
    text: str
    model: str
    #: (results before it, its text) for every user message of the history, in order.
    user_messages: list[tuple[int, str]] = field(default_factory=list)

    def results_after(self, prompt: str) -> list[tuple[str, str]]:
        """The results after the last user message holding ``prompt``: that turn's (all
        of them when no user message holds it)."""
        start = next((before for before, text in reversed(self.user_messages)
                      if prompt in text), 0)
        return self.results[start:]

def called_name(name: Any, arguments: Any) -> str:
    """The tool a call calls: its name, or for a call of toolprune's bridge
    (``call_tool``: a tool delivered in the conversation) the ``name`` its arguments give
    (``arguments``: JSON text or an object)."""
    name = str(name)
    if bare_name(name).endswith("calltool"):
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        if isinstance(arguments, dict) and isinstance(arguments.get("name"), str):
            return arguments["name"]
    return name


#: Where a tool's parameter schema is in a definition written as JSON text.
SCHEMA_KEYS = ("parameters", "parametersJsonSchema", "input_schema", "inputSchema")
#: Where a tool definition written as JSON text starts: an object opening with its name.
DEFINITION_START = re.compile(r'\{\s*"name"\s*:\s*"')

def delivered_definition(view: View, is_tool: Callable[[str], bool]) -> tuple[str, dict[str, Any]] | None:
    """The name and parameters of a tool (the one ``is_tool`` takes its name for) as a
    result of the history delivered them: a JSON object in a string of the request (a result's text, however the result
    wraps it) that opens with the tool's ``name`` and has its parameter schema under one
    of :data:`SCHEMA_KEYS` (``parameters``; Qwen Code writes ``parametersJsonSchema``)."""
    decoder = json.JSONDecoder()
    for match in DEFINITION_START.finditer(view.text):
        try:
            found, _ = decoder.raw_decode(view.text, match.start())
        except ValueError:
            continue
        name = found.get("name") if isinstance(found, dict) else None
        schema = next((found[key] for key in SCHEMA_KEYS if key in found), None) if isinstance(
            found, dict) else None
        if isinstance(name, str) and is_tool(name) and isinstance(schema, dict):
            return name, schema
    return None


CHAT_PATH = "/chat/completions"
MESSAGES_PATH = "/messages"
RESPONSES_PATH = "/responses"


def bare_name(name: str) -> str:
    return re.sub(r"[_\-]", "", name).lower()


def is_search(tool: Offered) -> bool:
    """Whether ``tool`` is a search or loading tool (see :data:`SEARCH_NAMES`)."""
    return tool.kind != "function" or any(bare_name(tool.name).endswith(n) for n in SEARCH_NAMES)


def read_request(path: str, body: Any) -> View | None:
    """What the behaviour reads from a model request to ``path`` (None: not one of the
    three APIs, or not a JSON object)."""
    if not isinstance(body, dict):
        return None
    for suffix, read in ((CHAT_PATH, _read_chat), (MESSAGES_PATH, _read_messages),
                         (RESPONSES_PATH, _read_responses)):
        if path.endswith(suffix):
            return read(body)
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _result_text(content: Any) -> str:
    """A tool result's text: strings joined; JSON text decoded first (Codex wraps MCP
    results as a JSON array of content blocks)."""
    if isinstance(content, str):
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        if isinstance(decoded, (dict, list)):
            return _result_text(decoded)
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        return "\n".join(_result_text(v) for v in content.values() if isinstance(v, (dict, list, str)))
    if isinstance(content, list):
        return "\n".join(text for item in content if (text := _result_text(item)))
    return ""


def _function(name: Any, schema: Any, description: Any = "", namespace: str | None = None) -> Offered | None:
    if not isinstance(name, str):
        return None
    return Offered("function", name, schema if isinstance(schema, dict) else {},
                   description if isinstance(description, str) else "", namespace)


def _read_chat(body: dict[str, Any]) -> View:
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and (offered := _function(
                function.get("name"), function.get("parameters"), function.get("description"))):
            tools.append(offered)
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    users: list[tuple[int, str]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                function = call["function"]
                names[str(call.get("id"))] = called_name(function.get("name"),
                                                         function.get("arguments"))
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), "")
            results.append((name, _result_text(message.get("content"))))
        elif message.get("role") == "user":
            users.append((len(results), "\n".join(_strings(message.get("content")))))
    return View(tools, [], results, _count_searches(names.values()),
                "\n".join(_strings(body)), str(body.get("model", "")), users)


def _count_searches(called: Any) -> int:
    return sum(1 for name in called if is_search(Offered("function", name, {})))


def _read_messages(body: dict[str, Any]) -> View:
    tools: list[Offered] = []
    deferred: list[Offered] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if ANTHROPIC_SERVER_SEARCH.match(str(tool.get("type", ""))):
            tools.append(Offered("server_search", str(tool.get("name")), {}))
        elif offered := _function(tool.get("name"), tool.get("input_schema"),
                                  tool.get("description")):
            (deferred if tool.get("defer_loading") is True else tools).append(offered)
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    searches = 0
    referenced: set[str] = set()
    users: list[tuple[int, str]] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and message.get("role") == "user":
            users.append((len(results), _user_text(content)))
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = called_name(block.get("name"), block.get("input"))
            elif block.get("type") == "server_tool_use":
                searches += 1
            elif block.get("type") == "tool_result":
                name = names.get(str(block.get("tool_use_id")), "")
                results.append((name, _result_text(block.get("content"))))
                referenced.update(_references(block.get("content")))
    # A deferred tool named by a tool_reference in the history is callable (Anthropic's
    # tool search: "tool_reference" blocks expand to the tool's definition).
    tools += [tool for tool in deferred if tool.name in referenced]
    return View(tools, deferred, results, searches + _count_searches(names.values()),
                "\n".join(_strings(body)), str(body.get("model", "")), users)


def _user_text(content: Any) -> str:
    """A Messages user message's own text (its text blocks, not its tool results)."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "\n".join(str(block.get("text")) for block in blocks
                     if isinstance(block, dict) and block.get("type") == "text")


def _references(content: Any) -> set[str]:
    blocks = content if isinstance(content, list) else []
    return {str(block.get("tool_name")) for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_reference"}


def _read_responses(body: dict[str, Any]) -> View:
    tools, deferred = _responses_tools(body.get("tools"))
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    users: list[tuple[int, str]] = []
    searches = 0
    items = body.get("input") if isinstance(body.get("input"), list) else []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if item.get("role") == "user":
            users.append((len(results), "\n".join(_strings(item.get("content")))))
        if kind in ("function_call", "custom_tool_call"):
            names[str(item.get("call_id"))] = called_name(item.get("name"), item.get("arguments"))
        elif kind == "tool_search_call":
            searches += 1
        elif kind == "tool_search_output":
            # What a client search found is callable from the next request on.
            found, found_deferred = _responses_tools(item.get("tools"))
            tools += found + found_deferred
        elif kind in ("function_call_output", "custom_tool_call_output"):
            name = names.get(str(item.get("call_id")), "")
            results.append((name, _result_text(item.get("output"))))
    return View(tools, deferred, results, searches + _count_searches(names.values()),
                "\n".join(_strings(body)), str(body.get("model", "")), users)


def _responses_tools(declared: Any) -> tuple[list[Offered], list[Offered]]:
    """Responses ``tools`` (functions, namespace members, ``tool_search``): those offered
    and those deferred (``defer_loading: true``)."""
    tools: list[Offered] = []
    deferred: list[Offered] = []
    for tool in declared if isinstance(declared, list) else []:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind == "function":
            if offered := _function(tool.get("name"), tool.get("parameters"), tool.get("description")):
                (deferred if tool.get("defer_loading") is True else tools).append(offered)
        elif kind == "namespace":
            for member in tool.get("tools") or []:
                if isinstance(member, dict) and (offered := _function(
                        member.get("name"), member.get("parameters"), member.get("description"),
                        str(tool.get("name")))):
                    (deferred if member.get("defer_loading") is True else tools).append(offered)
        elif kind == "tool_search":
            tools.append(Offered("client_search", "tool_search", tool.get("parameters") or {},
                                 str(tool.get("description", ""))))
    return tools, deferred
