"""The scripted agent session of ``benchmarks/session.py``: one GitHub agent's system
prompt, its two conversations (the tool calls and results the agent appends before each
request, as it would send them), the interleavings, and the oracles' tool blocks (the
fewest tokens any pruning can evaluate: exactly the tools each turn calls)."""

from __future__ import annotations

import json
from typing import Any

SYSTEM = (
    "You are a GitHub assistant for the octocat organisation. Use the tools to read and "
    "change repositories, issues and pull requests. Be brief."
)
#: The fitting catalogue: the GitHub MCP server's first 25 tools (6,773 tokens of tool
#: schemas; the issue's baseline took its first 30, which leave no room for a session).
FITTING_SIZE = 25


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    ]}


def result(call_id: str, value: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(value)}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


REPO = {"owner": "octocat", "repo": "hello-world"}
#: Each conversation's turns: the messages the agent appends before each request.
CONVERSATIONS: dict[str, list[list[dict[str, Any]]]] = {
    "A": [
        [user("Create a branch fix-login-loop from main in octocat/hello-world.")],
        [
            call("a1", "create_branch", {**REPO, "branch": "fix-login-loop", "from_branch": "main"}),
            result("a1", {"ref": "refs/heads/fix-login-loop", "sha": "5f1c2e9"}),
            user("Open a pull request from fix-login-loop into main titled 'Fix login redirect loop'."),
        ],
        [
            call("a2", "create_pull_request", {**REPO, "head": "fix-login-loop", "base": "main",
                                               "title": "Fix login redirect loop"}),
            result("a2", {"number": 43, "html_url": "https://github.com/octocat/hello-world/pull/43"}),
            user("Start a review of pull request 43 and comment on src/auth/redirect.ts line 18 "
                 "that the loop guard needs a test for an expired session."),
        ],
        [
            call("a3", "create_pull_request_review", {**REPO, "pullNumber": 43}),
            result("a3", {"id": 7781, "state": "PENDING"}),
            call("a4", "add_comment_to_pending_review", {
                **REPO, "pullNumber": 43, "path": "src/auth/redirect.ts", "line": 18,
                "body": "Please add a test for an expired session.", "subjectType": "LINE"}),
            result("a4", {"id": 99120}),
            user("Thanks. Now reply to review comment 99120 that the test is added."),
        ],
    ],
    "B": [
        [user("Open an issue in octocat/hello-world: the login page loops forever after a "
              "session expires.")],
        [
            call("b1", "create_issue", {**REPO, "title": "Login loops after session expiry",
                                        "body": "Let the session expire, then reload /login."}),
            result("b1", {"number": 57, "html_url": "https://github.com/octocat/hello-world/issues/57"}),
            user("Add a comment to issue 57 saying that pull request 43 should fix it."),
        ],
        [
            call("b2", "add_issue_comment", {**REPO, "issue_number": 57,
                                             "body": "Pull request 43 should fix this."}),
            result("b2", {"id": 120455, "html_url": "https://github.com/octocat/hello-world/issues/57#issuecomment-120455"}),
            user("Add a thumbs-up reaction to issue 57."),
        ],
    ],
}
# Conversation A's fifth turn (the longer interleaving only).
CONVERSATIONS["A"].append([
    call("a5", "add_reply_to_pull_request_comment", {**REPO, "pullNumber": 43, "commentId": 99120,
                                                     "body": "The test is added."}),
    result("a5", {"id": 99131}),
    user("Now trigger the CI workflow on branch fix-login-loop."),
])
#: The interleavings (``--order``): the issue's, and a longer one with two more turns.
ORDERS = {
    "short": [("A", 0), ("A", 1), ("B", 0), ("A", 2), ("B", 1), ("A", 3)],
    "long": [("A", 0), ("A", 1), ("B", 0), ("A", 2), ("B", 1), ("A", 3), ("B", 2), ("A", 4)],
}
#: Per-slot context of every run (``--parallel`` N: N × this in all).
SLOT_CTX = 8192


def needed_tools(conversation: str, turn: int) -> list[str]:
    """The tools the agent calls in answer to that turn (the calls that open the
    conversation's next step; none for a last turn)."""
    steps = CONVERSATIONS[conversation]
    if turn + 1 >= len(steps):
        return []
    return [call["function"]["name"] for message in steps[turn + 1]
            for call in message.get("tool_calls") or []]


def oracle_blocks(order: list[tuple[str, int]]) -> list[list[str]]:
    """Per turn of ``order``, the tool block of an oracle that knows each turn's tools:
    the agent's one block (shared by its conversations, as the proxy's is), grown at its
    end by the tools a turn needs that it lacks; nothing else, no meta-tool."""
    block: list[str] = []
    blocks = []
    for conversation, turn in order:
        block = block + [name for name in needed_tools(conversation, turn) if name not in block]
        blocks.append(block)
    return blocks


def messages_for(
    conversation: str, turn: int, loaded: dict[tuple[str, int], list[Any]] | None = None
) -> list[dict[str, Any]]:
    """The whole history the agent sends on that turn. ``loaded``: per (conversation,
    turn), tool definitions delivered after that turn's messages as a ``load_tools``
    exchange (:func:`load_exchange`), kept in place on later turns."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for index, step in enumerate(CONVERSATIONS[conversation][: turn + 1]):
        messages.extend(step)
        definitions = (loaded or {}).get((conversation, index))
        if definitions:
            messages.extend(load_exchange(f"load{conversation}{index}", definitions))
    return messages


#: The late oracle's fixed meta-tools: schemas arrive as ``load_tools`` results and the
#: model calls a loaded tool through ``call_tool`` (what a proxy would rewrite into the
#: real ``tool_calls``).
LATE_META_TOOLS = [
    {"type": "function", "function": {
        "name": "load_tools", "description": "Load tools by name; their schemas come back as the result.",
        "parameters": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                       "required": ["names"]}}},
    {"type": "function", "function": {
        "name": "call_tool", "description": "Call a tool that load_tools returned, by name.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
                       "required": ["name", "arguments"]}}},
]


def load_exchange(call_id: str, definitions: list[Any]) -> list[dict[str, Any]]:
    """A ``load_tools`` call and its result: the definitions' function objects as JSON."""
    names = [definition["function"]["name"] for definition in definitions]
    return [call(call_id, "load_tools", {"names": names}),
            result(call_id, [definition["function"] for definition in definitions])]


def late_oracle_plan(
    order: list[tuple[str, int]], by_name: dict[str, Any]
) -> tuple[list[Any], dict[tuple[str, int], list[Any]]]:
    """The late oracle: a fixed block (the first turn's tools and :data:`LATE_META_TOOLS`)
    and, per (conversation, turn), the definitions of the tools that turn needs which
    neither the block nor the conversation's earlier loads hold, delivered after the
    turn's messages."""
    first = [by_name[name] for name in needed_tools(*order[0])]
    held = {definition["function"]["name"] for definition in first}
    loaded: dict[tuple[str, int], list[Any]] = {}
    seen: dict[str, set[str]] = {}
    for conversation, turn in order:
        mine = seen.setdefault(conversation, set(held))
        new = [name for name in needed_tools(conversation, turn) if name not in mine]
        mine.update(new)
        loaded[(conversation, turn)] = [by_name[name] for name in new]
    return first + LATE_META_TOOLS, loaded
