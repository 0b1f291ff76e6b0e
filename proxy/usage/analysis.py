"""What the usage log says (``toolprune usage report``): pure analysis, no I/O.

Input is the plain data :func:`proxy.usage.reader.read_usage` reads from the SQLite usage
log (:class:`UsageData`); output is JSON-ready data and its terminal rendering.

* **Per-tool table**, ranked by calls: ``calls`` (every call seen once, whatever its
  status), ``conversations`` and ``conversation_share`` (conversations with at least one
  call of the tool / all conversations in the period), ``median_first_turn`` (per
  conversation the turn of its first call of the tool; the median over conversations),
  and the calls by status: ``forwarded`` (the tool was in the selection), ``loaded``
  (reached through ``load_tools``/``search_tools`` in that request: the model needed the
  escape hatch), ``misses`` (called while not forwarded), ``history`` (only seen in a
  later request's history; the proxy did not see the response that made the call).
  Tools are aggregated by name over every catalogue.
* **Suggested CORE**: the smallest set of tools whose calls cover ``core_share`` of all
  calls (the most-called tools first: optimal, since every call belongs to one tool),
  plus the tools called on a conversation's first turn in at least ``first_turn_share``
  of the conversations (CORE is forwarded before any stickiness exists). With the
  projected prompt saving: per catalogue the schema bytes of the tools a CORE-only
  prompt would not carry (the meta-tool's own definition not subtracted), times the
  acting requests that used the catalogue. Bytes are exact; tokens are
  ``bytes / BYTES_PER_TOKEN_ESTIMATE``, an estimate, unless the caller adds tokenizer
  counts (:func:`add_token_counts`).
* **Example utterances** (only when the proxy stored user text): per tool the user
  messages that preceded its calls, most conversations first, then the most specific
  (preceding the fewest distinct tools), rendered as a policy-file ``[examples]`` TOML
  fragment (:func:`examples_toml`) to review and adopt.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from proxy.usage.examples import examples_toml, harvest_examples
from proxy.usage.records import (
    ACTING,
    BYTES_PER_TOKEN_ESTIMATE,
    FALLBACK,
    FORWARDED,
    HISTORY,
    LOADED,
    MISS,
    STATUSES,
    CallRecord,
    CoreSuggestion,
    ToolUsage,
    UsageData,
)


def conversations_of(data: UsageData) -> set[str]:
    """Every conversation with an acting request or a call in ``data``."""
    seen = {r.conversation for r in data.requests if r.conversation and r.decision in ACTING}
    seen.update(call.conversation for call in data.calls)
    return seen


def tool_table(data: UsageData) -> list[ToolUsage]:
    """The per-tool table, most calls first (ties by name)."""
    conversations = len(conversations_of(data))
    by_tool: dict[str, list[CallRecord]] = defaultdict(list)
    for call in data.calls:
        by_tool[call.tool].append(call)
    rows = []
    for tool, calls in by_tool.items():
        first: dict[str, int] = {}
        for call in calls:
            if call.conversation not in first or call.turn < first[call.conversation]:
                first[call.conversation] = call.turn
        statuses = Counter(call.status for call in calls)
        rows.append(
            ToolUsage(
                tool=tool,
                calls=len(calls),
                conversations=len(first),
                conversation_share=len(first) / conversations if conversations else 0.0,
                median_first_turn=float(statistics.median(first.values())) if first else None,
                forwarded=statuses[FORWARDED],
                loaded=statuses[LOADED],
                misses=statuses[MISS],
                history=statuses[HISTORY],
                first_turn_conversations=sum(1 for turn in first.values() if turn <= 1),
            )
        )
    rows.sort(key=lambda row: (-row.calls, row.tool))
    return rows


def suggest_core(
    table: Sequence[ToolUsage],
    conversations: int,
    *,
    core_share: float = 0.9,
    first_turn_share: float = 0.1,
) -> CoreSuggestion:
    """The smallest set covering ``core_share`` of the calls, plus first-turn tools (see
    the module docstring). ``table`` must be ranked as :func:`tool_table` ranks it."""
    if not 0.0 <= core_share <= 1.0:
        raise ValueError("core_share must be within [0, 1]")
    total = sum(row.calls for row in table)
    by_share: list[str] = []
    covered = 0
    for row in table:
        if total == 0 or covered >= core_share * total:
            break
        by_share.append(row.tool)
        covered += row.calls
    chosen = set(by_share)
    first_turn = [
        row.tool
        for row in table
        if row.tool not in chosen
        and conversations
        and row.first_turn_conversations > 0
        and row.first_turn_conversations / conversations >= first_turn_share
    ]
    names = [*by_share, *first_turn]
    calls_of = {row.tool: row.calls for row in table}
    covered_calls = sum(calls_of[name] for name in names)
    return CoreSuggestion(
        names=names,
        by_share=by_share,
        first_turn=first_turn,
        core_share=core_share,
        first_turn_share=first_turn_share,
        total_calls=total,
        covered_calls=covered_calls,
        covered_share=covered_calls / total if total else None,
    )


def projected_saving(data: UsageData, core: Iterable[str]) -> dict[str, Any]:
    """Per catalogue (most requests first) and in total: the schema bytes a CORE-only
    prompt leaves out (see the module docstring), next to what the log measured."""
    core_set = set(core)
    requests_of: Counter[str] = Counter()
    observed: dict[str, list[int]] = defaultdict(list)
    for request in data.requests:
        if request.decision in ACTING and request.catalog:
            requests_of[request.catalog] += 1
            if request.decision == "pruned" and request.schema_bytes_saved is not None:
                observed[request.catalog].append(request.schema_bytes_saved)
    rows = []
    for catalog, sizes in data.catalogs.items():
        full = sum(sizes.values())
        core_bytes = sum(size for name, size in sizes.items() if name in core_set)
        requests = requests_of.get(catalog, 0)
        saved = observed.get(catalog, [])
        rows.append(
            {
                "catalog": catalog[:12],
                "catalog_fingerprint": catalog,
                "tools": len(sizes),
                "core_tools": sum(1 for name in sizes if name in core_set),
                "requests": requests,
                "full_bytes": full,
                "core_bytes": core_bytes,
                "saving_bytes_per_request": full - core_bytes,
                "saving_share": (full - core_bytes) / full if full else None,
                "saving_bytes_total": (full - core_bytes) * requests,
                "observed_saving_bytes_mean": statistics.fmean(saved) if saved else None,
            }
        )
    rows.sort(key=lambda row: (-row["requests"], row["catalog_fingerprint"]))
    total = sum(row["saving_bytes_total"] for row in rows)
    requests = sum(row["requests"] for row in rows)
    return {
        "catalogs": rows,
        "requests": requests,
        "saving_bytes_total": total,
        "saving_bytes_per_request": total / requests if requests else None,
        "saving_tokens_total_estimate": total // BYTES_PER_TOKEN_ESTIMATE,
        "tokens": "estimate",
        "bytes_per_token_estimate": BYTES_PER_TOKEN_ESTIMATE,
    }


def add_token_counts(saving: dict[str, Any], counts: Mapping[str, tuple[int, int]]) -> None:
    """Add tokenizer counts: ``counts[fingerprint] = (full_tokens, core_tokens)``. The
    total becomes measured when every catalogue with requests was counted."""
    measured_total = 0
    complete = True
    for row in saving["catalogs"]:
        count = counts.get(row["catalog_fingerprint"])
        if count is None:
            complete = complete and row["requests"] == 0
            continue
        full, core = count
        row["full_tokens"] = full
        row["core_tokens"] = core
        row["saving_tokens_per_request"] = full - core
        measured_total += (full - core) * row["requests"]
    if counts and complete:
        saving["saving_tokens_total"] = measured_total
        saving["tokens"] = "tokenizer"


def analyse(
    data: UsageData,
    *,
    core_share: float = 0.9,
    first_turn_share: float = 0.1,
    examples_per_tool: int = 3,
    example_max_chars: int = 400,
) -> dict[str, Any]:
    """The whole report as JSON-ready data."""
    table = tool_table(data)
    conversations = conversations_of(data)
    core = suggest_core(
        table, len(conversations), core_share=core_share, first_turn_share=first_turn_share
    )
    decisions = Counter(r.decision for r in data.requests)
    reasons = Counter(r.reason for r in data.requests if r.decision == FALLBACK and r.reason)
    statuses = Counter(call.status for call in data.calls)
    examples = harvest_examples(data.examples, per_tool=examples_per_tool, max_chars=example_max_chars)
    times = [r.ts for r in data.requests] + [c.ts for c in data.calls]
    return {
        "period": {"first": min(times, default=None), "last": max(times, default=None)},
        "requests": {
            "acting": sum(decisions[d] for d in ACTING),
            **{d: decisions[d] for d in (*ACTING, FALLBACK)},
            "fallback_reasons": dict(sorted(reasons.items())),
            "meta_calls": sum(r.meta_calls for r in data.requests),
        },
        "conversations": len(conversations),
        "calls": {"total": len(data.calls), **{s: statuses[s] for s in STATUSES}},
        "tools": [asdict(row) for row in table],
        "core": {**asdict(core), "saving": projected_saving(data, core.names)},
        "examples": {
            "stored": len(data.examples),
            "tools": {t: [asdict(e) for e in items] for t, items in examples.items()},
            "toml": examples_toml(examples, table) if examples else None,
        },
    }
