"""A context overflow in whatever shape the server wraps it, read into the client's API's
own error (:class:`proxy.http.errors.ContextOverflow`).

Each kind reads its own error body (llama-server's ``exceed_context_size_error``,
Lemonade's wrap of it, vLLM's "maximum context length", LM Studio's "context the
overflows", Ollama's "exceeds the context length"); the body's ``error`` object is tried
first, then the body itself (vLLM before v0.10, Ollama's ``{"error": "text"}``). Any
status of 400 or more is read: the server's kind need not be known (a gateway in between
keeps the body). Anything else is not an overflow and passes through unchanged.
"""

from __future__ import annotations

import json

from proxy.http.errors import ContextOverflow
from proxy.servers.facts import UNKNOWN
from proxy.servers.probe import KIND_MODULES

#: Error bodies read at most (an overflow's is a few hundred bytes).
MAX_ERROR_BYTES = 64 * 1024


def read_overflow(status: int, body: bytes, server: str = UNKNOWN) -> ContextOverflow | None:
    """The client's error for an upstream answer (``status``, decoded ``body``) that says
    the request exceeded the context, else None. ``server``: the identified kind (its
    reader first; the kind named in the message)."""
    if status < 400 or len(body) > MAX_ERROR_BYTES:
        return None
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    order = sorted(KIND_MODULES.items(), key=lambda item: item[0] != server)
    for value in (parsed.get("error"), parsed):
        for name, kind in order:
            found = kind.overflow(value)
            if found is not None:
                return ContextOverflow(found.message, found.prompt_tokens, found.context_tokens,
                                       server if server != UNKNOWN else name)
    return None
