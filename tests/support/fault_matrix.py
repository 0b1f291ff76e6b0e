"""The fault matrix: which upstream (or client) fault, in which phase of a request, gives
the client what — rendered into ``docs/fault-matrix.md`` from the tests that prove each row.

A test proves a row by carrying ``@proves(fault=..., phase=..., client=...)`` (literal
strings). :func:`render` reads the decorators from the test sources (``ast``, nothing is
imported or run) and writes one table per phase; ``tests/unit/test_fault_matrix_doc.py``
fails when the committed page differs from it. Regenerate with
``python -m tests.support.fault_matrix --write``.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PAGE = ROOT / "docs" / "fault-matrix.md"
#: Phases in the order a request meets them; a row's ``phase`` must be one of these.
PHASES = (
    "request",
    "before the upstream answers",
    "while the answer streams",
    "inside a hidden meta-call",
    "in a plain answer",
    "after the client left",
)
F = TypeVar("F", bound=Callable[..., object])


def proves(*, fault: str, phase: str, client: str) -> Callable[[F], F]:
    """Mark a test as the proof of one row of the fault matrix (see the module docstring).
    Raises ValueError for an unknown ``phase``."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; one of {PHASES}")

    def mark(test: F) -> F:
        return test

    return mark


@dataclass(frozen=True)
class Row:
    fault: str
    phase: str
    client: str
    test: str  # tests/…/file.py::name


def rows(tests: Path = TESTS) -> list[Row]:
    """Every ``@proves`` row under ``tests``, in file and line order."""
    found: list[Row] = []
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in node.decorator_list:
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "proves"):
                    continue
                fields = {kw.arg: ast.literal_eval(kw.value) for kw in decorator.keywords}
                where = f"{path.relative_to(ROOT).as_posix()}::{node.name}"
                found.append(Row(fields["fault"], fields["phase"], fields["client"], where))
    return found


def render(found: list[Row] | None = None) -> str:
    """The page's Markdown."""
    found = rows() if found is None else found
    lines = [
        "# Fault matrix",
        "",
        "What the client receives for each fault of the upstream (or of the client) in each",
        "phase of a request. Every row is proved by the integration test it names (the proxy",
        "under uvicorn, the scripted upstream as a real server); this page is generated from",
        "those tests' `@proves` markers by `python -m tests.support.fault_matrix --write`,",
        "and a test fails when it differs from them.",
        "",
        "\"The API's error event\" is, on an event stream, `event: error` with the API's own",
        "error shape: Chat Completions `{\"error\": {...}}`; Responses `{\"type\": \"error\",",
        "\"code\", \"message\", \"param\", \"sequence_number\"}` (with the same `error` object, which",
        "the `openai` SDK raises); Messages `{\"type\": \"error\", \"error\": {\"type\", \"message\"}}`.",
        "No `[DONE]` or terminal event follows it. The proxy never shows the client a byte of a",
        "hidden meta-call, and never invents a call, a name or arguments.",
    ]
    for phase in PHASES:
        in_phase = [row for row in found if row.phase == phase]
        if not in_phase:
            continue
        lines += ["", f"## {phase[0].upper()}{phase[1:]}", "", "| fault | the client receives | proved by |", "|---|---|---|"]
        lines += [f"| {row.fault} | {row.client} | `{row.test}` |" for row in in_phase]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="Render docs/fault-matrix.md from the tests.")
    parser.add_argument("--write", action="store_true", help="write the page (default: print it)")
    args = parser.parse_args()
    page = render()
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
    else:
        print(page, end="")


if __name__ == "__main__":
    main()
