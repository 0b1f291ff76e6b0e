"""The README stays short and CI runs what the README and docs/development.md say."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def marked_command(text: str, name: str) -> str | None:
    block = re.search(rf"<!-- {name} -->\n```bash\n(.+?)\n```\n<!-- /{name} -->", text, re.S)
    return block.group(1) if block else None


def test_the_readme_is_read_in_five_minutes() -> None:
    assert len(README.splitlines()) <= 210


def test_ci_runs_the_readme_test_command_the_lint_the_real_server_tests_then_the_docs_build() -> None:
    tests = marked_command(README, "test-command")
    assert tests is not None and tests.endswith("python -m pytest")
    real = marked_command(DEVELOPMENT, "real-upstream-command")
    assert real is not None and "local_llama.py build" in real and "-m real_upstream" in real
    lint = marked_command(DEVELOPMENT, "lint-command")
    assert lint is not None and "ruff check" in lint
    docs = marked_command(DEVELOPMENT, "docs-command")
    assert docs is not None and "mkdocs build --strict" in docs
    steps = re.findall(r'"(README\.md|docs/development\.md) ([\w-]+)"', CI)
    assert steps == [("README.md", "test-command"), ("docs/development.md", "lint-command"),
                     ("docs/development.md", "real-upstream-command"),
                     ("docs/development.md", "docs-command")]


def test_the_default_test_command_leaves_out_the_real_server_tests() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["pytest"]["ini_options"]["addopts"] == ["-m", "not real_upstream"]
