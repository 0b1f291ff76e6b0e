"""The real coding-agent CLIs, directly and through a cold ``toolprune serve``: what reaches
the upstream per client, side by side.

Run from the repository root::

    python -m benchmarks.real_clients                        # ~5 minutes: scripted, tokens counted
    python -m benchmarks.real_clients --upstream llama --modes claude-default opencode-default
    python -m benchmarks.real_clients --help

Each mode of :data:`benchmarks.support.agent_clients.MODES` (Claude Code default and with
``ENABLE_TOOL_SEARCH=true``, Codex default and with its client ``tool_search``, Qwen Code,
opencode) runs once directly and once through a fresh proxy (default settings, no
``--warm``), with the 117-tool GitHub MCP server and the prompt "List the open pull
requests in octo/widgets", in front of

* ``scripted`` (default): the scripted agent upstream (:mod:`benchmarks.support.agent_behaviour`),
  which calls the tool or the offered search, then answers: does the task get done? Then
  every request that reached it is sent again to a llama-server (SmolLM2-135M by
  ``deploy/local_llama.py``) started with a context of :data:`COUNTING_CTX` tokens, which
  refuses each longer prompt before any prefill with its exact token count
  (``error.n_prompt_tokens``; it renders Messages and Responses requests itself, skipping
  the tool types it does not know): the prompt tokens of the same conversation on
  llama-server, in seconds, whatever the machine's load.
* ``llama``: the CLIs against a real llama-server (a fresh server per run, ``-c 32768 -np 1
  --override-kv llama.context_length=int:32768``: one slot of the whole 32,768 tokens; plain
  ``-c 32768`` gives 4 slots capped at the model's 8,192), SmolLM2 driving the session.
  Slow: SmolLM2 prefilled 20 tokens/s on this 2-core machine at a load average of 10 (an
  8,000-token request: 7 minutes), and Claude Code and opencode ask for up to 32,000
  tokens an answer.

Per run: the CLI's exit code, whether the MCP tool was called and its result quoted
(scripted), the model requests that reached the upstream and how many it refused (4xx),
the tools and KB of the first request that offers tools (the agent's own, not a title or
side request) and the KB of all, and the prompt tokens on llama-server of that first
request and of the session (``usage``/``timings``, or the ``n_prompt_tokens`` of a
refusal; ``llama`` adds the tokens evaluated, ``timings.prompt_n``: prefill, prompt-cache
hits excluded). A first request over 32,768 tokens is one llama-server at ``-c 32768``
refuses; "llama refuses" counts the requests it refuses for another reason (an input item
it cannot read: their tokens are not in the totals). Captures (every
request, the proxy's decisions) go to ``--out`` (default: a temporary folder); they hold the
clients' prompts and are not to be committed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import clean_env
from benchmarks.session import running
from benchmarks.support.agent_behaviour import AgentBehaviour
from benchmarks.support.agent_clients import MODES
from benchmarks.support.agent_sessions import Session, run_session
from benchmarks.support.github_mcp import PULL_REQUESTS_MARKER
from benchmarks.support.llama import local_llama
from benchmarks.support.packages import require
from benchmarks.support.recording_relay import Exchange
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.text_tables import load_str, n, table
from benchmarks.support.upstream import Upstream

#: llama-server's context: one slot of 32,768 tokens (SmolLM2 is trained to 8,192).
LLAMA_CTX = 32768
#: The counting llama-server's context: every agent request is longer, so each is refused
#: with its token count before any prefill.
COUNTING_CTX = 256
LLAMA_FLAGS = ("--override-kv", f"llama.context_length=int:{LLAMA_CTX}")
LLAMA_MODEL = "SmolLM2-135M-Instruct"
SCRIPTED_TIMEOUT_S = 240.0
#: A CLI run against llama-server: SmolLM2 prefills a 20k-token prompt in tens of seconds
#: on 2 busy cores, and a CLI may take several turns.
LLAMA_TIMEOUT_S = 600.0


@dataclass
class Row:
    """One run's figures (None: not measured)."""

    mode: str
    via: str
    returncode: int | None
    called: bool
    quoted: bool
    requests: int
    refused: int
    first_tools: int | None
    first_kb: float | None
    total_kb: float
    first_prompt: int | None
    total_prompt: int | None
    total_evaluated: int | None
    #: Requests llama-server refused for another reason than their length (None: not counted).
    invalid: int | None
    seconds: float


def tools_in(body: dict[str, Any]) -> int:
    """Tools a model request offers: functions, each member of a Responses namespace, and
    each other declared tool (a search tool, a hosted tool)."""
    count = 0
    for tool in body.get("tools") or []:
        members = tool.get("tools") if isinstance(tool, dict) and tool.get("type") == "namespace" else None
        count += len(members) if isinstance(members, list) else 1
    return count


def json_objects(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of a response: the body, or each SSE ``data:`` line's."""
    try:
        whole = json.loads(body)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    found = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            try:
                value = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def prompt_tokens(answer: bytes) -> tuple[int | None, int | None]:
    """(prompt tokens, tokens evaluated) of one llama-server answer, from its ``timings``
    (``prompt_n`` + ``cache_n``), else ``usage`` (``prompt_tokens`` or ``input_tokens`` +
    cached), else a refusal's ``error.n_prompt_tokens`` (evaluated 0)."""
    prompt = evaluated = None
    for value in json_objects(answer):
        for holder in (value, value.get("response"), value.get("message")):
            if not isinstance(holder, dict):
                continue
            timings, usage = holder.get("timings"), holder.get("usage")
            if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
                evaluated = timings["prompt_n"]
                prompt = evaluated + int(timings.get("cache_n") or 0)
            elif isinstance(usage, dict) and prompt is None:
                tokens = usage.get("prompt_tokens", usage.get("input_tokens"))
                if isinstance(tokens, int) and tokens > 0:
                    prompt = tokens + int(usage.get("cache_read_input_tokens") or 0)
        error = value.get("error")
        if isinstance(error, dict) and isinstance(error.get("n_prompt_tokens"), int):
            prompt, evaluated = error["n_prompt_tokens"], 0
    return prompt, evaluated


Tokens = list[tuple[int | None, int | None]]


def count_tokens(counter: str, exchanges: list[Exchange]) -> Tokens:
    """Each request's prompt tokens on the counting llama-server at ``counter`` (sent
    unstreamed to the same path; refused before prefill with its count)."""
    counted: Tokens = []
    with httpx.Client(timeout=120) as client:
        for exchange in exchanges:
            body = {**exchange.request.json(), "stream": False}
            answer = client.post(counter + exchange.request.path, json=body)
            counted.append((prompt_tokens(answer.content)[0], None))
    return counted


def row_of(session: Session, tokens: Tokens | None) -> Row:
    """One run's figures; ``tokens``: per model request (None: not measured)."""
    exchanges = session.model_exchanges()
    bodies = [exchange.request.json() for exchange in exchanges]
    first = next((i for i, body in enumerate(bodies) if body.get("tools")), None)
    prompts = [p for p, _ in tokens or [] if p is not None]
    evaluated = [e for _, e in tokens or [] if e is not None]
    run = session.run
    return Row(
        mode=run.mode.name, via="toolprune" if session.via_proxy else "direct",
        returncode=run.returncode, called=bool(run.called("list_pull_requests")),
        quoted=run.answer is not None and PULL_REQUESTS_MARKER in run.answer,
        requests=len(exchanges),
        refused=sum(1 for e in exchanges if e.status is not None and 400 <= e.status < 500),
        first_tools=None if first is None else tools_in(bodies[first]),
        first_kb=None if first is None else len(exchanges[first].request.body) / 1000,
        total_kb=sum(len(e.request.body) for e in exchanges) / 1000,
        first_prompt=tokens[first][0] if tokens and first is not None else None,
        total_prompt=sum(prompts) if prompts else None,
        total_evaluated=sum(evaluated) if evaluated else None,
        invalid=None if tokens is None else sum(1 for p, _ in tokens if p is None),
        seconds=run.seconds,
    )


@contextmanager
def scripted_upstream() -> Iterator[str]:
    upstream = Upstream()
    upstream.behaviour = AgentBehaviour()
    with serve_in_thread(upstream.app) as origin:
        yield origin


@contextmanager
def llama_upstream(log_dir: Path, ctx: int, extra: tuple[str, ...] = ()) -> Iterator[str]:
    argv = local_llama().llama_server_command(0, ctx=ctx, parallel=1, extra=list(extra))
    argv[argv.index("--port") + 1] = "{port}"
    with running("llama-server", argv, log_dir, clean_env(), "/health") as server:
        yield server.origin


def measure(kind: str, modes: list[str], out: Path) -> list[Row]:
    sessions = []
    for name in modes:
        for via_proxy in (False, True):
            label = f"{name}-{'toolprune' if via_proxy else 'direct'}"
            print(f"  {kind}/{label} …", file=sys.stderr, flush=True)
            folder = out / kind / label
            folder.mkdir(parents=True, exist_ok=True)
            if kind == "scripted":
                with scripted_upstream() as origin:
                    sessions.append(run_session(MODES[name], origin, folder, via_proxy=via_proxy,
                                                timeout_s=SCRIPTED_TIMEOUT_S))
            else:
                with llama_upstream(folder, LLAMA_CTX, LLAMA_FLAGS) as origin:
                    session = run_session(MODES[name], origin, folder, via_proxy=via_proxy,
                                          model=LLAMA_MODEL, timeout_s=LLAMA_TIMEOUT_S)
                tokens = [prompt_tokens(bytes(e.body)) for e in session.model_exchanges()]
                sessions.append((session, tokens))
    if kind == "llama":
        return [row_of(session, tokens) for session, tokens in sessions]
    print("  counting tokens on llama-server …", file=sys.stderr, flush=True)
    with llama_upstream(out / kind, COUNTING_CTX) as counter:
        return [row_of(session, count_tokens(counter, session.model_exchanges()))
                for session in sessions]


def kb(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def render(kind: str, rows: list[Row]) -> str:
    if kind == "scripted":
        headers = ["client/mode", "via", "exit", "MCP call", "result quoted", "requests",
                   "tools (1st)", "KB (1st)", "KB (all)", "prompt tok (1st)", "prompt tok (all)",
                   "llama refuses", "s"]
        body = [[r.mode, r.via, n(r.returncode), "yes" if r.called else "no",
                 "yes" if r.quoted else "no", str(r.requests), n(r.first_tools),
                 kb(r.first_kb), kb(r.total_kb), n(r.first_prompt), n(r.total_prompt),
                 n(r.invalid), f"{r.seconds:.0f}"] for r in rows]
        return table(headers, body, left=2)
    headers = ["client/mode", "via", "exit", "requests", "4xx", "tools (1st)", "KB (1st)",
               "KB (all)", "prompt tok (1st)", "prompt tok (all)", "evaluated (all)", "s"]
    body = [[r.mode, r.via, n(r.returncode), str(r.requests), str(r.refused), n(r.first_tools),
             kb(r.first_kb), kb(r.total_kb), n(r.first_prompt), n(r.total_prompt),
             n(r.total_evaluated), f"{r.seconds:.0f}"] for r in rows]
    return table(headers, body, left=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", choices=["scripted", "llama", "both"], default="scripted")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the captures (default: a temporary folder)")
    args = parser.parse_args(argv)
    require("python -m benchmarks.real_clients", "mcp")
    out = args.out or Path(tempfile.mkdtemp(prefix="real-clients-"))
    kinds = ["scripted", "llama"] if args.upstream == "both" else [args.upstream]
    print(f"captures: {out}\n{load_str()}", flush=True)
    for kind in kinds:
        rows = measure(kind, args.modes, out)
        title = ("scripted agent upstream; prompt tokens of its requests on llama-server"
                 if kind == "scripted" else f"llama-server ({LLAMA_MODEL}, -c {LLAMA_CTX} -np 1)")
        print(f"\n## {title}\n\n{render(kind, rows)}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
