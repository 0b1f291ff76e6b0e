"""The ``toolprune`` command line's own behaviour: help, version, defaults in help texts,
and the explain table sized to its content."""

from __future__ import annotations

import importlib.metadata

import pytest

from config.settings import Settings
from proxy.cli.explain import format_table
from proxy.cli.main import main


def test_bare_toolprune_prints_help_and_succeeds(capsys: pytest.CaptureFixture[str]):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: toolprune")
    for command in ("serve", "eval", "explain", "usage"):
        assert f"    {command} " in out
    assert "``" not in out and "argparse" not in out  # plain words, no markup or internals


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"toolprune {importlib.metadata.version('toolprune')}"


def test_bare_usage_prints_its_help(capsys: pytest.CaptureFixture[str]):
    assert main(["usage"]) == 0
    assert "report" in capsys.readouterr().out


@pytest.mark.parametrize(("command", "field"), [
    (["serve"], "host"), (["serve"], "port"), (["serve"], "upstream_url"),
    (["eval"], "threshold"), (["explain"], "top_k"), (["usage", "report"], "usage_db"),
])
def test_help_names_the_setting_and_its_default(
    command: list[str], field: str, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    default = Settings.model_fields[field].default
    assert f"$TOOLPRUNE_{field.upper()}, else {'unset' if default is None else default})" in help_text
    assert "(default: None)" not in help_text and "(default: False)" not in help_text


def test_eval_help_explains_itself(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = capsys.readouterr().out
    assert "docs/eval-format.md" in out and "recall@k" in out and "example:" in out
    assert ".py" not in out  # no pointer into the source


def test_explain_table_columns_fit_the_longest_name():
    long_name = "add_pull_request_review_comment_reaction_with_a_very_long_name"
    explained = {
        "api": "chat_completions", "decision": "pruned", "path": "native", "forwarded": 2, "offered": 50,
        "meta_tools": ["load_tools"], "schema_bytes_saved": 4000, "tokens_saved_estimate": 1000,
        "tools": [{"name": long_name, "reason": "semantic", "score": 0.8123},
                  {"name": "core_tool", "reason": "core", "score": None}],
        "left_out": [{"name": "other", "score": 0.5}],
    }
    lines = format_table(explained).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("tool "))
    rows = lines[header + 2 : header + 4]
    # every row's reason column starts where the header's does, after the longest name
    reason_at = lines[header].index("reason")
    assert reason_at > len(long_name)
    assert [row[reason_at:].split()[0] for row in rows] == ["semantic", "core"]
    assert rows[0].split()[-1] == "0.812"


@pytest.mark.parametrize("port", ["0", "99999", "-5"])
def test_a_port_out_of_range_is_an_invalid_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    """Not a port the operating system reads modulo 65,536, or refuses later."""
    monkeypatch.setenv("TOOLPRUNE_UPSTREAM_URL", "http://127.0.0.1:9/v1")  # undone after
    monkeypatch.setenv("TOOLPRUNE_PORT", "8088")
    assert main(["serve", "--port", port]) == 2
    assert "TOOLPRUNE_PORT: Input should be" in capsys.readouterr().err


def test_an_invalid_setting_is_named_in_one_line_each_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLPRUNE_TOP_K", "abc")
    # serve writes its options into the environment: recorded here, so undone after the test
    monkeypatch.setenv("TOOLPRUNE_UPSTREAM_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TOOLPRUNE_EMBEDDER_API_KEY", "sk-secret")
    status = main(["serve", "--upstream", "not-a-url"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines() == [
        "toolprune serve: 2 invalid setting(s):",
        "  TOOLPRUNE_UPSTREAM_URL: Value error, upstream_url must start with http:// or https://",
        "  TOOLPRUNE_TOP_K: Input should be a valid integer, unable to parse string as an integer",
    ]
    assert "Traceback" not in err and "abc" not in err and "sk-secret" not in err
