"""A scripted model that acts like an agent, for the scripted upstream
(``Upstream.behaviour``): it calls the tools a task needs, one after another, or searches
for them, then answers.

A :class:`Task` is one or more user turns (:class:`UserTurn`: its prompt, the tools it
needs in order, each a :class:`Step`); the default is one turn, "List the open pull requests
in octo/widgets", needing ``list_pull_requests``. :data:`SESSION` is the longer task of
``benchmarks.agent_sessions``: two user turns, four tools. :class:`AgentBehaviour` reads
each request on ``/chat/completions``, ``/messages`` and ``/responses``, takes the last
user turn whose prompt the request carries (the first when none) and its first step whose
tool has no result in the history yet, and answers in that API's shape, streamed when the
request streams:

1. Every step of the turn has its result in the history: answer with text quoting them.
2. The request offers no tool (a title, a summary, a side request): a short answer.
3. The request offers the step's tool, under whatever name the client gives it
   (``list_pull_requests``, ``mcp__github__list_pull_requests``,
   ``github_list_pull_requests``, a member of a Responses ``namespace`` …): call it with
   arguments that fit its schema.
   Else, when it offers toolprune's bridge (``call_tool``) and a result in the history
   delivered the tool's definition, call the bridge with the tool's name and arguments.
4. Else it offers a search or loading tool (toolprune's ``load_tools``/``search_tools``,
   Claude Code's ``ToolSearch``, Qwen Code's ``tool_search``, a Responses
   ``{"type": "tool_search"}``, Anthropic's server search tools) and the history holds
   fewer than ``Task.max_searches`` searches per step so far (this one included): call
   it. The query is ``Step.query`` when the step sets one, else ``select:<name>`` where
   the tool's description offers that form and the request names the tool, the exact
   name where the request names it, else the step's keywords (``load_tools`` gets the
   name from its enum). An Anthropic server search is answered in the same message,
   as Anthropic's API does: ``server_tool_use``, its ``tool_search_tool_result`` with a
   ``tool_reference``, then the call.
5. Else: an answer saying no tool fits (what a model says when the tool is out of reach).

Shapes: OpenAI's Chat Completions and Responses API references (``function_call``,
``namespace``, ``tool_search_call``), Anthropic's Messages API reference (``tool_use``,
``tool_result``, ``server_tool_use``, ``tool_search_tool_result``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from benchmarks.support.agent_requests import (
    CHAT_PATH,
    MESSAGES_PATH,
    RESPONSES_PATH,
    Offered,
    View,
    bare_name,
    delivered_definition,
    is_search,
    read_request,
)
from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.upstream import SSE, Chat, Recorded, Reply, chat_events

NO_TOOL_ANSWER = "I have no tool to list pull requests."
SIDE_ANSWER = "Open pull requests in octo/widgets"


@dataclass(frozen=True)
class Step:
    """One tool call of a user turn: ``tool`` (matched as a name suffix) with ``arguments``
    (those its schema has), found by ``keywords`` when it is not offered. ``query``: the
    query of every search for it when set (a model that knows the tool searches by its own
    name, ``search_code``, whatever the client calls it); None: as the module docstring
    says."""

    tool: str = "list_pull_requests"
    arguments: dict[str, Any] = field(
        default_factory=lambda: {"owner": "octo", "repo": "widgets", "state": "open"})
    keywords: str = "list pull requests"
    query: str | None = None


@dataclass(frozen=True)
class UserTurn:
    """A user's ``prompt`` and the ``steps`` it needs, in order; the final answer starts
    with ``answer_prefix``."""

    prompt: str = "List the open pull requests in octo/widgets"
    steps: tuple[Step, ...] = (Step(),)
    answer_prefix: str = "The open pull requests in octo/widgets:"


@dataclass(frozen=True)
class Task:
    """What the scripted agent must do: each of ``turns``; at most ``max_searches``
    searches per step; a turn's final answer quotes each of its results whole, or its
    first ``quote_lines`` lines."""

    turns: tuple[UserTurn, ...] = (UserTurn(),)
    max_searches: int = 2
    quote_lines: int | None = None

    def steps(self) -> list[Step]:
        """Every step of every turn, in order."""
        return [step for turn in self.turns for step in turn.steps]

    def turn_in(self, text: str) -> int:
        """The last user turn (0-based) whose prompt ``text`` holds (0: none does)."""
        return max((index for index, turn in enumerate(self.turns) if turn.prompt in text),
                   default=0)


#: The multi-turn session of ``benchmarks.agent_sessions``: the second turn is a follow-up
#: the user types after the first answer, and needs tools the first did not.
SESSION = Task(turns=(
    UserTurn(
        "List the open pull requests in octo/widgets, then show the files changed in "
        "pull request 4711.",
        (Step(),
         Step("pull_request_read", {"method": "get_files", "owner": "octo", "repo": "widgets",
                                    "pullNumber": 4711}, "pull request files")),
        "The open pull requests in octo/widgets, and the files of #4711:"),
    UserTurn(
        "Check whether octo/widgets already has an issue about the sprocket tooltip "
        "overflow; if not, open one.",
        (Step("search_issues", {"query": "repo:octo/widgets sprocket tooltip overflow"},
              "search issues"),
         Step("create_issue", {"owner": "octo", "repo": "widgets",
                               "title": "Sprocket tooltip overflows on narrow screens"},
              "create issue")),
        "No issue about it existed, so I opened one:"),
))


KEEP_ALIVE = b": keep-alive\n\n"


class SlowPrefill:
    """Wraps a behaviour: every streamed answer to a request that offers tools starts
    after ``delay_s`` seconds, with an SSE keep-alive comment every ``interval_s`` meanwhile
    (what llama-server sends during a long prefill); the response head goes at once."""

    def __init__(self, inner: AgentBehaviour, delay_s: float, interval_s: float = 1.0) -> None:
        self.inner, self.delay_s, self.interval_s = inner, delay_s, interval_s

    def __call__(self, record: Recorded) -> Reply | None:
        reply = self.inner(record)
        try:
            request = json.loads(record.body)
        except ValueError:
            return reply
        if reply is None or not isinstance(request, dict) or request.get("stream") is not True \
                or not request.get("tools"):
            return reply
        if isinstance(reply, Chat):
            events = chat_events(reply, request)
        elif isinstance(reply, (Responses, Message)):
            rendered = reply.render(request, len(record.body))
            if not isinstance(rendered, list):
                return reply
            events = rendered
        else:
            return reply
        comments = [KEEP_ALIVE] * math.ceil(self.delay_s / self.interval_s)
        return SSE(comments + events, comment_pause_s=self.interval_s)


class AgentBehaviour:
    """``Upstream.behaviour`` for a :class:`Task` (see the module docstring)."""

    def __init__(self, task: Task | None = None) -> None:
        self.task = task or Task()

    def __call__(self, record: Recorded) -> Reply | None:
        if record.method != "POST":
            return None
        try:
            body = json.loads(record.body)
        except ValueError:
            return None
        view = read_request(record.path, body)
        if view is None:
            return None
        render = next(render for suffix, render in _RENDERERS if record.path.endswith(suffix))
        return render(self._act(view), view)

    def _act(self, view: View) -> Action:
        task = self.task
        turn = task.turns[task.turn_in(view.text)]
        results = _step_results(turn, view.results_after(turn.prompt))
        pending = next((step for step, found in zip(turn.steps, results, strict=True)
                        if found is None), None)
        if pending is None:
            quoted = "\n".join(_quote(found, task.quote_lines) for found in results)
            return Action(text=f"{turn.answer_prefix}\n{quoted}")
        if not view.tools:
            return Action(text=SIDE_ANSWER)
        callable_now = callable_tool(view, pending)
        if callable_now is not None:
            arguments = _fit(callable_now.schema, pending.arguments, "")
            if callable_now.target is not None:  # through the bridge
                arguments = {"name": callable_now.target, "arguments": arguments}
            return Action(call=callable_now, arguments=arguments)
        searches = [tool for tool in view.tools if is_search(tool)]
        allowed = task.max_searches * (task.steps().index(pending) + 1)
        if searches and view.searches < allowed:
            search = _preferred(searches)
            action = Action(call=search, arguments=self._search_arguments(search, view, pending))
            if search.kind == "server_search":  # the server runs it and the model goes on
                action.found = next((tool for tool in view.deferred
                                     if _is_tool(tool.name, pending.tool)), None)
                if action.found is not None:
                    action.found_arguments = _fit(action.found.schema, pending.arguments, "")
            return action
        return Action(text=NO_TOOL_ANSWER)

    def _search_arguments(self, search: Offered, view: View, step: Step) -> dict[str, Any]:
        names = _full_names(view.text, step.tool)
        if step.query is not None:
            query = step.query
        elif names and "select:" in search.description:
            query = f"select:{names[0]}"
        elif names:
            query = names[0]
        else:
            query = step.keywords
        return _fit(search.schema, {"query": query}, query, enum_pick=step.tool)


@dataclass
class Action:
    """Answer with ``text``, or call ``call`` with ``arguments``; after a server search,
    the deferred tool it ``found`` is called with ``found_arguments``."""

    text: str | None = None
    call: Offered | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    found: Offered | None = None
    found_arguments: dict[str, Any] = field(default_factory=dict)


def callable_tool(view: View, step: Step) -> Offered | None:
    """The tool of ``view`` through which the model calls ``step``'s tool now, with the
    name it is called by (the ``name`` of the :class:`Offered`): a function the request
    offers under the step's name, whatever prefix the client gives it; else, when the
    request offers toolprune's bridge (``call_tool``) and a result in the history delivered
    the tool's definition, the bridge (``target``: the tool's name as delivered, ``schema``:
    its parameters); None when the step cannot be called yet (a search or an answer
    follows)."""
    own = next((tool for tool in view.tools if tool.kind == "function"
                and _is_tool(tool.name, step.tool)), None)
    bridge = next((tool for tool in view.tools if tool.kind == "function"
                   and bare_name(tool.name).endswith("calltool")), None)
    if own is not None or bridge is None:
        return own
    delivered = delivered_definition(view, lambda name: _is_tool(name, step.tool))
    if delivered is None:
        return None
    target, schema = delivered
    return Offered("function", bridge.name, schema, bridge.description, target=target)


def _step_results(turn: UserTurn, results: list[tuple[str, str]]) -> list[str | None]:
    """Each step's result among the turn's ``results`` (None: not called yet); a tool
    the turn calls twice gets its results in order."""
    found: list[str | None] = []
    for index, step in enumerate(turn.steps):
        earlier = sum(1 for other in turn.steps[:index] if other.tool == step.tool)
        texts = [text for name, text in results if _is_tool(name, step.tool)]
        found.append(texts[earlier] if len(texts) > earlier else None)
    return found


#: The lines Codex puts before an MCP tool's output ("Wall time: 0.0089 seconds",
#: "Output:"): not the tool's, so not what a summary quotes.
CLIENT_WRAPPER = re.compile(r"^(Wall time: [0-9.]+ seconds|Output:)$")


def _quote(result: str, lines: int | None) -> str:
    """``result`` whole, or its first ``lines`` lines after :data:`CLIENT_WRAPPER`'s."""
    if lines is None:
        return result
    own = list(itertools.dropwhile(CLIENT_WRAPPER.match, result.splitlines()))
    return "\n".join(own[:lines])


def _is_tool(name: str, tool: str) -> bool:
    return name == tool or name.endswith(tool) and not name[: -len(tool)][-1:].isalnum()


def _preferred(searches: list[Offered]) -> Offered:
    """The client's own search first (it knows the client's deferred tools), then the
    proxy's meta-tools, in the order offered."""
    own = [tool for tool in searches if bare_name(tool.name) not in ("loadtools", "searchtools")
           and not bare_name(tool.name).startswith("toolprune")]
    return (own or searches)[0]


def _full_names(text: str, tool: str) -> list[str]:
    """Names in ``text`` that end with ``tool`` (``mcp__github__list_pull_requests`` …),
    longest first."""
    found = set(re.findall(r"[A-Za-z0-9_.\-]*" + re.escape(tool) + r"\b", text))
    return sorted((name for name in found if _is_tool(name, tool)), key=len, reverse=True)


def _fit(schema: dict[str, Any], values: dict[str, Any], text: str,
         enum_pick: str | None = None) -> dict[str, Any]:
    """Arguments for ``schema``: each property named in ``values`` gets its value; a
    required property without one gets a value of its type (``text`` for strings, the
    enum member ending with ``enum_pick`` for enum arrays)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return dict(values)
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    arguments: dict[str, Any] = {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        if name in values:
            arguments[name] = values[name]
        elif spec.get("type") == "array" and enum_pick is not None:
            members = spec.get("items", {}).get("enum", []) if isinstance(spec.get("items"), dict) else []
            picked = [m for m in members if isinstance(m, str) and _is_tool(m, enum_pick)]
            if picked or name in required:
                arguments[name] = picked[:1] or [enum_pick]
        elif name in required:
            arguments[name] = {"string": text, "number": 5, "integer": 5, "boolean": False,
                               "array": [], "object": {}}.get(spec.get("type"), text)
    return arguments


def _call_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


def _render_chat(action: Action, view: View) -> Reply:
    model = view.model or "test-model"
    if action.call is None:
        return Chat(content=action.text, model=model)
    call = {"id": _call_id("call_"), "name": action.call.name,
            "arguments": json.dumps(action.arguments)}
    return Chat(content=None, tool_calls=[call], model=model)


def _render_messages(action: Action, view: View) -> Reply:
    model = view.model or "test-model"
    if action.call is None:
        return Message(text=action.text, model=model)
    if action.call.kind == "server_search":
        return _server_search(action, model)
    call = {"id": _call_id("toolu_"), "name": action.call.name, "input": action.arguments}
    return Message(text=None, calls=[call], model=model)


def _server_search(action: Action, model: str) -> Message:
    """Anthropic's server search, run by this "server" within the answer: the search,
    what it found, then the call of the found tool (a plain answer if none)."""
    assert action.call is not None
    search_id = _call_id("srvtoolu_")
    found = [] if action.found is None else [{"type": "tool_reference",
                                              "tool_name": action.found.name}]
    blocks = [
        {"type": "server_tool_use", "id": search_id, "name": action.call.name,
         "input": action.arguments},
        {"type": "tool_search_tool_result", "tool_use_id": search_id,
         "content": {"type": "tool_search_tool_search_result", "tool_references": found}},
    ]
    if action.found is None:
        return Message(text=NO_TOOL_ANSWER, model=model, blocks=blocks)
    call = {"id": _call_id("toolu_"), "name": action.found.name, "input": action.found_arguments}
    return Message(text=None, model=model, blocks=blocks, calls=[call])


def _render_responses(action: Action, view: View) -> Reply:
    model = view.model or "test-model"
    if action.call is None:
        return Responses(text=action.text, model=model)
    if action.call.kind == "client_search":
        item = {"id": _call_id("tsc_"), "type": "tool_search_call", "call_id": _call_id("call_"),
                "execution": "client", "status": "completed", "arguments": action.arguments}
        return Responses(text=None, items=[item], model=model)
    call: dict[str, Any] = {"call_id": _call_id("call_"), "name": action.call.name,
                            "arguments": json.dumps(action.arguments)}
    if action.call.namespace is not None:
        call["namespace"] = action.call.namespace
    return Responses(text=None, calls=[call], model=model)


_RENDERERS = ((CHAT_PATH, _render_chat), (MESSAGES_PATH, _render_messages), (RESPONSES_PATH, _render_responses))
