"""``toolprune eval --plot FILE``: recall and forwarded schema tokens against k, one line
per method, one column per data set; with ``--live``, each via's outcomes as stacked bars
(matplotlib, the optional extra ``plot``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from selection.evaluation.live import OUTCOMES, VIAS


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (``pip install 'toolprune[plot]'``)."""


def _numeric_rows(method: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [row for row in method["ks"] if row["k"] != "all" and row["recall"] is not None]


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend. Raises PlotUnavailable without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'toolprune[plot]'"
        ) from exc
    return plt


def _save(figure: Any, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


def plot_reports(reports: Sequence[Mapping[str, Any]], path: Path | str) -> Path:
    """Draw each set's report (``evaluate``'s output) into ``path`` (PNG, SVG or PDF by
    its suffix): top row recall@k, bottom row mean forwarded schema tokens (estimated),
    x = k on a log2 axis (``k = all`` left out). The oracle is drawn dashed: its tokens
    are the floor.

    Raises: PlotUnavailable without matplotlib; ValueError when no report has a numeric k.
    """
    plt = _pyplot()
    drawable = [r for r in reports if any(_numeric_rows(m) for m in r["methods"])]
    if not drawable:
        raise ValueError("nothing to plot: no numeric k in the sweep")
    columns = len(drawable)
    figure, axes = plt.subplots(
        2, columns, figsize=(3.2 * columns, 5.6), squeeze=False, sharex="col"
    )
    for column, report in enumerate(drawable):
        recall_axis, token_axis = axes[0][column], axes[1][column]
        for method in report["methods"]:
            rows = _numeric_rows(method)
            if not rows:
                continue
            ks = [int(row["k"]) for row in rows]
            style = "--" if method["method"] == "oracle" else "-"
            recall_axis.plot(ks, [row["recall"] for row in rows], style, marker="o",
                             markersize=3, label=method["method"])
            token_axis.plot(ks, [row["schema_tokens_mean"] for row in rows], style,
                            marker="o", markersize=3, label=method["method"])
        recall_axis.set_title(report["set"], fontsize=9)
        recall_axis.set_ylim(0, 1.02)
        token_axis.set_xscale("log", base=2)
        token_axis.set_xlabel("k")
        for axis in (recall_axis, token_axis):
            axis.grid(alpha=0.3)
            axis.tick_params(labelsize=7)
    axes[0][0].set_ylabel("recall@k")
    axes[1][0].set_ylabel("forwarded schema tokens")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    saved = _save(figure, path)
    plt.close(figure)
    return saved


def plot_live(reports: Sequence[Mapping[str, Any]], path: Path | str) -> Path:
    """Draw each set's ``--live`` report (:func:`selection.evaluation.live_report.summarise_set`)
    into ``path`` (PNG, SVG or PDF by its suffix): one panel per set, one bar per via, its
    cases stacked by outcome (shares of the set's cases), the end-to-end share and its
    interval written above.

    Raises: PlotUnavailable without matplotlib; ValueError when no report has a case.
    """
    plt = _pyplot()
    drawable = [r for r in reports if r["cases"]]
    if not drawable:
        raise ValueError("nothing to plot: no case was run")
    figure, axes = plt.subplots(
        1, len(drawable), figsize=(2.8 * len(drawable) + 1.2, 3.8), squeeze=False
    )
    colours = ("#2e7d32", "#81c784", "#ffb74d", "#e57373", "#9e9e9e")
    for axis, report in zip(axes[0], drawable, strict=True):
        bottoms = [0.0] * len(VIAS)
        for name, colour in zip(OUTCOMES, colours, strict=True):
            shares = [report[via][name] / report[via]["cases"] for via in VIAS]
            axis.bar(VIAS, shares, bottom=bottoms, color=colour, label=name, width=0.6)
            bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
        for place, via in enumerate(VIAS):
            low, high = report[via]["end_to_end_ci"]
            axis.text(place, 1.02, f"{report[via]['end_to_end']:.2f}\n[{low:.2f}, {high:.2f}]",
                      ha="center", va="bottom", fontsize=7)
        axis.set_title(report["set"], fontsize=9, pad=26)
        axis.set_ylim(0, 1.0)
        axis.tick_params(labelsize=8)
    axes[0][0].set_ylabel("share of cases")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles[::-1], labels[::-1], loc="center right", fontsize=7)
    figure.tight_layout(rect=(0, 0, 0.78, 1))
    saved = _save(figure, path)
    plt.close(figure)
    return saved
