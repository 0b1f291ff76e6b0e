"""The tables of ``benchmarks/agent_sessions.py --long``: per session, the cumulative
tokens llama-server evaluates at the checkpoints (a quarter, half, three quarters and the
end of the user turns) against its mode's direct session, and the session's facts (turns
done, requests, block changes, prompt sizes)."""

from __future__ import annotations

from benchmarks.agent_session_runs import references
from benchmarks.long_session_runs import LongResult
from benchmarks.support.long_task import checkpoints
from benchmarks.support.text_tables import markdown_table, n, table


def _ratio(value: int | None, reference: int | None) -> str:
    if value is None or not reference:
        return "–"
    return f"{value / reference:.2f}×"


def evaluated_rows(results: list[LongResult]) -> tuple[list[str], list[list[str]]]:
    """Cumulative evaluated tokens at each checkpoint, and against direct."""
    marks = checkpoints(max((len(result.turns) for result in results), default=1))
    headers = ["client/mode", "via", *(f"turn {mark}" for mark in marks),
               *(f"× direct @{mark}" for mark in marks), "first request", "× direct"]
    base = references(results)
    rows = []
    for result in results:
        reference = base.get(result.mode)
        values = result.checkpoint_values()
        bases = reference.checkpoint_values() if reference else [None] * len(marks)
        first_base = reference.first_evaluated if reference else None
        rows.append([result.mode, result.via, *(n(value) for value in values),
                     *(_ratio(value, ref) for value, ref in zip(values, bases, strict=True)),
                     n(result.first_evaluated), _ratio(result.first_evaluated, first_base)])
    return headers, rows


def fact_rows(results: list[LongResult]) -> tuple[list[str], list[list[str]]]:
    """Turns done, requests, block changes (by the client), the proxy's logged breaks,
    refusals, prompt sizes and times."""
    headers = ["client/mode", "via", "turns done", "requests", "block changed (client)",
               "logged cache_break", "refused", "last prompt", "grew", "CLI s", "count s"]
    rows = []
    for result in results:
        changed = [row for row in result.requests if row["block_changed"]]
        by_client = sum(1 for row in changed if row["by_client"])
        failed = next((f"turn {index}: {why}" for index, why in enumerate(result.turns, 1) if why),
                      "")
        done = f"{result.turns_done}/{len(result.turns)}" + (f" ({failed})" if failed else "")
        rows.append([result.mode, result.via, done, str(len(result.requests)),
                     f"{len(changed)} ({by_client})", n(result.logged_breaks), str(result.refused),
                     n(result.last_prompt), n(result.grown), f"{result.cli_s:,.0f}",
                     f"{result.count_s:,.0f}"])
    return headers, rows


def render(results: list[LongResult], markdown: bool = False) -> str:
    """Both tables, plain or Markdown."""
    parts = []
    for headers, rows in (evaluated_rows(results), fact_rows(results)):
        parts.append((markdown_table if markdown else table)(headers, rows, left=2))
    return "\n\n".join(parts)
