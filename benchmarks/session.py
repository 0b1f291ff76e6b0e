"""An agent session against a real llama-server: direct vs through ``toolprune serve``,
side by side, counting what the upstream's prefix (KV) cache saves.

Run from the repository root::

    PYTHONPATH=. python benchmarks/session.py                 # ~10-40 minutes on 2 cores
    PYTHONPATH=. python benchmarks/session.py --skip-large --variant refresh_rank=0
    PYTHONPATH=. python benchmarks/session.py --skip-large --parallel 2 --order long \
        --pin-direct                    # two slots: pinning each conversation (id_slot)
    PYTHONPATH=. python benchmarks/session.py --skip-large --oracle   # + the oracle's floor
    PYTHONPATH=. python benchmarks/session.py --skip-large --late-oracle   # + schemas after history
    PYTHONPATH=. python benchmarks/session.py --help

One GitHub agent (one system prompt, one catalogue) holds two conversations, interleaved
``A1 A2 B1 A3 B2 A4`` (``--order long``: then ``B3 A5``): the user asks, the agent calls a tool, the tool result comes back,
the user asks again. The model (SmolLM2-135M) rarely emits tool calls, so the assistant's
``tool_calls`` and the tool results are scripted into the history as the agent would send
them; the model answers with ``max_tokens`` tokens (default 1: prefill is what is measured).

Catalogues: the first :data:`FITTING_SIZE` (25) GitHub MCP tools (whole prompt within
SmolLM2's 8,192 tokens) sent directly and through the proxy, and the whole GitHub MCP catalogue (117 tools,
~33k tokens: only through the proxy). Each run (direct, proxy at default settings, one
proxy per ``--variant`` of settings, proxy 117) starts its own llama-server (same flags)
and proxy, so none inherits another's cache. ``--parallel N``: llama-server with ``-np N``
and N × 8,192 tokens of context (8,192 a slot); ``--pin-direct`` adds a direct run in which
each conversation names its own slot (``id_slot``: A 0, B 1); ``--oracle`` adds a direct run
whose tool block holds exactly the tools each turn calls, appended when first needed: the
fewest tokens any pruning can evaluate while the template renders tools before the history.
``--late-oracle`` adds a direct run that never changes its tool block (the first turn's tools
and two meta-tools, ``load_tools`` and ``call_tool``) and delivers each later tool's schema
after the history, as a ``load_tools`` call and its result kept in place on later turns:
the floor of pruning that loads tools as messages instead of growing ``tools``; with
``--pin-direct`` also with each conversation pinned to its slot.

Per turn: ``prompt`` (``usage.prompt_tokens``), ``eval`` (``timings.prompt_n``, tokens
evaluated: prefill), ``cached`` (``timings.cache_n``), TTFT (first streamed token), the
proxy's forwarded tools and its own expectation (``expected_evaluated_tokens`` of the
decision log), and ``new+adm``: tokens of the turn's new messages plus the schemas of the
tools forwarded that the previous request did not forward (new to the one slot's cache;
exact, with llama-server's ``/apply-template`` and ``/tokenize``). ``over`` = ``eval`` − ``new+adm``: what the turn evaluated beyond that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import Server, clean_env, free_port, start_server
from benchmarks.session_script import (
    FITTING_SIZE,
    ORDERS,
    SLOT_CTX,
    SYSTEM,
    late_oracle_plan,
    messages_for,
    oracle_blocks,
    user,
)
from benchmarks.support.data import REAL_CATALOGS
from benchmarks.support.llama import local_llama
from benchmarks.support.text_tables import load_str, n, secs, table
from benchmarks.ttft_requests import ProxyLog, Result, stream_chat, wait_ok

CATALOG = REAL_CATALOGS / "github_mcp_server.json"
MODEL = "SmolLM2-135M-Instruct"
#: llama-server flags of every run (besides ``deploy/local_llama.py``'s: one slot, 8,192
#: tokens): ``--cache-reuse 256`` lets a tool block that lost tools reuse what follows.
LLAMA_FLAGS = ("--cache-reuse", "256")
# --- processes -----------------------------------------------------------------------------
@contextmanager
def running(name: str, argv: list[str], log_dir: Path, env: dict[str, str], ready: str) -> Iterator[Server]:
    """A server process on a free port, once ``ready`` answers 200; stopped on exit."""
    port = free_port()
    server = start_server(name, [part.replace("{port}", str(port)) for part in argv], port, log_dir, env)
    try:
        with httpx.Client() as client:
            wait_ok(client, server, ready)
        yield server
    finally:
        server.stop()


def llama_server(log_dir: Path, name: str, parallel: int) -> AbstractContextManager[Server]:
    argv = local_llama().llama_server_command(
        0, ctx=SLOT_CTX * parallel, parallel=parallel, extra=list(LLAMA_FLAGS)
    )
    argv[argv.index("--port") + 1] = "{port}"
    return running(name, argv, log_dir, clean_env(), "/health")


def proxy_server(
    log_dir: Path, name: str, upstream: str, settings: dict[str, str] | None = None
) -> AbstractContextManager[Server]:
    argv = [sys.executable, "-m", "proxy.cli.main", "serve", "--port", "{port}",
            "--upstream", upstream + "/v1"]
    env = clean_env()
    env.update({f"TOOLPRUNE_{key.upper()}": value for key, value in (settings or {}).items()})
    # Default settings, except that the warm-up request waits for the catalogue's index
    # (by default a cold catalogue is forwarded whole after 1.5 s while it is indexed).
    env["TOOLPRUNE_INDEX_TIMEOUT_S"] = "900"
    return running(name, argv, log_dir, env, "/healthz")


def warm_proxy(client: httpx.Client, proxy: str, tools: list[Any]) -> None:
    """Index the catalogue in the proxy without touching the upstream's cache: a request of
    another agent (other system prompt) that llama-server rejects before prefill."""
    body = {"model": MODEL, "messages": [{"role": "system", "content": "warm-up"}, user("warm up")],
            "tools": tools, "max_tokens": 1, "response_format": {"type": "no-such-format"}}
    client.post(proxy + "/v1/chat/completions", json=body, timeout=900)


# --- exact token counts --------------------------------------------------------------------
class Tokens:
    """Exact token counts with the upstream's template and tokenizer."""

    def __init__(self, client: httpx.Client, origin: str) -> None:
        self.client = client
        self.origin = origin

    def text(self, text: str) -> int:
        response = self.client.post(self.origin + "/tokenize", json={"content": text}, timeout=300)
        response.raise_for_status()
        return len(response.json()["tokens"])

    def prompt(self, messages: list[dict[str, Any]], tools: list[Any] | None = None) -> int:
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        response = self.client.post(self.origin + "/apply-template", json=body, timeout=300)
        response.raise_for_status()
        return self.text(response.json()["prompt"])

    def tool(self, definition: Any) -> int:
        return self.text("\n" + json.dumps(definition, ensure_ascii=False))

    def new_messages(
        self, conversation: str, turn: int, loaded: dict[tuple[str, int], list[Any]] | None = None
    ) -> int:
        """Tokens of the messages this turn adds (the conversation's first turn: all but
        the system prompt, which precedes the tools and is shared by the agent); with
        ``loaded``, its ``load_tools`` exchange included."""
        now = self.prompt(messages_for(conversation, turn, loaded))
        before = (messages_for(conversation, turn - 1, loaded) if turn
                  else [{"role": "system", "content": SYSTEM}])
        return now - self.prompt(before)


# --- the session ---------------------------------------------------------------------------
@dataclass
class Turn:
    label: str
    result: Result
    new_tokens: int
    admitted_tokens: int = 0


def run_session(
    client: httpx.Client, base_url: str, tools: list[Any], max_tokens: int, tokens: Tokens,
    proxy_log: ProxyLog | None, by_name: dict[str, Any], order: list[tuple[str, int]],
    pin: bool = False, blocks: list[list[str]] | None = None,
    loaded: dict[tuple[str, int], list[Any]] | None = None,
) -> list[Turn]:
    """``pin``: each conversation names its own slot (``id_slot``: A 0, B 1). ``blocks``:
    per turn, the names of the tools sent instead of ``tools`` (the oracle's). ``loaded``:
    definitions delivered in the history instead (:func:`messages_for`; the late oracle)."""
    turns = []
    # The client tools of the previous request: what the slot holds (unpinned, every
    # request of the agent goes to one slot).
    held: list[str] = []
    for step, (conversation, index) in enumerate(order):
        label = f"{conversation}{index + 1}"
        sent = tools if blocks is None else [by_name[name] for name in blocks[step]]
        body = {
            "model": MODEL, "messages": messages_for(conversation, index, loaded), "tools": sent,
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True},
        }
        if pin:
            body["id_slot"] = "AB".index(conversation)
        if proxy_log is not None:
            proxy_log.decisions()
        outcome = stream_chat(client, base_url, body)
        admitted = 0
        if proxy_log is not None and outcome.tools_header is not None:
            outcome.decision = proxy_log.next_decision()
            forwarded = list((outcome.decision or {}).get("reasons", {}))
            admitted = sum(tokens.tool(by_name[name]) for name in forwarded if name not in held)
            held = forwarded
        if blocks is not None:
            outcome.tools_header = f"{len(sent)}/{len(tools)}"
            admitted = sum(tokens.tool(by_name[name]) for name in blocks[step] if name not in held)
            held = blocks[step]
        turns.append(Turn(label, outcome, tokens.new_messages(conversation, index, loaded), admitted))
        print(f"  [{label}] {outcome.status} prompt={outcome.prompt_tokens} eval={outcome.prompt_n} "
              f"cached={outcome.cache_n} ttft={secs(outcome.ttft_s)}", file=sys.stderr, flush=True)
    return turns


def first_token_s(result: Result) -> float | None:
    """TTFT; when the one token generated was empty (end of turn), the response time."""
    return result.ttft_s if result.ttft_s is not None else result.total_s


def decision_field(turn: Turn, key: str) -> Any:
    return (turn.result.decision or {}).get(key)


def report(title: str, direct: list[Turn] | None, proxy: list[Turn], label: str = "proxy") -> None:
    """``proxy``: the run compared with ``direct`` (its columns are named ``label``)."""
    print(f"\n== {title} ==")
    headers = ["turn"]
    if direct is not None:
        headers += ["direct prompt", "direct eval", "direct TTFT s"]
    headers += [f"{label} tools", f"{label} prompt", f"{label} eval", f"{label} TTFT s",
                "expected eval", "new+adm", "over"]
    rows = []
    totals = {"direct": 0, "proxy": 0}
    for i, turn in enumerate(proxy):
        row = [turn.label]
        if direct is not None:
            d = direct[i].result
            row += [n(d.prompt_tokens) if d.status == "ok" else d.status, n(d.prompt_n),
                    secs(first_token_s(d))]
            totals["direct"] += d.prompt_n or 0
        p = turn.result
        bound = turn.new_tokens + turn.admitted_tokens
        over = (p.prompt_n - bound) if p.prompt_n is not None else None
        row += [p.tools_header or "–", n(p.prompt_tokens) if p.status == "ok" else p.status,
                n(p.prompt_n), secs(first_token_s(p)), n(decision_field(turn, "expected_evaluated_tokens")),
                n(bound), n(over)]
        totals["proxy"] += p.prompt_n or 0
        rows.append(row)
    total = ["total"]
    if direct is not None:
        total += ["", n(totals["direct"]), secs(sum(first_token_s(t.result) or 0 for t in direct))]
    total += ["", "", n(totals["proxy"]), secs(sum(first_token_s(t.result) or 0 for t in proxy)),
              "", "", ""]
    rows.append(total)
    print(table(headers, rows))
    if direct is not None and totals["direct"]:
        first_d, first_p = direct[0].result.prompt_n or 0, proxy[0].result.prompt_n or 0
        print(f"{label}/direct evaluated: total {totals['proxy'] / totals['direct']:.2f}, "
              f"first turn {first_p / max(first_d, 1):.2f}")
    later = [t for t in proxy[1:] if t.result.prompt_n is not None]
    worst = max(later, key=lambda t: t.result.prompt_n - t.new_tokens - t.admitted_tokens, default=None)
    if worst is not None:
        print(f"after the first turn, most evaluated beyond new messages + admitted schemas: "
              f"{worst.result.prompt_n - worst.new_tokens - worst.admitted_tokens:,} tokens ({worst.label})")
    failed = [t.label for t in proxy if t.result.status != "ok"]
    print(f"every {label} turn succeeded" if not failed else f"{label} turns failed: {failed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=1)
    parser.add_argument("--skip-large", action="store_true", help="no 117-tool run")
    parser.add_argument(
        "--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
        help="also run the fitting catalogue through a proxy with these settings "
        "(e.g. refresh_rank=0); repeatable",
    )
    parser.add_argument(
        "--parallel", type=int, default=1,
        help=f"llama-server slots (-np; {SLOT_CTX:,} tokens of context each)",
    )
    parser.add_argument("--order", choices=sorted(ORDERS), default="short",
                        help="short: A1 A2 B1 A3 B2 A4; long: ... B3 A5")
    parser.add_argument("--pin-direct", action="store_true",
                        help="also run direct with each conversation naming its slot (id_slot)")
    parser.add_argument("--oracle", action="store_true",
                        help="also run direct with an oracle's tool block: exactly the tools "
                        "each turn calls, appended as first needed (the floor of any pruning "
                        "whose tools precede the history)")
    parser.add_argument("--late-oracle", action="store_true",
                        help="also run direct with the first turn's tools fixed and every later "
                        "tool's schema delivered after the history as a load_tools result "
                        "(the floor of pruning that never changes the tool block; with --pin-direct, "
                        "also pinned)")
    args = parser.parse_args(argv)
    order = ORDERS[args.order]
    catalogue = json.loads(CATALOG.read_text())
    by_name = {tool["function"]["name"]: tool for tool in catalogue}
    fitting = catalogue[:FITTING_SIZE]
    print(f"[{load_str()}] llama-server flags: {' '.join(LLAMA_FLAGS)}, -np {args.parallel}, "
          f"order {' '.join(f'{c}{i + 1}' for c, i in order)}")
    with tempfile.TemporaryDirectory(prefix="toolprune-session-") as tmp, httpx.Client() as client:
        log_dir = Path(tmp)
        with llama_server(log_dir, "llama-direct", args.parallel) as llama:
            tokens = Tokens(client, llama.origin)
            size = max(  # each conversation's last turn
                tokens.prompt(messages_for(c, max(i for d, i in order if d == c)), fitting)
                for c in sorted({c for c, _ in order})
            )
            print(f"fitting catalogue: {len(fitting)} tools, longest direct prompt {size:,} tokens")
            direct = run_session(client, llama.origin + "/v1", fitting, args.max_tokens, tokens,
                                 None, by_name, order)
        if args.pin_direct:
            with llama_server(log_dir, "llama-direct-pinned", args.parallel) as llama:
                pinned = run_session(client, llama.origin + "/v1", fitting, args.max_tokens,
                                     Tokens(client, llama.origin), None, by_name, order, pin=True)
            report("direct, each conversation pinned to its slot (id_slot)", direct, pinned,
                   label="pinned")
        if args.oracle:
            with llama_server(log_dir, "llama-oracle", args.parallel) as llama:
                oracle = run_session(client, llama.origin + "/v1", fitting, args.max_tokens,
                                     Tokens(client, llama.origin), None, by_name, order,
                                     blocks=oracle_blocks(order))
            report("oracle: exactly each turn's tools, appended to one block", direct, oracle,
                   label="oracle")
        if args.late_oracle:
            block, loaded = late_oracle_plan(order, by_name)
            with llama_server(log_dir, "llama-late-oracle", args.parallel) as llama:
                late = run_session(client, llama.origin + "/v1", block, args.max_tokens,
                                   Tokens(client, llama.origin), None, by_name, order, loaded=loaded)
            report("late oracle: first turn's tools fixed, later tools loaded after the history "
                   "(new+adm counts the load exchange as new messages)", direct, late, label="late")
            if args.pin_direct:
                with llama_server(log_dir, "llama-late-oracle-pinned", args.parallel) as llama:
                    late = run_session(client, llama.origin + "/v1", block, args.max_tokens,
                                       Tokens(client, llama.origin), None, by_name, order,
                                       pin=True, loaded=loaded)
                report("late oracle, each conversation pinned to its slot (id_slot)", direct, late,
                       label="late pinned")
        runs = [(f"{len(fitting)} GitHub tools, default settings", fitting, direct, {})]
        for variant in args.variant:
            settings = dict(item.split("=", 1) for item in variant.split(","))
            runs.append((f"{len(fitting)} GitHub tools, {variant}", fitting, direct, settings))
        if not args.skip_large:
            runs.append((f"{len(catalogue)} GitHub tools (direct: over the context)", catalogue, None, {}))
        for title, tools, direct_turns, settings in runs:
            with llama_server(log_dir, "llama-proxy", args.parallel) as llama, \
                    proxy_server(log_dir, "proxy", llama.origin, settings) as proxy:
                tokens = Tokens(client, llama.origin)
                warm_proxy(client, proxy.origin, tools)
                proxy_log = ProxyLog(proxy.log_path)
                proxy_log.decisions()
                turns = run_session(client, proxy.origin + "/v1", tools, args.max_tokens, tokens,
                                    proxy_log, by_name, order)
            report(title, direct_turns, turns)
    print(f"[{load_str()}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
