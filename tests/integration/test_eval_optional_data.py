"""``toolprune eval`` on a set of the optional evaluation data (``TOOLPRUNE_SHARED_DATA``;
skipped, with the reason, without it), as docs/measuring-selection.md runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.data import evaluation_set

#: README: recall@8 0.938 over NESTFUL's 300 cases with the defaults. A sample of 30
#: conversations scores within a few points of it; far below means selection regressed.
NESTFUL_RECALL_AT_8_FLOOR = 0.85


def test_eval_on_a_sample_of_nestful_keeps_its_recall():
    cases = evaluation_set("nestful") / "cases.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli.main", "eval", str(cases), "--limit", "30", "--k", "8",
         "--json", "--no-progress", "--no-bm25"],
        capture_output=True, text=True, check=True, timeout=600,
    )
    (report,) = json.loads(done.stdout)["sets"]
    assert report["cases"] == 30 and report["cases_total"] == 300
    (method,) = report["methods"]
    (at_8,) = method["ks"]
    assert at_8["k"] == "8"
    assert at_8["recall"] >= NESTFUL_RECALL_AT_8_FLOOR
