"""Conversation identity: the key of a conversation's sticky state, and what logs show of it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from proxy.http.headers import Headers, header, state_key
from selection.types import content_text, fingerprint

#: What a conversation key built from ``X-Conversation-Id`` starts with.
HEADER_ID_PREFIX = "id:"


def conversation_id(
    header_value: bytes | None, body: Mapping[str, Any], catalog_fingerprint: str
) -> str:
    """:data:`HEADER_ID_PREFIX` and the ``X-Conversation-Id`` header; else ``h:`` and a
    hash of (model, ``catalog_fingerprint``, first system message, first user message),
    stable across the conversation's turns (the fingerprint of the catalogue's part that
    a client's own search does not change: :attr:`proxy.turn.deferral.Deferral.identity`). The prefixes keep a client's id out of the
    proxy's own keys (``agent:``, ``resp:``, ``conv:``, ``h:``) in the shared state store."""
    if header_value:
        return HEADER_ID_PREFIX + header_value.decode("latin-1")
    messages = [m for m in body.get("messages", []) if isinstance(m, Mapping)]

    def first(role: str) -> str:
        return next((content_text(m.get("content")) for m in messages if m.get("role") == role), "")

    key = [body.get("model"), catalog_fingerprint, first("system"), first("user")]
    return "h:" + fingerprint(key)[:32]


def request_conversation(
    headers: Headers, body: Mapping[str, Any], messages: Any, given: str | None,
    catalog_fingerprint: str, *, shared: bool,
) -> str:
    """The state key of a request's conversation: from ``X-Conversation-Id``, else the id
    its API gives it (``given``: the Responses API's ``conversation`` or
    ``previous_response_id``), else :func:`conversation_id`'s hash of ``body``'s model
    and ``messages`` (Chat Completions shape); scoped by the request's credential unless
    ``shared`` (:func:`proxy.http.headers.state_key`)."""
    named = header(headers, b"x-conversation-id")
    if named or given is None:
        given = conversation_id(
            named, {"model": body.get("model"), "messages": messages}, catalog_fingerprint
        )
    return state_key(given, headers, shared=shared)


def log_id(conversation: str) -> str:
    """What logs show of a conversation id: a short hash, never the id itself."""
    return hashlib.sha256(conversation.encode()).hexdigest()[:12]
