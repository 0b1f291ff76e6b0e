"""Where a session's forwarded tool block changed, and whether the client changed its own
request there: the requests that reached the upstream, each matched to the client request
it serves (the last one the client sent before it: a proxy's hidden rounds serve the
client request that started them).

The block is the request's ``tools`` array (Chat Completions, Responses and Messages all
name it so); the client's prefix is its tools, its system prompt (``system`` messages at
the head of Chat Completions, ``system`` of Messages, ``instructions`` of Responses) and
its history (the messages or input items after them, as the chat template reads them:
``cache_control`` marks aside and a content of text blocks as its text, for Claude Code
moves the marks from request to request and sends the last user message as blocks, then
as a string), which must begin with the history of the client's request before. A change of the forwarded block at a request whose client
request kept all three is the proxy's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.support.recording_relay import Exchange


def tool_block(body: Any) -> Any:
    """The request's tool block (None: none)."""
    return body.get("tools") if isinstance(body, dict) else None


def system_prompt(path: str, body: Any) -> Any:
    """What the client put before the conversation, in ``path``'s API."""
    if not isinstance(body, dict):
        return None
    if path.endswith("/messages"):
        return body.get("system")
    if path.endswith("/responses"):
        return body.get("instructions")
    head = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer"):
            break
        head.append(message)
    return head


def history(path: str, body: Any) -> list[Any]:
    """The conversation after the system prompt, without ``cache_control`` marks."""
    if not isinstance(body, dict):
        return []
    if path.endswith("/responses"):
        items = body.get("input")
        items = items if isinstance(items, list) else [items]
    else:
        items = body.get("messages") or []
        if not path.endswith("/messages"):
            items = items[len(system_prompt(path, body)):]
    return [_unmarked(item) for item in items]


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, list) and content and all(
                isinstance(part, dict) and part.get("type") == "text" for part in content):
            value = {**value, "content": "".join(str(part.get("text")) for part in content)}
        return {key: _unmarked(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(item) for item in value]
    return value


def served_by(upstream: Sequence[Exchange], client: Sequence[Exchange]) -> list[int | None]:
    """For each upstream request, the index of the client request it serves (None: sent
    before any client request)."""
    owners: list[int | None] = []
    for exchange in upstream:
        arrived = exchange.request.arrived_at
        earlier = [index for index, sent in enumerate(client) if sent.request.arrived_at <= arrived]
        owners.append(earlier[-1] if earlier else None)
    return owners


@dataclass(frozen=True)
class BlockChange:
    """The upstream request at ``index`` (0-based) forwarded another block than the one
    before it; ``by_client``: the client request it serves changed its tools or its
    system prompt from the client request before, or did not extend its history (a hidden
    round never does)."""

    index: int
    by_client: bool


def block_changes(upstream: Sequence[Exchange], client: Sequence[Exchange]) -> list[BlockChange]:
    """Every upstream request after the first whose block differs from the request's
    before it (module docstring)."""
    owners = served_by(upstream, client)
    bodies = [_json(exchange) for exchange in upstream]
    sent = [_json(exchange) for exchange in client]
    changes = []
    for index in range(1, len(upstream)):
        if tool_block(bodies[index]) == tool_block(bodies[index - 1]):
            continue
        now, before = owners[index], owners[index - 1]
        by_client = now != before and (now is None or before is None or _prefix_changed(
            client[now].request.path, sent[now], sent[before]))
        changes.append(BlockChange(index, by_client))
    return changes


def _prefix_changed(path: str, now: Any, before: Any) -> bool:
    earlier = history(path, before)
    return (tool_block(now) != tool_block(before)
            or system_prompt(path, now) != system_prompt(path, before)
            or history(path, now)[:len(earlier)] != earlier)


def _json(exchange: Exchange) -> Any:
    try:
        return exchange.request.json()
    except ValueError:
        return None
