"""ARCHITECTURE.md stays a one-screen map: at most 150 lines, and every folder of ``proxy/``
and ``selection/`` named in it (in backticks, relative to its package: ``apis/chat/``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "ARCHITECTURE.md"
MAX_LINES = 150


def folders(package: str) -> list[str]:
    """Folders under ``package`` (``__pycache__`` aside), relative to it, as ``a/b/``."""
    base = ROOT / package
    return sorted(
        f"{path.relative_to(base).as_posix()}/" for path in base.rglob("*")
        if path.is_dir() and "__pycache__" not in path.parts
    )


def missing_folders(text: str, package: str) -> list[str]:
    """The folders of ``package`` that ``text`` does not name."""
    return [f"{package}/{folder}" for folder in folders(package) if f"`{folder}" not in text]


def test_the_map_fits_on_one_screen():
    assert len(MAP.read_text().splitlines()) <= MAX_LINES


def test_every_folder_of_proxy_and_selection_is_on_the_map():
    text = MAP.read_text()
    assert missing_folders(text, "proxy") + missing_folders(text, "selection") == []


def test_the_folder_check_sees_a_folder_left_out():
    text = MAP.read_text().replace("`ranking/", "`scoring/")
    assert "selection/ranking/" in missing_folders(text, "selection")
