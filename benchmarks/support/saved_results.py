"""A benchmark's results kept per session folder (``result.json``), so a run can measure
some sessions and read the others back (``--vias``, ``--reuse``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

#: The file a session folder keeps its results in (a JSON array).
RESULT_FILE = "result.json"


class _Saved(Protocol):
    def to_json(self) -> dict[str, Any]: ...


Result = TypeVar("Result", bound=_Saved)


def saved_or_measured(
    folder: Path, read: Callable[[dict[str, Any]], Result],
    measure: Callable[[], list[Result]] | None,
) -> list[Result]:
    """The results saved in ``folder`` when ``measure`` is None (none when nothing was
    saved), else ``measure``'s, run in ``folder`` emptied first and saved there."""
    saved = folder / RESULT_FILE
    if measure is None:
        return [read(item) for item in json.loads(saved.read_text())] if saved.exists() else []
    shutil.rmtree(folder, ignore_errors=True)
    results = measure()
    saved.write_text(json.dumps([result.to_json() for result in results], indent=1))
    return results


def is_saved(folder: Path) -> bool:
    """Whether ``folder`` holds saved results."""
    return (folder / RESULT_FILE).exists()
