"""The benchmarks run from a plain install plus the `bench` extra: no module of benchmarks/
imports test code, and each script's --help works with pytest and the test extras absent."""

from __future__ import annotations

import ast
import subprocess
import sys
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
