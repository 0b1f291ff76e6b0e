#!/usr/bin/env python3
"""The four coding-agent CLIs the real-client tests and benchmarks run, pinned, from npm.

Each CLI is installed with ``npm install --prefix <dir> <package>@<version>`` into a cache
outside the repository (like :mod:`deploy.local_llama` caches llama-server)::

    $TOOLPRUNE_AGENT_CLIS_CACHE/<package>@<version>/   (default ~/.cache/toolprune/agent-clis)
        node_modules/.bin/<command>                    the executable handed out
        installed.json                                 written last: the install is complete

A package is installed into a temporary sibling folder and renamed into place once npm
succeeded, under an exclusive lock (``fcntl.flock`` on ``<cache>/.lock``), so a call that
finds ``installed.json`` returns at once and two concurrent callers install once. Nothing but
npm's registry is contacted; npm's audit, funding and update notices are off. Requires
``node`` and ``npm`` on ``PATH`` (:class:`AgentCliError` otherwise).

Environment overrides:

``TOOLPRUNE_AGENT_CLIS_CACHE``
    cache directory (see above).

CLI::

    python deploy/agent_clis.py install            # install what is missing, print paths
    python deploy/agent_clis.py install --json     # the same, as JSON {name: path}
    python deploy/agent_clis.py paths              # print paths of what is installed

Only the standard library is used, so CI can run it before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE_VARIABLE = "TOOLPRUNE_AGENT_CLIS_CACHE"
#: One npm install may fetch a few hundred MB; a slow mirror gets this long.
INSTALL_TIMEOUT_S = 1800.0
MARKER = "installed.json"


@dataclass(frozen=True)
class AgentCli:
    """One pinned CLI: its short ``name``, npm ``package`` and ``version``, and the
    ``command`` its package puts in ``node_modules/.bin``."""

    name: str
    package: str
    version: str
    command: str

    @property
    def spec(self) -> str:
        """``package@version``, as npm takes it."""
        return f"{self.package}@{self.version}"


CLIS: dict[str, AgentCli] = {
    cli.name: cli
    for cli in (
        AgentCli("claude", "@anthropic-ai/claude-code", "2.1.197", "claude"),
        AgentCli("codex", "@openai/codex", "0.171.0", "codex"),
        AgentCli("qwen", "@qwen-code/qwen-code", "0.15.10", "qwen"),
        AgentCli("opencode", "opencode-ai", "1.18.33", "opencode"),
    )
}


class AgentCliError(RuntimeError):
    """node/npm missing, or an install that failed (npm's output is in the message)."""


def cache_dir() -> Path:
    """The cache folder: ``$TOOLPRUNE_AGENT_CLIS_CACHE`` or ``~/.cache/toolprune/agent-clis``."""
    override = os.environ.get(CACHE_VARIABLE)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "toolprune" / "agent-clis"


def install_dir(cli: AgentCli) -> Path:
    """Where ``cli`` is installed: ``<cache>/<package>@<version>`` with ``/`` as ``+``."""
    return cache_dir() / cli.spec.replace("/", "+")


def executable(cli: AgentCli) -> Path:
    """The CLI's executable inside its install folder (it may not exist yet)."""
    return install_dir(cli) / "node_modules" / ".bin" / cli.command


def installed(cli: AgentCli) -> bool:
    """Whether ``cli`` was installed completely (its marker and executable exist)."""
    return (install_dir(cli) / MARKER).is_file() and executable(cli).exists()


def missing_tools() -> list[str]:
    """``node`` and ``npm`` when they are not on ``PATH`` (an install needs both)."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def log(message: str) -> None:
    print(f"[agent_clis] {message}", file=sys.stderr, flush=True)


@contextmanager
def _locked() -> Iterator[None]:
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure(cli: AgentCli) -> Path:
    """Install ``cli`` unless it is installed; return its executable.

    Raises :class:`AgentCliError` when node or npm is missing or npm fails.
    """
    if installed(cli):
        return executable(cli)
    absent = missing_tools()
    if absent:
        raise AgentCliError(f"{' and '.join(absent)} not on PATH: cannot install {cli.spec}")
    with _locked():
        if installed(cli):  # another process finished it while this one waited
            return executable(cli)
        target = install_dir(cli)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            started = time.monotonic()
            log(f"npm install {cli.spec} -> {target}")
            _npm_install(cli, staging)
            seconds = round(time.monotonic() - started, 1)
            size = _size_bytes(staging)
            marker = {"package": cli.package, "version": cli.version, "seconds": seconds,
                      "bytes": size}
            (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
            if target.exists():  # an incomplete earlier install
                shutil.rmtree(target)
            staging.rename(target)
            log(f"installed {cli.spec} in {seconds} s, {size / 1e6:.0f} MB")
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    if not executable(cli).exists():
        raise AgentCliError(f"{cli.spec} installed but {executable(cli)} is missing")
    return executable(cli)


def _npm_install(cli: AgentCli, prefix: Path) -> None:
    command = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
               "--no-update-notifier", "--loglevel=error", cli.spec]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise AgentCliError(f"npm install {cli.spec} took over {INSTALL_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        raise AgentCliError(f"npm install {cli.spec} failed ({done.returncode}):\n"
                            f"{done.stdout[-2000:]}{done.stderr[-4000:]}")


def _size_bytes(folder: Path) -> int:
    """Bytes on disk under ``folder``, each hard-linked file once (as ``du`` counts)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for path in folder.rglob("*"):
        stat = path.lstat()
        if path.is_symlink() or not path.is_file() or (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        total += stat.st_blocks * 512
    return total


def ensure_all(names: Sequence[str] | None = None) -> dict[str, Path]:
    """Install the named CLIs (default: all four); return ``{name: executable}``."""
    return {name: ensure(CLIS[name]) for name in names or CLIS}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: ``install`` | ``paths``."""
    parser = argparse.ArgumentParser(
        prog="agent_clis.py",
        description="Install the pinned coding-agent CLIs from npm into a cache and print paths.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("install", "install what is missing, then print the executables"),
                        ("paths", "print the executables of what is installed")):
        command = sub.add_parser(name, help=help_)
        command.add_argument("names", nargs="*", metavar="NAME",
                             help=f"CLIs to act on, of {', '.join(CLIS)} (default: all)")
        command.add_argument("--json", action="store_true", help="print {name: path} as JSON")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(CLIS))
    if unknown:
        parser.error(f"unknown CLI {', '.join(unknown)}; known: {', '.join(CLIS)}")
    names = args.names or list(CLIS)
    try:
        if args.cmd == "install":
            paths = ensure_all(names)
        else:
            paths = {name: executable(CLIS[name]) for name in names if installed(CLIS[name])}
    except AgentCliError as exc:
        log(f"error: {exc}")
        return 1
    if args.json:
        print(json.dumps({name: str(path) for name, path in paths.items()}, indent=2))
    else:
        for name, path in paths.items():
            print(f"{name} ({CLIS[name].spec}): {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
