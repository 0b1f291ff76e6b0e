"""``toolprune eval --live`` against a real llama-server (SmolLM2-135M, greedy): a few
conversations of the shipped TradingBot set, sent with every tool and through the
in-process proxy. The small model's answers are scored whatever they are; the run must
complete, its counts sum to the cases, and the costs come from the server's ``timings``.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.support.data import BFCL_TRADINGBOT
from benchmarks.support.llama import llama_server
from proxy.cli import main as cli

pytestmark = pytest.mark.real_upstream

OUTCOMES = ("correct", "recovered_by_search", "selection_error", "retrieval_miss", "errors")


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    """llama-server, started (and SmolLM2 installed) before the test captures its output."""
    with llama_server() as origin:
        yield origin


def test_a_live_run_against_llama_server_completes_and_counts_every_case(
    llama: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    results = tmp_path / "results.jsonl"
    status = cli.main(["eval", str(BFCL_TRADINGBOT), "--live", llama + "/v1", "--limit", "2",
                       "--max-tokens", "64", "--results", str(results), "--json",
                       "--no-progress"])
    assert status == 0
    (report,) = json.loads(capsys.readouterr().out)["sets"]
    cases = report["cases"]
    assert cases >= 2
    for via in ("direct", "toolprune"):
        row = report[via]
        assert sum(row[name] for name in OUTCOMES) == row["cases"] == cases
        if row["errors"] < cases:  # llama-server reports timings with every answer
            assert row["timed_by"] == "timings" and row["prompt_tokens_mean"] > 0
    assert len(results.read_text().splitlines()) == 1 + cases
