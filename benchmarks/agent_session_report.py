"""The table and the plot of ``benchmarks/agent_sessions.py``."""

from __future__ import annotations

from pathlib import Path

from benchmarks.agent_session_runs import Ratio, SessionResult
from benchmarks.support.text_tables import markdown_table, n, table

Rows = list[tuple[SessionResult, Ratio]]


def render(rows: Rows, markdown: bool = False) -> str:
    """One line per session. With llama-server's counts: prompt and evaluated tokens, else
    the tokens counted from the request bodies."""
    counted = any(result.evaluated is not None for result, _ in rows)
    headers = ["client/mode", "via", "task done", "requests"]
    headers += (["prompt tokens", "evaluated", "evaluated × direct", "prefix breaks",
                 "refused", "wall s"] if counted else ["body tokens", "× direct", "CLI s"])
    body = []
    for result, ratio in rows:
        row = [result.mode, result.via, "yes" if result.done else f"no: {result.why}",
               str(result.requests)]
        if counted:
            row += [n(result.prompt), n(result.evaluated), str(ratio), n(result.breaks),
                    n(result.refused), f"{result.wall_s:,.0f}"]
        else:
            row += [n(result.body_tokens), str(ratio), f"{result.cli_s:.0f}"]
        body.append(row)
    return (markdown_table if markdown else table)(headers, body, left=3)


def plot(rows: Rows, path: Path) -> None:
    """Evaluated tokens per mode, each via a bar, the ratio to direct above toolprune's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys(result.mode for result, _ in rows))
    vias = list(dict.fromkeys(result.via for result, _ in rows))
    width = 0.8 / max(1, len(vias))
    figure, axes = plt.subplots(figsize=(10, 4.5))
    for offset, via in enumerate(vias):
        xs, heights, labels = [], [], []
        for index, mode in enumerate(modes):
            found = [(r, q) for r, q in rows if r.mode == mode and r.via == via]
            if not found or found[0][0].evaluated is None:
                continue
            result, ratio = found[0]
            xs.append(index + (offset - (len(vias) - 1) / 2) * width)
            heights.append(result.evaluated)
            labels.append("" if via != "toolprune" or ratio.value is None else
                          f"{ratio.value:.2f}×" + ("" if ratio.basis == "evaluated" else " sent"))
        bars = axes.bar(xs, heights, width, label=via)
        axes.bar_label(bars, labels=labels, fontsize=8)
    axes.set_xticks(range(len(modes)), modes, rotation=20, ha="right")
    axes.set_ylabel("tokens evaluated over the session")
    axes.set_title("Whole agent sessions on llama-server: tokens evaluated (prefill)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
