"""deploy/agent_clis.py: an installed CLI is handed out without npm, a missing node or npm
is a clear error, and the command line rejects an unknown CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy import agent_clis

CLI = agent_clis.CLIS["qwen"]


def test_an_installed_cli_is_returned_without_running_npm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(agent_clis.CACHE_VARIABLE, str(tmp_path))
    executable = agent_clis.executable(CLI)
    executable.parent.mkdir(parents=True)
    executable.write_text("#!/bin/sh\n")
    (agent_clis.install_dir(CLI) / agent_clis.MARKER).write_text(json.dumps({"version": CLI.version}))

    def no_npm(*args: object, **kwargs: object) -> None:
        raise AssertionError("npm ran for an installed CLI")

    monkeypatch.setattr(agent_clis.subprocess, "run", no_npm)
    assert agent_clis.ensure(CLI) == executable
    assert str(tmp_path) in str(executable) and f"{CLI.package}@{CLI.version}".replace("/", "+") in str(executable)


def test_an_install_without_node_or_npm_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(agent_clis.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setattr(agent_clis.shutil, "which", lambda name: None)
    with pytest.raises(agent_clis.AgentCliError, match="node and npm not on PATH"):
        agent_clis.ensure(CLI)
    assert not agent_clis.install_dir(CLI).exists()


def test_the_command_line_rejects_an_unknown_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        agent_clis.main(["install", "vscode"])
    assert exited.value.code == 2
    assert "unknown CLI vscode" in capsys.readouterr().err
