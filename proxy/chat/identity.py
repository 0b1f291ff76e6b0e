"""Conversation identity: the key of a conversation's sticky state, and what logs show of it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from selection.catalog import Catalog, fingerprint
from selection.query import content_text


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
