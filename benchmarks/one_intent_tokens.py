"""One-intent requests must not pay for eight tools: first-turn prompt tokens on
llama-server, measured with its own template and tokenizer.

"List the open pull requests in octo/widgets" needs ``list_pull_requests``. The oracle
prompt sends that tool only; the proxy's prompt sends what ``proxy.planner.Planner``
forwards at the given settings (fresh conversation, ``Turn.forwarded_entries``, meta-tool
included), at 30 GitHub MCP tools (``list_pull_requests`` and the first 29 others) and at
all 117. Prompt tokens come from the upstream's ``POST /apply-template`` +
``POST /tokenize`` (equal to ``usage.prompt_tokens``). Variants: the defaults, and
``--dominance-margin`` values (adaptive k: candidates within that margin of the best).

    PYTHONPATH=. python benchmarks/one_intent_tokens.py --upstream http://127.0.0.1:8080 \
        [--margins 0.15,0.3] [--json]
    PYTHONPATH=. python benchmarks/one_intent_tokens.py --oracle-tokens 643   # no server

Without a server, ``--oracle-tokens N`` (the oracle prompt measured on llama-server: 643
for SmolLM2 with the Qwen2.5 tool template) estimates the proxy's prompt as N − the
needed tool's estimated tokens + the forwarded entries' estimated tokens
(``selection.tokens``: compact JSON at 3.57 bytes a token, calibrated on llama-server).

Goal (issue 14): proxy prompt tokens ≤ 2 × the oracle's at 30 and at 117 tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ttft_llama import count_tokens
from config.policy import load_policy
from config.settings import Settings
from proxy.components import build_engine
from proxy.metrics import Metrics
from proxy.chat.planner import Planner
from selection.catalog import canonical_json
from selection.state import MemoryStateStore
from selection.tokens import BYTES_PER_TOKEN
from tests.support.data import REAL_CATALOGS

REQUEST = "List the open pull requests in octo/widgets"
NEEDED = "list_pull_requests"


def catalogues() -> dict[int, list[Any]]:
    tools = json.loads((REAL_CATALOGS / "github_mcp_server.json").read_text())
    needed = [t for t in tools if t["function"]["name"] == NEEDED]
    others = [t for t in tools if t["function"]["name"] != NEEDED]
    return {30: needed + others[:29], 117: tools}


async def forwarded(settings: Settings, tools: list[Any]) -> tuple[list[Any], list[str]]:
    """The forwarded ``tools`` array and the forwarded client tool names."""
    async with httpx.AsyncClient() as client:
        engine = build_engine(settings, client)
        planner = Planner(
            settings=settings, policy=load_policy(settings), engine=engine,
            store=MemoryStateStore(settings.state_ttl_s, 10), metrics=Metrics(),
            on_late_error=lambda error: None,
        )
        try:
            body = {"model": "m", "messages": [{"role": "user", "content": REQUEST}], "tools": tools}
            turn = await planner.plan(body, [])
        finally:
            await engine.aclose()
    return turn.forwarded_entries(with_meta=True), [t.name for t in turn.selection.tools]


def estimated(definitions: list[Any]) -> int:
    return sum(math.ceil(len(canonical_json(d)) / BYTES_PER_TOKEN) for d in definitions)


def run(args: argparse.Namespace) -> dict[str, Any]:
    messages = [{"role": "user", "content": REQUEST}]

    def count(client: httpx.Client, tools: list[Any], needed: list[Any]) -> int:
        if args.oracle_tokens is None:
            return count_tokens(client, args.upstream, {"messages": messages, "tools": tools})
        return args.oracle_tokens - estimated(needed) + estimated(tools)

    variants: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    variants += [(f"margin {m:g}", {"dominance_margin": m}) for m in args.margins]
    rows = []
    with httpx.Client() as client:
        for size, tools in catalogues().items():
            needed = [t for t in tools if t["function"]["name"] == NEEDED]
            oracle = count(client, needed, needed)
            for label, overrides in variants:
                entries, names = asyncio.run(forwarded(Settings(**overrides), tools))
                tokens = count(client, entries, needed)
                rows.append({
                    "tools": size, "variant": label, "oracle_tokens": oracle,
                    "proxy_tokens": tokens, "ratio": tokens / oracle, "forwarded": names,
                    "needed_forwarded": NEEDED in names,
                })
    measured = "estimated" if args.oracle_tokens is not None else "llama-server"
    return {"request": REQUEST, "tokens": measured, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:8080", help="llama-server origin")
    parser.add_argument("--margins", type=lambda t: [float(x) for x in t.split(",") if x],
                        default=[0.15, 0.3], help="dominance margins to compare")
    parser.add_argument("--oracle-tokens", type=int,
                        help="no server: the measured oracle prompt tokens; the rest estimated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{REQUEST!r}: first-turn prompt tokens ({report['tokens']})")
    print(f"{'tools':>5} {'variant':<12} {'oracle':>6} {'proxy':>6} {'ratio':>5}  forwarded")
    for row in report["rows"]:
        print(f"{row['tools']:>5} {row['variant']:<12} {row['oracle_tokens']:>6} "
              f"{row['proxy_tokens']:>6} {row['ratio']:>5.2f}  {', '.join(row['forwarded'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
