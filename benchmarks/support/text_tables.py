"""Plain-text output of the benchmarks: aligned tables, number and seconds cells, the
machine's load average, and lines printed as they are measured (flushed at once)."""

from __future__ import annotations

import os
import statistics
from typing import Any


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Plain-text table; the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < left else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def markdown_table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """The same table in Markdown; the first ``left`` columns left-aligned, the rest
    right-aligned."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i < left else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def n(value: Any) -> str:
    return "–" if value is None else f"{value:,}"


def secs(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def load_str() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"


def emit(text: str = "") -> None:
    print(text, flush=True)
