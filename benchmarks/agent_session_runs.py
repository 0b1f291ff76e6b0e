"""One measured session of ``benchmarks/agent_sessions.py``: the CLI's scripted session
(directly or through a cold proxy), whether it did its task, and its model requests
counted by a fresh llama-server (:mod:`benchmarks.support.llama_replay`)."""

from __future__ import annotations

import re
import shutil
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol, TypeVar

from benchmarks.support.agent_behaviour import SESSION, AgentBehaviour, Task
from benchmarks.support.agent_clients import Mode
from benchmarks.support.agent_sessions import Session, run_session
from benchmarks.support.body_tokens import body_tokens
from benchmarks.support.github_mcp import canned_result
from benchmarks.support.llama_facts import LlamaFacts
from benchmarks.support.llama_replay import Counted, fresh_llama, replay
from benchmarks.support.plain_responses import flat_request, has_namespaces
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream

#: llama-server's context (one slot): Claude Code's default first request alone is 53,700
#: tokens, over a 32,768-token server's.
DEFAULT_CTX = 65536
#: A CLI run against the scripted upstream takes 3–30 s; the bound leaves room for a busy
#: machine and the proxy's cold start.
RUN_TIMEOUT_S = 300.0
#: Tokens by which a request's cached prefix may fall short of the request before it
#: without counting as a prefix break (the previous prompt's last tokens may be written
#: anew where the next turn's text follows them).
BREAK_SLACK = 4
FLATTENED = "direct (flattened)"


class _Measured(Protocol):
    @property
    def mode(self) -> str: ...

    @property
    def via(self) -> str: ...


Measured = TypeVar("Measured", bound=_Measured)


def references(results: list[Measured]) -> dict[str, Measured]:
    """Each mode's direct session, which the others are compared with: the flattened one
    where there is one (Codex's namespaces written as plain tools), else the first direct."""
    found: dict[str, Measured] = {}
    for result in results:
        if result.via == FLATTENED or (result.via == "direct" and result.mode not in found):
            found[result.mode] = result
    return found


@dataclass
class SessionResult:
    """One session's figures (token counts None: not measured)."""

    mode: str
    via: str
    done: bool
    why: str
    requests: int
    body_tokens: int
    prompt: int | None
    evaluated: int | None
    breaks: int | None
    refused: int | None
    cli_s: float
    llama_s: float | None
    per_request: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SessionResult:
        return cls(**value)

    @property
    def wall_s(self) -> float:
        """The CLI runs plus llama-server's time for the session's requests (seconds)."""
        return self.cli_s + (self.llama_s or 0.0)


def task_done(session: Session) -> tuple[bool, str]:
    """Whether the session did :data:`SESSION` (the module docstring of
    ``benchmarks.agent_sessions``), and what failed when it did not."""
    if len(session.runs) < len(SESSION.turns):
        return False, f"run {len(session.runs)} of {len(SESSION.turns)} failed"
    for index, run in enumerate(session.runs, 1):
        if run.returncode != 0 or run.timed_out:
            return False, f"run {index} exited {run.returncode}"
    calls = session.run.calls
    for step in SESSION.steps():
        if not any(call["tool"] == step.tool and step.arguments.items() <= call["arguments"].items()
                   for call in calls):
            return False, f"no {step.tool} call with the task's arguments"
    for run, turn in zip(session.runs, SESSION.turns, strict=True):
        marker = canned_result(turn.steps[-1].tool, {}).splitlines()[0]
        if run.answer is None or marker not in run.answer:
            return False, f"the answer to {turn.prompt[:30]!r}… does not quote its result"
    return True, ""


def prefix_breaks(counted: list[Counted]) -> int:
    """Requests whose prefix served from llama-server's cache is shorter than the request
    before them (:data:`BREAK_SLACK`)."""
    breaks = 0
    for before, now in pairwise(counted):
        if None in (before.prompt, now.prompt, now.evaluated) or now.status != 200:
            continue
        if now.prompt - now.evaluated + BREAK_SLACK < before.prompt:  # type: ignore[operator]
            breaks += 1
    return breaks


def _summary(mode: Mode, via: str, session: Session, bodies: list[tuple[str, dict[str, Any]]],
             counted: list[Counted] | None, done: tuple[bool, str]) -> SessionResult:
    per_request: list[dict[str, Any]] = [
        {"path": path, "body_tokens": body_tokens(path, body)} for path, body in bodies]
    for row, count in zip(per_request, counted or [None] * len(per_request), strict=True):
        if count is not None:
            row.update(count.to_json())
    refused = None if counted is None else sum(1 for c in counted if c.status != 200)
    ok, why = done
    if refused:
        ok, why = False, why or f"llama-server refused {refused} requests"
    prompts = [c.prompt for c in counted or [] if c.prompt is not None]
    evaluated = [c.evaluated for c in counted or [] if c.evaluated is not None]
    return SessionResult(
        mode=mode.name, via=via, done=ok, why=why, requests=len(bodies),
        body_tokens=sum(row["body_tokens"] for row in per_request),
        prompt=sum(prompts) if counted is not None else None,
        evaluated=sum(evaluated) if counted is not None else None,
        breaks=None if counted is None else prefix_breaks(counted), refused=refused,
        cli_s=sum(run.seconds for run in session.runs),
        llama_s=None if counted is None else sum(c.seconds for c in counted),
        per_request=per_request)


def measure_session(mode: Mode, via_proxy: bool, out: Path, ctx: int | None) -> list[SessionResult]:
    """Run ``mode``'s scripted session (captures in ``out/<mode>/<via>``) and count its
    requests on a fresh llama-server of ``ctx`` tokens (None: not counted), the one whose
    ``/props`` and ``/tokenize`` the proxy read during the session
    (:class:`~benchmarks.support.llama_facts.LlamaFacts`); Codex's default mode directly
    also as :data:`FLATTENED`, on another fresh llama-server."""
    via = "toolprune" if via_proxy else "direct"
    folder = out / mode.name / via
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        llama = None if ctx is None else stack.enter_context(
            fresh_llama(folder, _llama_name(via), ctx))
        facts = LlamaFacts(AgentBehaviour(SESSION), llama, ctx or DEFAULT_CTX)
        session = scripted(mode, via_proxy, out, folder, facts, SESSION)
        done = task_done(session)
        requests = [exchange.request for exchange in session.model_exchanges()]
        variants = [(via, [(r.path, r.json()) for r in requests])]
        if not via_proxy and any(has_namespaces(r.json()) for r in requests):
            variants.append((FLATTENED, [
                (r.path, flat_request(r.json()) if has_namespaces(r.json()) else r.json())
                for r in requests]))
        results = []
        for index, (label, bodies) in enumerate(variants):
            counted = None
            if llama is not None and ctx is not None:
                origin = llama if index == 0 else stack.enter_context(
                    fresh_llama(folder, _llama_name(label), ctx))
                counted = replay(origin, requests, [body for _, body in bodies])
            results.append(_summary(mode, label, session, bodies, counted, done))
    return results


def _llama_name(label: str) -> str:
    return "llama-" + re.sub(r"\W+", "-", label).strip("-")


def scripted(mode: Mode, via_proxy: bool, out: Path, folder: Path, behaviour: LlamaFacts,
             task: Task, **session: Any) -> Session:
    """The CLI's session of ``task``'s user turns against the scripted upstream playing
    ``behaviour``, its client folder at one path for every session (the same paths in
    the prompts), moved into ``folder`` afterwards; ``session``: more keyword arguments
    of :func:`~benchmarks.support.agent_sessions.run_session`."""
    work = out / "client"
    shutil.rmtree(work, ignore_errors=True)
    upstream = Upstream()
    upstream.behaviour = behaviour
    with serve_in_thread(upstream.app) as origin:
        run = run_session(mode, origin, folder, via_proxy=via_proxy, timeout_s=RUN_TIMEOUT_S,
                          prompts=[turn.prompt for turn in task.turns], client_dir=work, **session)
    shutil.move(str(work), str(folder / "client"))
    return run


@dataclass(frozen=True)
class Ratio:
    """A session's tokens against its mode's direct session's: ``value`` (None: no
    reference) of ``basis``: ``evaluated`` (llama-server's counts) or ``sent`` (prompt
    tokens counted from the request bodies: nothing was counted, or llama-server refused
    part of the direct session, so its count is not the session's)."""

    value: float | None
    basis: str = "evaluated"

    def __str__(self) -> str:
        if self.value is None:
            return "–"
        return f"{self.value:.2f}" + ("" if self.basis == "evaluated" else " (sent)")


def ratios(results: list[SessionResult]) -> list[tuple[SessionResult, Ratio]]:
    """Each result with its tokens against its mode's direct session's (the flattened one
    where there is one): evaluated tokens where both were counted and llama-server served
    the whole direct session, else the prompt tokens sent (:class:`Ratio`)."""
    reference = references(results)
    rows = []
    for result in results:
        base = reference.get(result.mode)
        ratio = Ratio(None)
        if base is not None and base.evaluated and not base.refused and result.evaluated is not None:
            ratio = Ratio(result.evaluated / base.evaluated)
        elif base is not None and base.body_tokens:
            ratio = Ratio(result.body_tokens / base.body_tokens, "sent")
        rows.append((result, ratio))
    return rows
