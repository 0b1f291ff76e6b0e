"""The repository refers to nothing outside itself: no path that leaves it, no Markdown
link to a file it does not hold, and the data the tests read is committed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.support.data import BFCL_TRADINGBOT, DATA, REAL_CATALOGS

ROOT = Path(__file__).resolve().parents[2]
#: Text that names a place outside the repository (the project workspace's layout).
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w.])/work/|\bshared/data\b|\bshared/DESIGN")
#: Relative Markdown link targets: ``[text](target)``, anchors and URLs excepted.
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".txt", ".cfg", ".ini", ""}


def repository_files() -> list[Path]:
    """Committed and to-be-committed files (git's view; ignored files excluded)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the file list comes from git")
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def text_files() -> list[Path]:
    return [
        path for path in repository_files()
        if path.suffix in TEXT_SUFFIXES and DATA not in path.parents
        or path.parent == DATA  # tests/data/NOTICE.md
    ]


def test_no_file_names_a_path_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in text_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line) and path != Path(__file__)
    ]
    assert found == []


def test_markdown_links_point_at_files_of_the_repository():
    broken = []
    for path in (p for p in text_files() if p.suffix == ".md"):
        for target in LINK.findall(path.read_text()):
            resolved = (path.parent / target.split("#")[0]).resolve()
            if ROOT not in (resolved, *resolved.parents) or not resolved.exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_data_the_tests_read_is_committed():
    committed = set(repository_files())
    needed = [
        REAL_CATALOGS / "github_mcp_server.json",
        REAL_CATALOGS / "playwright_mcp.json",
        BFCL_TRADINGBOT / "cases.jsonl",
        BFCL_TRADINGBOT / "catalogs" / "mt_a27bf63821.json",
        DATA / "NOTICE.md",
    ]
    assert [p for p in needed if p not in committed] == []


def test_the_checks_catch_what_they_are_for():
    assert OUTSIDE.search("see ../shared/DESIGN.md")
    assert OUTSIDE.search('open("/work/shared/data/x.json")')
    assert not OUTSIDE.search("state shared by every replica")
    assert LINK.findall("[a](docs/x.md) [b](https://e.org) [c](#anchor)") == ["docs/x.md"]
