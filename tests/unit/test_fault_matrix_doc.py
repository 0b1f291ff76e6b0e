"""``docs/fault-matrix.md`` is what the tests' ``@proves`` markers render
(:mod:`tests.support.fault_matrix`): a fault added, changed or dropped in a test without
regenerating the page fails here."""

from __future__ import annotations

import pytest

from tests.support.fault_matrix import PAGE, PHASES, Row, proves, render, rows


def test_the_committed_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/fault-matrix.md is stale: python -m tests.support.fault_matrix --write"
    )


def test_every_phase_has_a_proved_row_and_every_row_names_its_test() -> None:
    found = rows()
    assert {row.phase for row in found} == set(PHASES)
    assert all(row.test.startswith("tests/integration/") and "::test_" in row.test for row in found)


def test_a_row_renders_under_its_phase() -> None:
    row = Row("a fault", "request", "a 400", "tests/integration/test_x.py::test_y")
    assert "## Request\n\n| fault | the client receives | proved by |\n|---|---|---|\n| a fault | a 400 | `tests/integration/test_x.py::test_y` |" in render([row])


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown phase"):
        proves(fault="f", phase="sometime", client="c")
