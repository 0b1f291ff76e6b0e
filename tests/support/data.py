"""Where the shared evaluation data lives: ``TOOLPRUNE_SHARED_DATA``, else ``shared/data``
beside the repository (the project workspace's layout, also CI's)."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("TOOLPRUNE_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)
REAL_CATALOGS = SHARED_DATA / "real_catalogs"
