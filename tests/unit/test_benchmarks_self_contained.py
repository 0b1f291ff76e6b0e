"""The benchmarks run from a plain install plus the `bench` extra: no module of benchmarks/
imports test code, and each script's --help works with pytest and the test extras absent."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "benchmarks").rglob("*.py"))
#: Importable only with the `test` extra (or from the tests folder).
TEST_ONLY = ("tests", "pytest", "hypothesis", "openai", "anthropic")
SCRIPTS = sorted(
    path.stem for path in (ROOT / "benchmarks").glob("*.py")
    if 'if __name__ == "__main__":' in path.read_text()
)


def test_no_benchmark_module_imports_test_code():
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                      if n.split(".")[0] in TEST_ONLY]
    assert found == []


def test_the_user_facing_scripts_are_there():
    assert {"load", "overhead", "session", "ttft_llama", "selection_tables", "round_trip"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_works_without_the_test_extras(script: str):
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in TEST_ONLY)
    code = (f"import runpy, sys; {blocked}; sys.argv = ['{script}', '--help']; "
            f"runpy.run_module('benchmarks.{script}', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.parametrize(
    ("script", "argv", "package"),
    [
        ("agent_sessions", ["--no-llama", "--modes", "claude-default"], "mcp"),
        ("agent_sessions", ["--no-llama", "--plot", "sessions.png"], "matplotlib"),
        ("real_clients", [], "mcp"),
        ("learning", ["--data", ".", "--plot", "learning.png"], "matplotlib"),
        ("selection_tables", ["--data", ".", "--plot", "selection.png"], "matplotlib"),
    ],
)
def test_a_benchmark_names_a_package_it_needs_before_it_starts(
    script: str, argv: list[str], package: str, tmp_path: Path
) -> None:
    """Without a package its run needs (``mcp`` for the agent CLIs' MCP server, matplotlib
    for ``--plot``), a benchmark exits at once with one line naming it and the extra that
    installs it: nothing started, nothing written (before, every agent session ran and
    read as a failed task)."""
    code = (f"import runpy, sys; sys.modules[{package!r}] = None; "
            f"sys.argv = ['{script}', *{argv!r}]; "
            f"runpy.run_module('benchmarks.{script}', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""  # not even the captures' folder: nothing started
    (line,) = done.stderr.splitlines()
    assert f"benchmarks.{script} needs the Python package {package}" in line
    assert "pip install -e '.[bench]'" in line


def test_the_bench_extra_installs_every_package_a_benchmark_checks_for() -> None:
    """One extra installs what every benchmark needs: each package a benchmark's
    ``require`` names is in the ``bench`` extra."""
    required = set()
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require":
                required |= {arg.value for arg in ast.walk(node) if isinstance(arg, ast.Constant)
                             and isinstance(arg.value, str) and not arg.value.startswith("python -m")}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    bench = {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for spec in extras["bench"]}
    assert required == {"mcp", "matplotlib"} and required <= bench, (required, bench)
