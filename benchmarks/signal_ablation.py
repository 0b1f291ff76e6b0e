"""Each selection signal measured on its own: recall@8 and forwarded schema tokens on every
shared set, with all signals and with each one removed (``toolprune eval --ablate``), as
one Markdown table (docs/measuring-selection.md, "Per signal").

Runs ``toolprune eval`` (``proxy.cli.eval.run_eval``: the proxy's own selection code,
default settings) at k = 8 on every shared set — the small ones whole, the large ones
sampled by whole conversations (``--limit``) — once per set with every ablation of
:data:`selection.evaluation.ABLATIONS` beside the full pipeline. A cell is recall@8, its
change against all signals, and the mean schema tokens forwarded.

    python -m benchmarks.signal_ablation [--data DIR] [--limit 800] [--json-out FILE]
    python -m benchmarks.signal_ablation --from-json FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.selection_tables import data_parser, run_all
from selection.evaluation import ABLATIONS

K = "8"


#: The options of each eval run: k = 8, every ablation, no BM25 anchor.
OPTIONS = ["--k", K, "--no-bm25", "--ablate", ",".join(ABLATIONS)]


def _row_at_k(method: dict[str, Any]) -> dict[str, Any]:
    return next(row for row in method["ks"] if row["k"] == K)


def markdown(reports: list[dict[str, Any]]) -> str:
    """One row per set: all signals, then each ablation (recall@8, its change, tokens)."""
    header = ["set (cases)", "all signals", *(f"−{name}" for name in ABLATIONS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for report in reports:
        for entry in report["sets"]:
            rows = {m["method"]: _row_at_k(m) for m in entry["methods"]}
            full = rows["toolprune"]
            cases = (f"{entry['cases']} of {entry['cases_total']}"
                     if entry["cases"] < entry["cases_total"] else str(entry["cases"]))
            cells = [f"{entry['set']} ({cases})",
                     f"{full['recall']:.3f} / {full['schema_tokens_mean']:.0f}"]
            for name in ABLATIONS:
                row = rows[f"-{name}"]
                delta = row["recall"] - full["recall"]
                cells.append(f"{row['recall']:.3f} ({delta:+.3f}) / {row['schema_tokens_mean']:.0f}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = data_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--from-json", type=Path, help="render saved reports instead")
    args = parser.parse_args()
    if args.from_json is not None:
        reports = json.loads(args.from_json.read_text())
    elif args.data is None:
        parser.error("needs the evaluation data: --data PATH or $TOOLPRUNE_SHARED_DATA")
    else:
        reports = run_all(args.data, args.limit, OPTIONS)
    if args.json_out:
        args.json_out.write_text(json.dumps(reports))
    print(markdown(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
