"""The four coding-agent CLIs run headless, once each, against an OpenAI-compatible origin.

One run = one CLI process (:mod:`deploy.agent_clis` installs it) with a throw-away ``HOME``,
one stdio MCP server (:mod:`benchmarks.support.github_mcp`, the 117 GitHub tools, calls
recorded), the prompt :data:`PROMPT`, everything that would reach the internet switched
off, and a bounded time. :func:`run_client` writes the client's configuration, runs it and
returns its exit code, output, final answer and the MCP calls it made. With ``follow_up``
it continues the client's most recent session in the same folder instead, as a user does
with the CLI's own switch: ``claude -p --continue``, ``codex exec resume --last``,
``qwen --continue``, ``opencode run --continue`` (each reloads the session it saved under
its ``HOME`` and sends the new prompt after its history).

The settings per client (base URL, provider configuration, tool-search switches) are the
ones ``docs/clients/`` documents; the facts behind them come from running the pinned
versions of :data:`deploy.agent_clis.CLIS`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.support import github_mcp
from deploy import agent_clis

PROMPT = "List the open pull requests in octo/widgets"
#: A bound on one CLI run: the scripted upstream answers at once, a CPU-bound llama-server
#: prefilling 50k tokens on 2 cores takes minutes.
DEFAULT_TIMEOUT_S = 300.0
#: Agent turns a CLI may take (search, call, answer, and room for one retry).
MAX_TURNS = 8
#: The context window Codex's client-search mode is told its model has (tokens): Codex
#: compacts the history when it nears it.
CODEX_CONTEXT_WINDOW = 32768
#: Environment of every run: telemetry, update checks, error reports and other
#: non-essential traffic off (each CLI's documented switches).
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "QWEN_CODE_NO_RELAUNCH": "1",
    "CI": "1",
}
API_KEY_VARIABLE = "TOOLPRUNE_AGENT_API_KEY"
API_KEY = "sk-local-test"


@dataclass(frozen=True)
class Mode:
    """One way of running a client: ``name`` is ``<client>-<variant>``; ``api`` the API
    it speaks (``chat``, ``messages``, ``responses``)."""

    name: str
    client: str
    api: str
    description: str


MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        Mode("claude-default", "claude", "messages", "Claude Code, every tool sent"),
        Mode("claude-toolsearch", "claude", "messages",
             "Claude Code, ENABLE_TOOL_SEARCH=true (its ToolSearch defers MCP tools)"),
        Mode("codex-default", "codex", "responses", "Codex, MCP tools as namespace groups"),
        Mode("codex-toolsearch", "codex", "responses",
             "Codex, client tool_search (model catalogue with supports_search_tool)"),
        Mode("qwen-default", "qwen", "chat", "Qwen Code, MCP tools behind its tool_search"),
        Mode("opencode-default", "opencode", "chat", "opencode, every tool sent"),
    )
}


@dataclass
class AgentRun:
    """What one CLI run did: exit code, output, the final answer found in its output
    (None when none), the MCP calls recorded, and its wall time in seconds."""

    mode: Mode
    returncode: int | None
    stdout: str
    stderr: str
    answer: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False

    def called(self, tool: str) -> list[dict[str, Any]]:
        """The recorded MCP calls of ``tool``."""
        return [call for call in self.calls if call["tool"] == tool]

    def summary(self) -> str:
        """A few lines for an assertion message."""
        return (f"{self.mode.name}: exit {self.returncode}{' (timed out)' if self.timed_out else ''}"
                f" in {self.seconds:.0f} s, MCP calls {[c['tool'] for c in self.calls]},"
                f" answer {self.answer!r}\nstdout tail: {self.stdout[-1500:]}\n"
                f"stderr tail: {self.stderr[-1500:]}")


def mcp_server_command(calls: Path) -> list[str]:
    """The command that starts the GitHub MCP server recording into ``calls``."""
    return [sys.executable, str(Path(github_mcp.__file__).resolve()), "--calls", str(calls)]


def run_client(
    mode: Mode, origin: str, workdir: Path, *, model: str = "test-model",
    timeout_s: float = DEFAULT_TIMEOUT_S, prompt: str = PROMPT,
    env: Mapping[str, str] | None = None, follow_up: bool = False,
    context_window: int = CODEX_CONTEXT_WINDOW,
) -> AgentRun:
    """Run ``mode``'s CLI once against ``origin`` (``http://host:port``, no ``/v1``), with
    ``env`` added to its environment; ``follow_up``: continue the session an earlier run
    in ``workdir`` saved, ``prompt`` its next user turn; ``context_window``: the model's
    context Codex's client-search mode is told (tokens).

    ``workdir`` gets the throw-away home, the client's configuration, the MCP call log
    (``mcp_calls.jsonl``) and the CLI's output (``stdout.txt``, ``stderr.txt``). Raises
    :class:`deploy.agent_clis.AgentCliError` when the CLI cannot be installed.
    """
    executable = agent_clis.ensure(agent_clis.CLIS[mode.client])
    home = workdir / "home"
    project = workdir / "project"
    for folder in (home, project):
        folder.mkdir(parents=True, exist_ok=True)
    calls = workdir / "mcp_calls.jsonl"
    full_env = _base_env(home)
    setup = _SETUPS[mode.client]
    extra = {"context_window": context_window} if mode.client == "codex" else {}
    argv, client_env = setup(mode, origin, home, model, prompt, mcp_server_command(calls),
                             follow_up, **extra)
    full_env.update(client_env)
    full_env.update(env or {})
    started = time.monotonic()
    timed_out = False
    process = subprocess.Popen([str(executable), *argv], cwd=project, env=full_env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    seconds = time.monotonic() - started
    # What the CLI left running in its session (an MCP server it did not stop).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    (workdir / "stdout.txt").write_text(stdout)
    (workdir / "stderr.txt").write_text(stderr)
    return AgentRun(mode, None if timed_out else process.returncode, stdout, stderr,
                    _ANSWERS[mode.client](stdout), github_mcp.read_calls(calls), seconds, timed_out)


def _base_env(home: Path) -> dict[str, str]:
    keep = {name: os.environ[name] for name in ("PATH", "LANG", "TERM", "TMPDIR")
            if name in os.environ}
    return {
        **keep, **QUIET_ENV, "HOME": str(home), API_KEY_VARIABLE: API_KEY,
        "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
    }


Setup = tuple[list[str], dict[str, str]]


def _claude(mode: Mode, origin: str, home: Path, model: str, prompt: str,
            mcp: list[str], follow_up: bool) -> Setup:
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"github": {"command": mcp[0], "args": mcp[1:]}}}))
    env = {
        "ANTHROPIC_BASE_URL": origin, "ANTHROPIC_AUTH_TOKEN": API_KEY, "ANTHROPIC_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model, "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": model,
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        # Wait for the MCP server before the first request (else its tools may come only
        # with a later turn, behind the WaitForMcpServers tool).
        "MCP_CONNECTION_NONBLOCKING": "false",
    }
    if mode.name == "claude-toolsearch":
        env["ENABLE_TOOL_SEARCH"] = "true"
    argv = ["-p", prompt, "--mcp-config", str(config), "--strict-mcp-config",
            "--output-format", "json", "--model", model, "--max-turns", str(MAX_TURNS),
            "--allowedTools", "mcp__github"]
    if follow_up:  # the most recent conversation in this folder
        argv.append("--continue")
    return argv, env


def _claude_answer(stdout: str) -> str | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            result = json.loads(line)
        except ValueError:
            continue
        if isinstance(result, dict) and isinstance(result.get("result"), str):
            return result["result"]
    return None


#: The model entry Codex needs to offer its client ``tool_search`` (``supports_search_tool``);
#: an unknown model gets fallback metadata without it. Fields: Codex's ``ModelInfo``.
def _codex_model_catalog(model: str, context_window: int) -> dict[str, Any]:
    return {"models": [{
        "slug": model, "display_name": model, "description": "local model behind toolprune",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [{"effort": "medium", "description": "default"}],
        "shell_type": "shell_command", "visibility": "list", "supported_in_api": True,
        "priority": 1, "base_instructions": "You are a coding agent. Use the tools you have.",
        "context_window": context_window, "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_parallel_tool_calls": False, "supports_search_tool": True,
        "input_modalities": ["text"], "experimental_supported_tools": [],
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
    }]}


def _toml_string(value: str) -> str:
    return json.dumps(value)


def _codex(mode: Mode, origin: str, home: Path, model: str, prompt: str,
           mcp: list[str], follow_up: bool, context_window: int = CODEX_CONTEXT_WINDOW) -> Setup:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    lines = [
        f"model = {_toml_string(model)}",
        'model_provider = "local"',
        "check_for_update_on_startup = false",
    ]
    if mode.name == "codex-toolsearch":
        catalog = codex_home / "model_catalog.json"
        catalog.write_text(json.dumps(_codex_model_catalog(model, context_window), indent=2))
        lines.append(f"model_catalog_json = {_toml_string(str(catalog))}")
    lines += [
        "",
        "[analytics]", "enabled = false", "",
        "[features]", "plugins = false", "apps = false", "",
        "[model_providers.local]",
        'name = "local"',
        f"base_url = {_toml_string(origin + '/v1')}",
        'wire_api = "responses"',
        f"env_key = {_toml_string(API_KEY_VARIABLE)}",
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[mcp_servers.github]",
        f"command = {_toml_string(mcp[0])}",
        f"args = {json.dumps(mcp[1:])}",
        'default_tools_approval_mode = "approve"',
        # The first request waits for the server (else it may go before the MCP tools are
        # known: the server starts in the background).
        "required = true",
    ]
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    resume = ["resume", "--last"] if follow_up else []  # the newest session it recorded
    argv = ["exec", "--skip-git-repo-check", "--json", *resume, prompt]
    return argv, {"CODEX_HOME": str(codex_home)}


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of ``text``, one a line (other lines skipped)."""
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _codex_answer(stdout: str) -> str | None:
    texts = [event["item"].get("text") for event in json_lines(stdout)
             if event.get("type") == "item.completed" and isinstance(event.get("item"), dict)
             and event["item"].get("type") == "agent_message"]
    texts = [text for text in texts if isinstance(text, str)]
    return texts[-1] if texts else None


def _qwen(mode: Mode, origin: str, home: Path, model: str, prompt: str,
          mcp: list[str], follow_up: bool) -> Setup:
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "mcpServers": {"github": {"command": mcp[0], "args": mcp[1:], "trust": True}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    folder = home / ".qwen"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    env = {"OPENAI_BASE_URL": origin + "/v1", "OPENAI_API_KEY": API_KEY, "OPENAI_MODEL": model}
    argv = ["-p", prompt, "--approval-mode", "yolo", "--output-format", "json"]
    if follow_up:  # the most recent session of this project folder
        argv.append("--continue")
    return argv, env


def _qwen_answer(stdout: str) -> str | None:
    try:
        parsed = json.loads(stdout)
    except ValueError:
        parsed = json_lines(stdout)
    items = parsed if isinstance(parsed, list) else [parsed]
    for item in reversed(items):
        if isinstance(item, dict):
            for key in ("result", "response"):
                if isinstance(item.get(key), str):
                    return item[key]
    return None


def _opencode(mode: Mode, origin: str, home: Path, model: str, prompt: str,
              mcp: list[str], follow_up: bool) -> Setup:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {
            "npm": "@ai-sdk/openai-compatible", "name": "local",
            "options": {"baseURL": origin + "/v1", "apiKey": API_KEY},
            "models": {model: {"name": model}},
        }},
        "model": f"local/{model}",
        "small_model": f"local/{model}",
        "mcp": {"github": {"type": "local", "command": mcp, "enabled": True}},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        "share": "disabled",
        "autoupdate": False,
    }
    path = home / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    resume = ["--continue"] if follow_up else []  # the last session
    argv = ["run", *resume, "--model", f"local/{model}", "--format", "json", prompt]
    return argv, {"OPENCODE_CONFIG": str(path)}


def _opencode_answer(stdout: str) -> str | None:
    texts = []
    for event in json_lines(stdout):
        part = event.get("part")
        if event.get("type") == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts) if texts else None


_SETUPS: Mapping[str, Any] = {"claude": _claude, "codex": _codex, "qwen": _qwen,
                              "opencode": _opencode}
_ANSWERS: Mapping[str, Any] = {"claude": _claude_answer, "codex": _codex_answer,
                               "qwen": _qwen_answer, "opencode": _opencode_answer}
