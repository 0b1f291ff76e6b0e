"""The report of ``toolprune eval --live``, per data file: each via's outcome counts,
end-to-end success with its interval, the decomposition, the costs; the paired difference
toolprune − direct; the cases whose outcomes differ. Built from the case records of
:mod:`selection.evaluation.live` (read back from the results file); no I/O.

Per via (``direct``, ``toolprune``):

* ``cases`` and the five outcome counts (they sum to ``cases``);
* ``end_to_end`` = (``correct`` + ``recovered_by_search``) / ``cases`` with its 95 %
  Wilson interval ``end_to_end_ci`` (errors and retrieval misses stay in the
  denominator);
* ``reached`` = (``correct`` + ``recovered_by_search`` + ``selection_error``) / ``cases``:
  an expected tool reached the model (recall, of the first call's tools);
  ``chose_right`` = end-to-end successes / those cases (selection accuracy given the tool
  was there); ``end_to_end`` = ``reached`` × ``chose_right``;
* ``prompt_tokens_mean`` (cases that report them), ``seconds_mean`` (the server's time
  where it reports ``timings`` for a case, else the client's wait), ``wall_s_mean``, and
  ``timed_by`` (``timings``, ``wall`` or ``mixed``).

``difference``: toolprune's ``end_to_end`` − direct's on the same cases, with Bonett and Price's
paired interval (:func:`selection.evaluation.intervals.paired_difference`), and how many
cases only one via got right.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from selection.evaluation.intervals import LEVEL, paired_difference, wilson
from selection.evaluation.live import (
    CORRECT,
    DIRECT,
    ERRORS,
    OUTCOMES,
    RECOVERED,
    RETRIEVAL_MISS,
    SELECTION_ERROR,
    SUCCESSES,
    TOOLPRUNE,
    VIAS,
)


def _mean(values: Sequence[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def summarise_via(records: Sequence[Mapping[str, Any]], via: str) -> dict[str, Any]:
    """One via's summary over ``records`` (see the module docstring)."""
    parts = [record[via] for record in records]
    counts = {name: sum(1 for part in parts if part["outcome"] == name) for name in OUTCOMES}
    cases = len(parts)
    right = counts[CORRECT] + counts[RECOVERED]
    reached = right + counts[SELECTION_ERROR]
    low, high = wilson(right, cases)
    timed = {part["timed_by"] for part in parts if part["outcome"] != ERRORS}
    tokens = [part["prompt_tokens"] for part in parts if part["prompt_tokens"] is not None]
    return {
        "cases": cases,
        **counts,
        "end_to_end": right / cases if cases else None,
        "end_to_end_ci": [low, high],
        "reached": reached / cases if cases else None,
        "chose_right": right / reached if reached else None,
        "prompt_tokens_mean": _mean(tokens),
        "seconds_mean": _mean([part["seconds"] for part in parts]),
        "wall_s_mean": _mean([part["wall_s"] for part in parts]),
        "timed_by": timed.pop() if len(timed) == 1 else ("mixed" if timed else None),
    }


def differing(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cases whose two outcomes differ: id, expected tools, and each via's outcome,
    call and error."""
    return [
        {
            "id": record["id"],
            "expected": record["expected"],
            **{via: {key: record[via][key] for key in ("outcome", "called", "error")}
               for via in VIAS},
        }
        for record in records
        if record[DIRECT]["outcome"] != record[TOOLPRUNE]["outcome"]
    ]


def summarise_set(
    name: str, records: Sequence[Mapping[str, Any]], *, misses: bool = False
) -> dict[str, Any]:
    """The report of one data file from its case records (in case order); ``misses``:
    also list the cases whose outcomes differ (``misses``)."""
    right = {via: [record[via]["outcome"] in SUCCESSES for record in records] for via in VIAS}
    difference, low, high = paired_difference(right[TOOLPRUNE], right[DIRECT])
    report: dict[str, Any] = {
        "set": name,
        "cases": len(records),
        **{via: summarise_via(records, via) for via in VIAS},
        "difference": {
            "end_to_end": difference,
            "ci": [low, high],
            "only_toolprune_right": sum(
                1 for t, d in zip(right[TOOLPRUNE], right[DIRECT], strict=True) if t and not d),
            "only_direct_right": sum(
                1 for t, d in zip(right[TOOLPRUNE], right[DIRECT], strict=True) if d and not t),
        },
        "differing": sum(1 for r in records if r[DIRECT]["outcome"] != r[TOOLPRUNE]["outcome"]),
    }
    if misses:
        report["misses"] = differing(records)
    return report


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def format_live_report(report: Mapping[str, Any]) -> str:
    """One data file's report as a text table (what ``toolprune eval --live`` prints)."""
    level = round(LEVEL * 100)
    header = (f"{'via':<10} {'cases':>5} {'correct':>7} {'recovered':>9} {'sel.err':>7} "
              f"{'ret.miss':>8} {'errors':>6}  {'end-to-end':>10} {f'{level}% CI':>13}  "
              f"{'reached':>7} {'chose':>6}  {'prompt tok':>10} {'s/case':>7}")
    lines = [f"{report['set']}: {report['cases']} cases", header]
    for via in VIAS:
        row = report[via]
        low, high = row["end_to_end_ci"]
        tokens = row["prompt_tokens_mean"]
        lines.append(
            f"{via:<10} {row['cases']:>5} {row[CORRECT]:>7} {row[RECOVERED]:>9} "
            f"{row[SELECTION_ERROR]:>7} {row[RETRIEVAL_MISS]:>8} {row[ERRORS]:>6}  "
            f"{_number(row['end_to_end']):>10} {f'[{low:.3f}, {high:.3f}]':>13}  "
            f"{_number(row['reached']):>7} {_number(row['chose_right']):>6}  "
            f"{'–' if tokens is None else f'{tokens:.0f}':>10} "
            f"{_number(row['seconds_mean'], 2):>7}"
        )
    diff = report["difference"]
    low, high = diff["ci"]
    lines.append(
        f"toolprune − direct: {diff['end_to_end']:+.3f} [{low:+.3f}, {high:+.3f}] "
        f"({level}% paired CI); only toolprune right: {diff['only_toolprune_right']}, only "
        f"direct right: {diff['only_direct_right']}; seconds timed by: "
        f"direct {report[DIRECT]['timed_by']}, toolprune {report[TOOLPRUNE]['timed_by']}"
    )
    for miss in report.get("misses", []):
        parts = "; ".join(
            f"{via} {miss[via]['outcome']} ({miss[via]['error'] or miss[via]['called'] or 'no call'})"
            for via in VIAS
        )
        expected = " | ".join("/".join(unit) for unit in miss["expected"]) or "no call"
        lines.append(f"  {miss['id']}: expected {expected}; {parts}")
    return "\n".join(lines)
