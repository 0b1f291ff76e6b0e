"""Fixtures of the real agent CLI tests: the pinned CLIs (installed on first use), the
scripted agent upstream, and where each session's captures go.

Captures (the requests each hop received, the proxy's decisions, the CLI's output) go to
``$TOOLPRUNE_AGENT_CAPTURES/<test>/`` when that variable is set, else to pytest's temporary
folders. They hold the clients' prompts: never commit them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.support.agent_behaviour import AgentBehaviour, Task
from benchmarks.support.agent_clients import MODES
from benchmarks.support.agent_sessions import Session, run_session
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream
from deploy import agent_clis

CAPTURES_VARIABLE = "TOOLPRUNE_AGENT_CAPTURES"
#: A bound on each CLI run (they take 3–30 s against the scripted upstream).
RUN_TIMEOUT_S = 240.0

SessionFactory = Callable[..., Session]


def require_cli(client: str) -> None:
    """Install ``client``'s pinned CLI unless it is installed; skip the test when node or
    npm is missing (an install that fails is an error, not a skip)."""
    if agent_clis.installed(agent_clis.CLIS[client]):
        return
    missing = agent_clis.missing_tools()
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: cannot install "
                    f"{agent_clis.CLIS[client].spec} (deploy/agent_clis.py)")
    agent_clis.ensure(agent_clis.CLIS[client])


def captures_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get(CAPTURES_VARIABLE)
    if named:
        root = Path(named)
        root.mkdir(parents=True, exist_ok=True)
        return root
    return tmp_path_factory.mktemp("agent-captures")


@pytest.fixture(scope="module")
def agent_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionFactory]:
    """``session(mode, via_proxy, **run_session options)``: one CLI session against a
    fresh scripted agent upstream (through a cold proxy when ``via_proxy``). Sessions
    without options are run once per module and shared by its tests. With ``task`` (a
    :class:`~benchmarks.support.agent_behaviour.Task`) the upstream plays it and the CLI
    gets each of its user turns, in one client folder path for every such session (the
    paths in the prompts of a direct and a proxied session are the same); the folder is
    moved into the session's captures afterwards."""
    root = captures_root(tmp_path_factory)
    done: dict[tuple[str, bool], Session] = {}

    def session(mode: str, via_proxy: bool, label: str = "", upstream_behaviour: Callable[
            [AgentBehaviour], object] | None = None, task: Task | None = None,
            **options: object) -> Session:
        key = (mode, via_proxy)
        shared = not options and upstream_behaviour is None and not label and task is None
        if shared and key in done:
            return done[key]
        require_cli(MODES[mode].client)
        upstream = Upstream()
        behaviour = AgentBehaviour(task)
        upstream.behaviour = upstream_behaviour(behaviour) if upstream_behaviour else behaviour
        name = re.sub(r"[^A-Za-z0-9_.-]", "_",
                      f"{mode}-{'toolprune' if via_proxy else 'direct'}{'-' + label if label else ''}")
        work = root / "client"
        if task is not None:
            shutil.rmtree(work, ignore_errors=True)
            options.update(prompts=[turn.prompt for turn in task.turns], client_dir=work)
        with serve_in_thread(upstream.app) as origin:
            result = run_session(MODES[mode], origin, root / name, via_proxy=via_proxy,
                                 timeout_s=RUN_TIMEOUT_S, **options)  # type: ignore[arg-type]
        if task is not None:
            shutil.move(str(work), str(root / name / "client"))
        if shared:
            done[key] = result
        return result

    yield session
