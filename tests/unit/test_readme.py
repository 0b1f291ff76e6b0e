"""The README stays true: every setting is documented, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_settings_field_is_in_the_readme_settings_table() -> None:
    documented = set(re.findall(r"^\| `TOOLPRUNE_([A-Z0-9_]+)` \|", README, flags=re.M))
    fields = {name.upper() for name in Settings.model_fields}
    assert fields - documented == set(), "settings missing from the README table"
    assert documented - fields == set(), "README documents settings that do not exist"


def test_ci_runs_the_readme_test_command() -> None:
    block = re.search(r"<!-- test-command -->\n```bash\n(.+?)\n```\n<!-- /test-command -->", README, re.S)
    assert block is not None
    assert "pytest" in block.group(1)
    assert "test-command" in (ROOT / ".ci" / "run").read_text()
