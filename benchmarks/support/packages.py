"""What a benchmark needs beyond the proxy's own dependencies, checked before it starts.

The ``bench`` extra (``pip install -e '.[bench]'``) installs every package a benchmark
imports: the ``mcp`` SDK of the stdio GitHub MCP server the agent CLIs are given
(:mod:`benchmarks.support.github_mcp`), matplotlib for ``--plot``. A benchmark calls
:func:`require` with what its run needs once its arguments are read, so a missing package is
named at once rather than met halfway: without ``mcp`` the MCP server, a child process, dies
at its first import and every agent session reads as a failed task ("MCP handshake failed").
"""

from __future__ import annotations

import importlib.util
import sys

#: How to install what every benchmark needs.
BENCH_INSTALL = "pip install -e '.[bench]'"


def missing(*packages: str) -> list[str]:
    """The ``packages`` (importable names) that cannot be imported here, in order."""
    return [name for name in packages if importlib.util.find_spec(name) is None]


def require(benchmark: str, *packages: str) -> None:
    """Exit with status 2 and one line naming the ``packages`` that ``benchmark`` (its
    command, ``python -m benchmarks.NAME``) needs and are not installed, and how to install
    them; return when all are there."""
    absent = missing(*packages)
    if absent:
        print(f"{benchmark} needs the Python package{'s' if len(absent) > 1 else ''} "
              f"{', '.join(absent)}, not installed: {BENCH_INSTALL}", file=sys.stderr)
        raise SystemExit(2)
