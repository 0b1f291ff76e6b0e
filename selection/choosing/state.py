"""Per-conversation state: tools loaded, with admission and last-use times, and counters.

``ConversationState`` is plain data, (de)serialised to JSON for the proxy's state stores
(:mod:`proxy.state`). Times are Unix seconds (float).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class LoadedTool:
    """A tool in a conversation's loaded set: when it was admitted and last used."""

    admitted_at: float
    last_used_at: float


@dataclass
class ConversationState:
    """State of one conversation.

    ``loaded``: tool name → times, in admission order (dict order is the forwarded order).
    ``turn``: acting requests seen; ``meta_calls``: meta-tool calls handled.
    ``tier``: the tools the meta-tool lists by name; ``meta_at``: how many of the loaded
    tools precede the meta-tool in the forwarded block (None: no meta-tool was forwarded).
    Both are kept while the block lasts: the meta-tool's text and place are part of the
    upstream's cached prefix, and tools admitted later follow it.
    ``history_tokens``: estimated prompt tokens of the messages at the last request (what
    the upstream's cache holds after the tool block).
    ``holder``: in an agent's record (the block its conversations start from), the state
    key of the conversation whose request last used the block; None elsewhere.
    ``found``: tools a search found in this conversation (the client's search tool or a
    meta-tool call), in finding order: kept loaded for the conversation.
    ``delivered``: tools whose definitions a meta-call's result gave the model in the
    conversation (not in the block: :mod:`selection.clients.bridge`), in order.
    ``exchanges``: the proxy's own rounds the client never saw (a meta-call and its
    result, in the API's shape, with where they stand in the client's history), kept so
    each later request is forwarded with them in place (the proxy reads and writes them;
    selection keeps them as they are). ``seen``: the conversation's history at its last
    request, as :class:`~selection.conversation.continuity.HistoryMark` fields
    (``messages``, ``digest``; None: not recorded), to tell a continued history from one
    the client rewrote.
    """

    loaded: dict[str, LoadedTool] = field(default_factory=dict)
    turn: int = 0
    meta_calls: int = 0
    tier: list[str] = field(default_factory=list)
    history_tokens: int = 0
    holder: str | None = None
    meta_at: int | None = None
    found: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, Any] | None = None

    def to_json(self) -> str:
        data: dict[str, object] = {
            "loaded": [[name, t.admitted_at, t.last_used_at] for name, t in self.loaded.items()],
            "turn": self.turn,
            "meta_calls": self.meta_calls,
            "tier": self.tier,
            "history_tokens": self.history_tokens,
        }
        if self.holder is not None:
            data["holder"] = self.holder
        if self.meta_at is not None:
            data["meta_at"] = self.meta_at
        if self.found:
            data["found"] = self.found
        if self.delivered:
            data["delivered"] = self.delivered
        if self.exchanges:
            data["exchanges"] = self.exchanges
        if self.seen is not None:
            data["seen"] = self.seen
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> ConversationState:
        """Raises ValueError (json.JSONDecodeError, KeyError as ValueError) on bad data,
        including negative counts, numbers no int can hold (``1e999``) and nesting too
        deep to decode."""
        try:
            data = json.loads(raw)
            loaded = {str(n): LoadedTool(float(a), float(u)) for n, a, u in data["loaded"]}
            tier = [str(name) for name in data.get("tier", [])]
            counts = [int(data[key]) for key in ("turn", "meta_calls")]
            counts.append(int(data.get("history_tokens", 0)))
            holder = data.get("holder")
            meta_at = None if data.get("meta_at") is None else int(data["meta_at"])
            found = [str(name) for name in data.get("found", [])]
            delivered = [str(name) for name in data.get("delivered", [])]
            exchanges = data.get("exchanges", [])
            seen = data.get("seen")
            if not (isinstance(exchanges, list) and all(isinstance(e, dict) for e in exchanges)):
                raise ValueError("exchanges is not a list of objects")
            if seen is not None and not isinstance(seen, dict):
                raise ValueError("seen is not an object")
            if min(counts) < 0 or (meta_at is not None and meta_at < 0):
                raise ValueError("a count is negative")
            turn, meta_calls, history = counts
            return cls(
                loaded, turn, meta_calls, tier, history,
                None if holder is None else str(holder), meta_at, found, delivered,
                exchanges, seen,
            )
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ValueError(f"invalid conversation state: {exc}") from exc

    def copy(self) -> ConversationState:
        return ConversationState(
            {name: LoadedTool(**asdict(t)) for name, t in self.loaded.items()},
            self.turn,
            self.meta_calls,
            list(self.tier),
            self.history_tokens,
            self.holder,
            self.meta_at,
            list(self.found),
            list(self.delivered),
            [dict(exchange) for exchange in self.exchanges],
            None if self.seen is None else dict(self.seen),
        )
