"""Paths of the data in the repository, and the variable naming the optional evaluation data.

``DATA`` (``tests/data``; sources and licences in its NOTICE.md): the real tool catalogues and
a small BFCL multi-turn set. The larger evaluation data is an optional input outside the
repository, named by ``TOOLPRUNE_SHARED_DATA`` (format: docs/eval-format.md).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
REAL_CATALOGS = DATA / "real_catalogs"
#: The 96 steps of BFCL multi-turn's TradingBot conversations (cases.jsonl, catalogs/).
BFCL_TRADINGBOT = DATA / "bfcl_multi_turn_tradingbot"
#: The environment variable naming the folder of the optional evaluation data.
EVALUATION_DATA_VARIABLE = "TOOLPRUNE_SHARED_DATA"
