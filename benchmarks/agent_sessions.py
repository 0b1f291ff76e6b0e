"""Whole agent sessions of the four real CLIs, every client mode, directly and through a
cold ``toolprune serve``: what llama-server evaluates over a session, side by side.

Run from the repository root::

    python -m benchmarks.agent_sessions --out DIR      # all modes: hours on 2 busy cores
    python -m benchmarks.agent_sessions --out DIR --vias toolprune   # after a proxy change
    python -m benchmarks.agent_sessions --no-llama     # minutes: the scripted part alone
    python -m benchmarks.agent_sessions --long --out DIR   # the 16-turn session, simulated
    python -m benchmarks.agent_sessions --help

Each mode of :data:`benchmarks.support.agent_clients.MODES` (Claude Code default and with
``ENABLE_TOOL_SEARCH=true``, Codex default and with its client ``tool_search``, Qwen Code,
opencode) runs the task :data:`benchmarks.support.agent_behaviour.SESSION` with the
117-tool GitHub MCP server: the prompt "List the open pull requests in octo/widgets, then
show the files changed in pull request 4711." (``list_pull_requests``, then
``pull_request_read``), then a follow-up user turn typed into the same session with the
CLI's own continue switch (``claude -p --continue``, ``codex exec resume --last``,
``qwen --continue``, ``opencode run --continue``) asking to check for an issue and open
one (``search_issues``, ``create_issue``: tools the first turn did not need). At least six
model turns: four calls and two answers, plus the searches of a client that defers.

1. **Scripted.** The CLI runs against the scripted agent upstream
   (:mod:`benchmarks.support.agent_behaviour`: no small local model calls tools reliably),
   which decides each call and answer; directly, then through a fresh proxy (default
   settings, no ``--warm``) that serves both user turns. The upstream answers what the
   proxy asks llama-server about itself (``/props``, ``/tokenize``) from the llama-server
   that then counts the session (:mod:`benchmarks.support.llama_facts`), so the proxy
   plans as it does in front of llama-server. Both runs use one client folder
   path, so the paths in the clients' prompts are the same. "Task done": every run exited
   0, the MCP server got the four calls with the task's arguments, and each turn's final
   answer quotes its last tool's result; with llama-server, also no request refused.
2. **llama-server.** Every model request that reached the upstream is sent again, in the
   session's order, to a fresh llama-server (:mod:`benchmarks.support.llama_replay`:
   SmolLM2-135M, one slot of ``--ctx`` tokens, prompt cache on, one generated token):
   its own count of the prompt tokens and of those it evaluated (``timings.prompt_n``,
   not served from its cache). Codex's default mode also runs "direct, namespaces
   flattened" (:mod:`benchmarks.support.plain_responses`): llama-server skips the
   ``namespace`` tool type, so sent as it is the MCP tools never reach the prompt.

Per session: the task, the model requests, the prompt tokens and those evaluated (their
sum over the session), evaluated against direct's (against the flattened run for Codex's
default mode), prefix breaks (requests whose cached prefix is shorter than the request
before them: llama-server evaluated part of that request again), requests llama-server
refused, and the wall time (the CLI runs against the scripted upstream plus each
request's time on llama-server: the session's time on this server, generation aside).
``--no-llama`` reports the prompt tokens counted from the request bodies instead
(:mod:`benchmarks.support.body_tokens`).

Each session's captures and figures go to ``--out`` (default: a temporary folder): per
mode and via, the requests of each hop and ``result.json``. Sessions of a via not in
``--vias`` are read from there (a change to the proxy re-runs ``--vias toolprune`` alone,
beside the direct sessions measured before); ``--reuse`` also keeps those of ``--vias``
already there. The captures hold the clients' prompts: never commit them.

``--long``: the long session instead (:data:`benchmarks.support.long_task.LONG_SESSION`:
16 user turns on ``acme/ledger``, 22 calls moving from pull requests through reviews,
issues, CI runs and logs, branches and commits to releases, tool results sized like the
real server's so the history passes 40k tokens), each mode directly, through the session
oracle and through a cold proxy, with a progress bar per session (``--out``/``--reuse``
resume per mode and via, under ``DIR``). Its requests are not prefilled (40k tokens take
over an hour here): each is rendered and tokenized by llama-server itself
(``/apply-template``, ``/tokenize``) and counted by the simulation of its prompt cache
(:mod:`benchmarks.support.cache_walk`, checked against real replays by
``tests/integration/test_cache_walk_real.py``) on one slot of ``--ctx`` tokens (default
131,072 here). Reported: cumulative evaluated tokens at a quarter, half, three quarters
and the end of the user turns, direct against toolprune, the first request's, the
requests whose forwarded tool block changed (and whether the client changed its own
there), the last request's prompt, and each turn's task
(:mod:`benchmarks.long_session_runs`). ``--simulate``: the two-turn sessions counted the
same way (the same tables, on a slot of ``--ctx`` tokens, default 65,536), in minutes.

**Seconds** (``--long`` and ``--simulate``; :mod:`benchmarks.session_seconds_report`).
Per session, beside the evaluated prompt tokens: the tokens the model generated (every
upstream answer, hidden rounds and bridge calls included, as the chat template writes it
after the request's prompt, counted by llama-server's tokenizer:
:mod:`benchmarks.support.generated_tokens`), the requests that reached the upstream, and
the session's seconds on each hardware profile of
:mod:`benchmarks.support.hardware_profiles` (evaluated ÷ prefill + generated ÷ decode +
0.05 s per request); the server in use measured none (nothing was prefilled). Per
profile: direct, the **session oracle** (via ``oracle``: the client's requests with
``tools`` reduced to its own tools, its search aside, and exactly the MCP tools the
session calls: :mod:`benchmarks.support.oracle_block`; for a client that defers its MCP
tools the definitions come from its direct session's captures, so run ``direct`` first),
toolprune with the server's speed unknown, and toolprune that learned the profile's
speed (``--profiles all`` or ``NAME,…``: one more toolprune session per profile whose
upstream answers carry llama-server's ``timings`` for it,
:mod:`benchmarks.support.timed_answers`; only Chat Completions and streamed Responses
carry them, as from llama-server), each against direct and the oracle, and the first
request's prompt against direct's. Each user turn's wait (the seconds before the
client's first token of each of its requests, hidden rounds included, summed over the
turn: :mod:`benchmarks.support.session_seconds`): median and longest per session and
profile, with the median turn's seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.agent_session_report import plot, render
from benchmarks.agent_session_runs import DEFAULT_CTX, SessionResult, measure_session, ratios
from benchmarks.long_session_report import render as render_long
from benchmarks.long_session_runs import LEARNED, LONG_CTX, ORACLE, learned_via, run_long
from benchmarks.session_seconds_report import render as render_seconds
from benchmarks.support.agent_behaviour import SESSION
from benchmarks.support.agent_clients import MODES
from benchmarks.support.hardware_profiles import PROFILES, profiles_chosen
from benchmarks.support.long_task import LONG_SESSION
from benchmarks.support.packages import require
from benchmarks.support.saved_results import is_saved, saved_or_measured
from benchmarks.support.text_tables import load_str

VIAS = ("direct", ORACLE, "toolprune")
#: The vias of the two-turn sessions prefilled on llama-server (no oracle there).
REPLAYED_VIAS = ("direct", "toolprune")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--vias", nargs="+", choices=VIAS, default=list(VIAS),
                        help="run these; the others are read from --out")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for captures and results (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the sessions of --vias whose result.json is in --out")
    parser.add_argument("--no-llama", action="store_true",
                        help="scripted sessions only; prompt tokens from the request bodies")
    parser.add_argument("--ctx", type=int, default=None,
                        help=f"llama-server's context, one slot (tokens; default {DEFAULT_CTX:,},"
                             f" {LONG_CTX:,} with --long)")
    parser.add_argument("--long", action="store_true",
                        help="the 16-turn session, counted by the simulated prompt cache")
    parser.add_argument("--simulate", action="store_true",
                        help="count the two-turn sessions by the simulated prompt cache too "
                             "(minutes, not hours of prefill; checked against real replays)")
    parser.add_argument("--profiles", default="none", metavar="all|NAME,…",
                        help="with --long or --simulate: a toolprune via per hardware "
                             "profile whose upstream answers carry its llama-server timings "
                             "(all, none, or of: " + ", ".join(p.name for p in PROFILES) + ")")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a proxy setting beyond the defaults, TOOLPRUNE_ name without "
                             "its prefix (late_tools=block, proactive_loads=true); repeatable; "
                             "with --long or --simulate")
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here (PNG)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    require("python -m benchmarks.agent_sessions", "mcp", *(["matplotlib"] if args.plot else []))
    out = args.out or Path(tempfile.mkdtemp(prefix="agent-sessions-"))
    print(f"captures: {out}\n{load_str()}", flush=True)
    if args.long or args.simulate:
        started = time.monotonic()
        if any("=" not in setting for setting in args.setting):
            parser.error("--setting takes NAME=VALUE")
        settings = dict(setting.split("=", 1) for setting in args.setting)
        try:
            profiles = profiles_chosen(args.profiles)
        except KeyError as error:
            parser.error(str(error))
        vias = [*VIAS, *(learned_via(profile) for profile in profiles)]
        measured = [via for via in vias if via in args.vias
                    or via.startswith(LEARNED) and "toolprune" in args.vias]
        long_results = run_long(args.modes, vias, measured, out, args.reuse,
                                args.ctx or (LONG_CTX if args.long else DEFAULT_CTX),
                                task=LONG_SESSION if args.long else SESSION,
                                proxy_settings=settings)
        print(f"\n{load_str()}; {time.monotonic() - started:,.0f} s\n\n"
              f"{render_long(long_results, markdown=args.markdown)}\n\n"
              f"{render_seconds(long_results, markdown=args.markdown)}\n", flush=True)
        return 0
    results: list[SessionResult] = []
    for name in args.modes:
        for via in REPLAYED_VIAS:
            folder = out / name / via

            def measure(name: str = name, via: str = via) -> list[SessionResult]:
                print(f"  {name} {via} …", file=sys.stderr, flush=True)
                return measure_session(MODES[name], via == "toolprune", out,
                                       ctx=None if args.no_llama else args.ctx or DEFAULT_CTX)

            skip = via not in args.vias or (args.reuse and is_saved(folder))
            results += saved_or_measured(folder, SessionResult.from_json,
                                         None if skip else measure)
    rows = ratios(results)
    print(f"\n{load_str()}\n\n{render(rows, markdown=args.markdown)}\n", flush=True)
    (out / "results.json").write_text(json.dumps([r.to_json() for r in results], indent=1))
    if args.plot is not None:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
