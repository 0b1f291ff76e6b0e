"""The usage log's rows as plain data (what :func:`proxy.usage.reader.read_usage` returns
and :mod:`proxy.usage.analysis` reads), the call statuses and the report's result records."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Call statuses (the ``status`` column of the log's ``calls`` table).
FORWARDED = "forwarded"
LOADED = "loaded"
MISS = "miss"
HISTORY = "history"
STATUSES = (FORWARDED, LOADED, MISS, HISTORY)

#: Decisions of logged requests: acting ones, and fallbacks (full catalogue forwarded).
ACTING = ("pruned", "dry_run")
FALLBACK = "fallback"

#: Bytes per token when no tokenizer was reachable (JSON tool schemas; an estimate).
BYTES_PER_TOKEN_ESTIMATE = 4


@dataclass(frozen=True)
class RequestRecord:
    """One logged request: an acting one (``pruned`` / ``dry_run``) or a ``fallback``
    (``reason`` set; no conversation or catalogue is known then)."""

    ts: float
    decision: str
    conversation: str | None = None
    catalog: str | None = None
    turn: int | None = None
    reason: str | None = None
    path: str | None = None
    offered: int | None = None
    forwarded: int | None = None
    schema_bytes_saved: int | None = None
    meta_calls: int = 0


@dataclass(frozen=True)
class CallRecord:
    """One real tool call, counted once (``status``: one of :data:`STATUSES`)."""

    ts: float
    conversation: str
    tool: str
    turn: int
    status: str
    catalog: str | None = None


@dataclass(frozen=True)
class ExampleRecord:
    """A user message that preceded a call of ``tool`` (stored only on opt-in)."""

    tool: str
    text: str
    conversation: str


@dataclass
class UsageData:
    """Everything a report reads. ``catalogs``: catalogue fingerprint → tool name →
    schema bytes, in catalogue order."""

    requests: list[RequestRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    catalogs: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: list[ExampleRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ToolUsage:
    tool: str
    calls: int
    conversations: int
    conversation_share: float
    median_first_turn: float | None
    forwarded: int
    loaded: int
    misses: int
    history: int
    first_turn_conversations: int


@dataclass(frozen=True)
class CoreSuggestion:
    """``names``: the suggested CORE (``by_share`` first, then ``first_turn`` extras).
    ``covered_share``: calls of ``names`` / all calls."""

    names: list[str]
    by_share: list[str]
    first_turn: list[str]
    core_share: float
    first_turn_share: float
    total_calls: int
    covered_calls: int
    covered_share: float | None


@dataclass(frozen=True)
class ExampleSuggestion:
    """A candidate example utterance for a tool: in how many conversations it preceded a
    call of the tool, and how many distinct tools it preceded in all."""

    text: str
    conversations: int
    tools: int
