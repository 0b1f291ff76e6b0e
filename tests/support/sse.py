"""Minimal server-sent-events parsing for assertions on raw response bytes."""

from __future__ import annotations

import json
from typing import Any


def parse_sse(raw: bytes) -> list[str]:
    """Return the data payload of each event in ``raw`` (comments and data-less events skipped)."""
    payloads: list[str] = []
    text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if data:
            payloads.append("\n".join(data))
    return payloads


def chat_chunks(raw: bytes) -> list[dict[str, Any]]:
    """Return each ``data:`` payload of a chat-completions stream as JSON, except ``[DONE]``."""
    return [json.loads(payload) for payload in parse_sse(raw) if payload != "[DONE]"]
