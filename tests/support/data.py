"""``evaluation_set(name)``: one set of the larger evaluation data, an optional input outside
the repository named by ``TOOLPRUNE_SHARED_DATA`` (format: docs/eval-format.md); a test that
needs it is skipped, with the reason, when it is absent. The paths of the data in the
repository are in ``benchmarks.support.data``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.support.data import EVALUATION_DATA_VARIABLE


def evaluation_set(name: str) -> Path:
    """The folder of evaluation set ``name`` (holding ``cases.jsonl``) in the optional
    evaluation data; calls ``pytest.skip`` (with the reason) when it is not there."""
    root = os.environ.get(EVALUATION_DATA_VARIABLE)
    if not root:
        pytest.skip(f"needs the optional evaluation data: set {EVALUATION_DATA_VARIABLE}=PATH "
                    f"(a folder holding {name}/cases.jsonl; format in docs/eval-format.md)")
    folder = Path(root) / name
    if not (folder / "cases.jsonl").is_file():
        pytest.skip(f"{EVALUATION_DATA_VARIABLE}={root} holds no {name}/cases.jsonl")
    return folder
