"""Session results kept per folder by the session benchmarks (``result.json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.support.saved_results import is_saved, saved_or_measured


@dataclass
class Figures:
    mode: str
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Figures:
        return cls(**value)


def test_a_measured_session_is_saved_in_its_emptied_folder_and_read_back(tmp_path: Path) -> None:
    folder = tmp_path / "claude-default" / "toolprune"
    folder.mkdir(parents=True)
    (folder / "capture.jsonl").write_text("an earlier run's capture")
    seen: list[bool] = []

    def measure() -> list[Figures]:
        seen.append((folder / "capture.jsonl").exists())
        folder.mkdir(parents=True)
        return [Figures("claude-default", 42)]

    assert not is_saved(folder)
    assert saved_or_measured(folder, Figures.from_json, measure) == [Figures("claude-default", 42)]
    assert seen == [False] and is_saved(folder)
    assert saved_or_measured(folder, Figures.from_json, None) == [Figures("claude-default", 42)]


def test_a_session_neither_measured_nor_saved_has_no_results(tmp_path: Path) -> None:
    assert saved_or_measured(tmp_path / "codex-default" / "direct", Figures.from_json, None) == []
