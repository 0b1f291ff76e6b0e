"""``toolprune serve --warm`` (:func:`proxy.components.warm_catalogs`): a file that cannot be
read, parsed, or is nested past the JSON decoder's depth is logged and skipped, and the
files after it are still indexed."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from proxy.components import warm_catalogs
from selection.catalog.catalog import Catalog


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"Does {name}.",
                                             "parameters": {"type": "object", "properties": {}}}}


class RecordingSelector:
    """The selector's ``warm`` at the edge of the unit: records each catalogue and
    returns a finished build task."""

    def __init__(self) -> None:
        self.warmed: list[tuple[str, ...]] = []

    def warm(self, catalog: Catalog) -> asyncio.Task:
        self.warmed.append(tuple(catalog.names))

        async def built() -> tuple[None, float]:
            return None, 0.0

        return asyncio.get_running_loop().create_task(built())


async def test_files_that_cannot_be_read_are_skipped_and_the_rest_indexed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    good = tmp_path / "tools.json"
    good.write_text(json.dumps([tool("alpha"), tool("beta")]))
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "m", "messages": [], "tools": [tool("gamma")]}))
    selector = RecordingSelector()
    with caplog.at_level(logging.INFO):
        await warm_catalogs([deep, broken, tmp_path / "missing.json", good, body], selector)  # type: ignore[arg-type]
    assert selector.warmed == [("alpha", "beta"), ("gamma",)]
    failed = [record for record in caplog.records if record.getMessage() == "warm_failed"]
    assert [record.fields["file"] for record in failed] == [
        str(deep), str(broken), str(tmp_path / "missing.json")]
    assert failed[0].fields["error"] == "JSON nested too deeply"
