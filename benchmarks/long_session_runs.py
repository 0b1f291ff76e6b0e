"""One long session of ``benchmarks/agent_sessions.py --long``
(:data:`benchmarks.support.long_task.LONG_SESSION`): the CLI's scripted session, directly,
through the session oracle (:mod:`benchmarks.support.oracle_block`) or through a cold
proxy (its upstream's answers carrying a hardware profile's ``timings`` on a learned via:
:mod:`benchmarks.support.timed_answers`), each user turn's task checked, and every model
request counted by the simulated llama-server prompt cache
(:mod:`benchmarks.support.cache_walk`) on llama-server's own token ids
(:mod:`benchmarks.support.llama_tokens`) instead of a real prefill (a 40k-token prefill
takes over an hour on 2 cores), with the tokens of the upstream's answer to it
(:mod:`benchmarks.support.generated_tokens`)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.agent_session_runs import FLATTENED, scripted
from benchmarks.support.agent_behaviour import AgentBehaviour, Task
from benchmarks.support.agent_clients import MODES, AgentRun, Mode
from benchmarks.support.agent_requests import read_request
from benchmarks.support.agent_sessions import MODEL_PATHS, Session
from benchmarks.support.answer_messages import AnswerError, assistant_message
from benchmarks.support.cache_walk import Slot
from benchmarks.support.generated_tokens import GeneratedCounter
from benchmarks.support.github_mcp import canned_result
from benchmarks.support.hardware_profiles import Profile, profile_named
from benchmarks.support.llama_facts import LlamaFacts
from benchmarks.support.llama_replay import fresh_llama
from benchmarks.support.llama_tokens import Prompt, prompt_of, simulate
from benchmarks.support.long_task import LONG_SESSION, checkpoints
from benchmarks.support.oracle_block import OracleRewrite, called_only, known_tools
from benchmarks.support.plain_responses import flat_request, has_namespaces
from benchmarks.support.saved_results import is_saved, saved_or_measured
from benchmarks.support.session_blocks import block_changes, served_by, tool_block
from benchmarks.support.timed_answers import TimedAnswers

#: The simulated slot's context: Claude Code's default mode sends 53,700 tokens of tools
#: and system prompt before a 40k-token history; a 128k-context model holds it.
LONG_CTX = 131072
#: A bound on one session's CLI runs (seconds): 16 runs of 3–60 s on a busy machine.
SESSION_TIMEOUT_S = 2400.0
#: What :func:`turn_results` says of a user turn the session never reached (it stopped
#: before: a run that exited non-zero, or :data:`SESSION_TIMEOUT_S`).
NOT_RUN = "not run: the session stopped before it"


@dataclass
class LongResult:
    """One long session's figures: per user turn whether its task was done (``turns``:
    ``""`` done, else why not) and per model request its turn (1-based), prompt,
    evaluated and ``generated`` tokens (None: not counted), status, tools offered, whether
    the forwarded block changed there (and by the client), and the index of the client
    request it serves (``client``); the proxy's logged ``cache_break`` count; seconds of
    CLI runs and of tokenizing and simulating."""

    mode: str
    via: str
    turns: list[str]
    requests: list[dict[str, Any]] = field(default_factory=list)
    logged_breaks: int | None = None
    cli_s: float = 0.0
    count_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> LongResult:
        return cls(**value)

    @property
    def turns_done(self) -> int:
        return sum(1 for why in self.turns if why == "")

    def evaluated_through(self, turn: int) -> int | None:
        """Evaluated tokens of the requests of turns 1…``turn``; None when a turn's
        requests were not all served (llama-server refused one) or the turn never ran."""
        if turn > len(self.turns) or self.turns[turn - 1] == NOT_RUN:
            return None
        rows = [row for row in self.requests if row["turn"] <= turn]
        if any(row["status"] != 200 for row in rows):
            return None
        return sum(row["evaluated"] for row in rows)

    @property
    def first(self) -> dict[str, Any] | None:
        """The conversation's first request: the first that offers tools (a client's side
        request, a title, may come before it)."""
        return next((row for row in self.requests if row["tools"]), None)

    @property
    def first_evaluated(self) -> int | None:
        return self.first["evaluated"] if self.first else None

    @property
    def last_prompt(self) -> int | None:
        return self.requests[-1]["prompt"] if self.requests else None

    @property
    def grown(self) -> int | None:
        """Tokens the prompt grew by from the conversation's first request to the last:
        the history the session built."""
        if self.first is None or None in (self.first["prompt"], self.last_prompt):
            return None
        return self.last_prompt - self.first["prompt"]  # type: ignore[operator]

    @property
    def refused(self) -> int:
        return sum(1 for row in self.requests if row["status"] != 200)

    def checkpoint_values(self) -> list[int | None]:
        """Cumulative evaluated tokens at :func:`~benchmarks.support.long_task.checkpoints`
        of the session's user turns."""
        return [self.evaluated_through(turn) for turn in checkpoints(len(self.turns))]


def turn_results(session: Session, task: Task) -> list[str]:
    """Per user turn of ``task``: ``""`` when its run exited 0, the MCP server got every
    scripted call of the turn with its name and arguments, and the answer quotes the
    first line of its last result; else what failed (:data:`NOT_RUN` for a turn the
    session never reached, so every session has one entry per turn of the task)."""
    outcome = []
    seen = 0
    for run, turn in zip(session.runs, task.turns, strict=False):
        calls = run.calls[seen:]
        seen = len(run.calls)
        outcome.append(_turn_failure(run, turn.steps, calls))
    return outcome + [NOT_RUN] * (len(task.turns) - len(outcome))


def _turn_failure(run: AgentRun, steps: Any, calls: list[dict[str, Any]]) -> str:
    if run.returncode != 0 or run.timed_out:
        return f"exited {run.returncode}" + (" (timed out)" if run.timed_out else "")
    for step in steps:
        if not any(call["tool"] == step.tool and step.arguments.items() <= call["arguments"].items()
                   for call in calls):
            return f"no {step.tool} call with the task's arguments"
    marker = canned_result(steps[-1].tool, steps[-1].arguments).splitlines()[0]
    if run.answer is None or marker not in run.answer:
        return "the answer does not quote the last result"
    return ""


def _turn_of(path: str, body: Any, task: Task) -> int:
    """The last user turn (1-based) whose prompt the request carries (1: none)."""
    view = read_request(path, body)
    return task.turn_in(view.text if view is not None else "") + 1


def _counted(origin: str, bodies: list[tuple[str, dict[str, Any]]], answers: list[bytes],
             ctx: int, task: Task) -> list[dict[str, Any]]:
    """Each request's turn, prompt and evaluated tokens on a fresh simulated slot, and
    the tokens of the upstream's answer to it (:mod:`benchmarks.support.generated_tokens`)."""
    with httpx.Client() as client:
        prompts = [prompt_of(client, origin, path, body) for path, body in bodies]
        counter = GeneratedCounter(client, origin)
        generated = [_generated(counter, path, body, answer, prompt)
                     for (path, body), answer, prompt in zip(bodies, answers, prompts, strict=True)]
    counted = simulate(prompts, Slot(ctx))
    return [{"path": path, "turn": _turn_of(path, body, task), "status": count.status,
             "prompt": count.prompt, "evaluated": count.evaluated, "generated": tokens,
             "error": count.error, "tools": len(tool_block(body) or []),
             "block_changed": False, "by_client": False}
            for (path, body), count, tokens in zip(bodies, counted, generated, strict=True)]


def _generated(counter: GeneratedCounter, path: str, body: dict[str, Any], answer: bytes,
               prompt: Prompt) -> int | None:
    """The answer's tokens (None: not an answer, e.g. one the client cut short)."""
    try:
        message = assistant_message(path, answer)
    except AnswerError:
        return None
    return counter.count(path, body, message, prompt)


#: The via through a proxy that knew the session (:mod:`benchmarks.support.oracle_block`).
ORACLE = "oracle"
#: The oracle's session counted with exactly the tools it calls (no client tool either).
ORACLE_CALLED = "oracle (called only)"
#: A toolprune via whose upstream answers carry a profile's ``timings``: this, then the name.
LEARNED = "toolprune:"


def learned_via(profile: Profile) -> str:
    """The toolprune via whose upstream reports ``profile``'s speed."""
    return LEARNED + profile.name


def _behaviour(via: str, task: Task, origin: str, ctx: int) -> LlamaFacts:
    """The scripted agent as the upstream of ``via``: with a profile's ``timings`` on a
    learned via's answers."""
    agent: Any = AgentBehaviour(task)
    if via.startswith(LEARNED):
        agent = TimedAnswers(agent, profile_named(via[len(LEARNED):]), origin, ctx)
    return LlamaFacts(agent, origin, ctx)


def _oracle_rewrite(via: str, direct: Path, task: Task) -> OracleRewrite | None:
    """The oracle's rewriting hop (None for another via); the definitions of the tools a
    deferring client loads come from its direct session's captures in ``direct``."""
    if via != ORACLE:
        return None
    captures = direct / "upstream_requests.jsonl"
    bodies = [json.loads(line)["body"] for line in captures.open()] if captures.exists() else []
    return OracleRewrite(list(dict.fromkeys(step.tool for step in task.steps())),
                         known_tools(bodies))


def counted_variants(via: str, bodies: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """The counted forms of a session's bodies: as sent; directly with namespaces also
    :data:`FLATTENED`; the oracle's flattened (llama-server drops a namespace), and also
    :data:`ORACLE_CALLED`."""
    namespaced = any(has_namespaces(body) for _, body in bodies)
    flat = [(path, flat_request(body) if has_namespaces(body) else body) for path, body in bodies]
    if via == ORACLE:
        return [(via, flat), (ORACLE_CALLED, [(path, called_only(body)) for path, body in flat])]
    if via.startswith("toolprune") or not namespaced:
        return [(via, bodies)]
    return [(via, bodies), (FLATTENED, flat)]


def measure_long(mode: Mode, via: str, out: Path, origin: str, ctx: int = LONG_CTX,
                 on_run: Callable[[AgentRun], None] | None = None,
                 task: Task = LONG_SESSION,
                 proxy_settings: Mapping[str, str] | None = None) -> list[LongResult]:
    """Run ``mode``'s long session through ``via`` (``direct``, :data:`ORACLE`,
    ``toolprune`` or a :func:`learned_via`; captures in ``out/<mode>/<via>``) against the
    scripted upstream whose ``/props`` and ``/tokenize`` the llama-server at ``origin``
    answers (``/props`` reporting ``ctx``, Codex's client-search mode told it as its
    model's context), and count its requests on a simulated slot of ``ctx`` tokens
    (:func:`counted_variants`). ``proxy_settings``: the proxy's settings beyond its defaults
    (``TOOLPRUNE_*`` names without the prefix)."""
    via_proxy = via.startswith("toolprune")
    folder = out / mode.name / via
    folder.mkdir(parents=True, exist_ok=True)
    session = scripted(mode, via_proxy, out, folder, _behaviour(via, task, origin, ctx), task,
                       context_window=ctx, session_timeout_s=SESSION_TIMEOUT_S, on_run=on_run,
                       proxy_settings=proxy_settings,
                       rewrite=_oracle_rewrite(via, out / mode.name / "direct", task))
    turns = turn_results(session, task)
    upstream = session.model_exchanges()
    client = [exchange for exchange in session.client_exchanges
              if exchange.request.method == "POST" and exchange.request.path.endswith(MODEL_PATHS)]
    bodies = [(exchange.request.path, exchange.request.json()) for exchange in upstream]
    answers = [bytes(exchange.body) for exchange in upstream]
    changes = block_changes(upstream, client)
    owners = served_by(upstream, client)
    logged = sum(1 for line in session.decisions if line.get("cache_break")) if via_proxy else None
    results = []
    for label, counted_bodies in counted_variants(via, bodies):
        started = time.monotonic()
        rows = _counted(origin, counted_bodies, answers, ctx, task)
        for row, owner in zip(rows, owners, strict=True):
            row["client"] = owner
        for change in changes:
            rows[change.index].update(block_changed=True, by_client=change.by_client)
        results.append(LongResult(mode.name, label, turns, rows, logged,
                                  sum(run.seconds for run in session.runs),
                                  time.monotonic() - started))
    return results


#: The tokenizing llama-server's own context: it evaluates nothing, so a small one will do.
TOKENIZER_CTX = 4096


def run_long(modes: Sequence[str], vias: Sequence[str], measured: Collection[str], out: Path,
             reuse: bool, ctx: int = LONG_CTX, task: Task = LONG_SESSION,
             proxy_settings: Mapping[str, str] | None = None) -> list[LongResult]:
    """The session of ``task`` (the long one by default) of each of ``modes`` through each
    of ``vias`` in order (captures and ``result.json`` in ``out/<mode>/<via>``), with a
    progress bar per session; sessions of a via not in ``measured``, and with ``reuse``
    those already measured, are read from ``out``."""
    from tqdm import tqdm

    out.mkdir(parents=True, exist_ok=True)
    results: list[LongResult] = []
    with fresh_llama(out, "llama-tokenize", TOKENIZER_CTX) as origin:
        for name in modes:
            for via in vias:
                folder = out / name / via

                def measure(name: str = name, via: str = via) -> list[LongResult]:
                    with tqdm(total=len(task.turns), desc=f"{name} {via}", unit="turn",
                              file=sys.stderr) as bar:
                        def advance(run: AgentRun) -> None:
                            bar.update(1)
                            bar.set_postfix(exit=run.returncode, calls=len(run.calls))

                        return measure_long(MODES[name], via, out, origin, ctx,
                                            on_run=advance, task=task,
                                            proxy_settings=proxy_settings)

                skip = via not in measured or (reuse and is_saved(folder))
                results += saved_or_measured(folder, LongResult.from_json,
                                             None if skip else measure)
    return results
