"""Response ids the proxy served on ``/v1/responses``, for requests that continue a
conversation with ``previous_response_id`` (OpenAI's Responses API reference: the
upstream stores each round's response; see :class:`ResponseChains`)."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any

from proxy.turn.turn import json_bytes

#: Response ids remembered per process (response id → conversation id).
CHAIN_ENTRIES = 10_000
#: A ``previous_response_id`` value in a raw body (a cheap look before decoding it).
_PREVIOUS_ID = re.compile(rb'"previous_response_id"\s*:\s*"([^"\\]{1,256})"')


class ResponseChains:
    """What the proxy knows of the response ids it served, for requests that continue a
    conversation with ``previous_response_id``: the conversation (so its loaded tools
    are kept) and, for a streamed response that took several rounds, the upstream id of
    its last round (the stream shows the client the first round's id, as the SDKs
    require one id per stream; the last round's stored response is the one holding the
    whole exchange), which every continuation is forwarded with, pruned or not (both ids
    name the conversation). Bounded LRU, in process: an id this process did not serve
    starts a conversation keyed on it and is forwarded as it is."""

    def __init__(self, size: int = CHAIN_ENTRIES) -> None:
        self._size = size
        self._ids: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def remember(self, response_id: Any, conversation: str, upstream_id: Any = None) -> None:
        """Record a response id the client got (``upstream_id``: the id the upstream
        stored its answer under, when different)."""
        if not isinstance(response_id, str) or not response_id:
            return
        stored = upstream_id if isinstance(upstream_id, str) and upstream_id else response_id
        # The stored id too: a continuation is planned after it is rewritten to it.
        for known in dict.fromkeys((stored, response_id)):
            self._ids[known] = (conversation, stored)
            self._ids.move_to_end(known)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def conversation_of(self, response_id: str) -> str:
        known = self._ids.get(response_id)
        return known[0] if known else "resp:" + response_id

    def upstream_id(self, response_id: str) -> str:
        known = self._ids.get(response_id)
        return known[1] if known else response_id

    def continued(self, raw: bytes) -> bytes | None:
        """``raw`` (a request body) with its ``previous_response_id`` replaced by the
        stored id of that response when they differ, or None (nothing to replace). For
        every request, pruned or forwarded as it is: the first round's stored response
        holds the hidden meta-call and not the answer."""
        found = {match.decode("latin-1") for match in _PREVIOUS_ID.findall(raw)}
        if not any(self.upstream_id(value) != value for value in found):
            return None
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        if not isinstance(previous, str) or self.upstream_id(previous) == previous:
            return None
        body["previous_response_id"] = self.upstream_id(previous)
        return json_bytes(body)
