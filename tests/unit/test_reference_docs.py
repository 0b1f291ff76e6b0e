"""The generated reference pages (docs/reference/) are what the code generates now: a setting,
a command-line option or a metric added without `python -m scripts.gen_reference` fails here."""

from __future__ import annotations

import pytest
from prometheus_client import Counter
from pydantic import Field

from config.settings import Settings
from proxy.metrics import Metrics
from scripts import gen_reference


@pytest.mark.parametrize("path", sorted(gen_reference.generated()), ids=lambda p: p.name)
def test_the_committed_reference_page_is_what_the_code_generates(path):
    assert path.is_file(), f"{path} is missing: run python -m scripts.gen_reference"
    assert path.read_text() == gen_reference.generated()[path], (
        f"{path.name} is out of date: run python -m scripts.gen_reference"
    )


def test_a_new_setting_changes_the_settings_page():
    class WithOneMore(Settings):
        brand_new_s: float = Field(1.5, gt=0, description="A knob added without docs.")

    page = gen_reference.settings_page(WithOneMore)
    assert page != gen_reference.settings_page()
    assert ("| `TOOLPRUNE_BRAND_NEW_S` | float (seconds, > 0) | `1.5` | A knob added without "
            "docs. |") in page.splitlines()


def test_every_setting_and_metric_has_a_row():
    settings = gen_reference.settings_page()
    assert all(f"| `TOOLPRUNE_{name.upper()}` |" in settings for name in Settings.model_fields)
    names = [doc.name for doc in gen_reference.metric_docs()]
    assert "toolprune_requests_total" in names and "toolprune_query_texts_total" in names
    metrics = Metrics()
    metrics.brand_new = Counter(  # type: ignore[attr-defined]
        "toolprune_brand_new", "A metric added without docs.", ["kind"], registry=metrics.registry
    )
    assert ("| `toolprune_brand_new_total` | counter | `kind` | A metric added without docs. |"
            in gen_reference.metrics_page(metrics).splitlines())


def test_every_command_line_option_has_a_row():
    page = gen_reference.cli_page()
    for option in ("--upstream UPSTREAM", "--warm FILE [FILE ...]", "--k K", "--api",
                   "REQUEST.json", "--db FILE", "--no-tokenize"):
        assert f"| `{option}" in page
    for command in ("serve", "eval", "explain", "usage", "usage report"):
        assert f"## `toolprune {command}`" in page
