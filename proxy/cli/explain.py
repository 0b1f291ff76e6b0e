"""``toolprune explain REQUEST.json``: an offline dry run of the proxy's selection on one
chat-completions request body — which tools would be forwarded and why, the best-scored
tools left out, forwarded/offered, and the estimated prompt saving. Same code path as
the proxy (:class:`proxy.chat.planner.Planner`); no upstream is contacted unless the
configured embedder is an HTTP one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from tabulate import tabulate

from config.policy import load_policy
from config.settings import Settings
from proxy.chat.planner import NothingToPrune, Planner, SmallCatalog
from proxy.chat.turn import Turn
from proxy.cli.help import from_setting
from proxy.components import build_engine
from proxy.metrics import Metrics
from selection.errors import PolicyError, SelectionError
from selection.state import MemoryStateStore

#: Bytes per token of the saving estimate (JSON tool schemas; labelled an estimate).
BYTES_PER_TOKEN_ESTIMATE = 4


DESCRIPTION = """\
Show what the proxy would do with one chat-completions request, without sending it
anywhere: the tools it would forward and why (core, pinned, sticky, or the semantic
score), the best-scored tools it would leave out, and the estimated prompt saving. The
request is planned as the first turn of a new conversation, with the settings of
TOOLPRUNE_* variables and the policy file.

example:
  toolprune explain request.json --top-k 4
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request", type=Path, metavar="REQUEST.json",
                        help="a POST /v1/chat/completions request body")
    parser.add_argument("--top-k", type=int, metavar="K",
                        help=f"semantic matches admitted, as X-Tool-Pruning-Top-K would set "
                        f"{from_setting('top_k')}")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def report(turn: Turn) -> dict[str, Any]:
    """The explanation of a planned turn, as plain data."""
    saved = turn.schema_bytes_saved()
    return {
        "decision": "pruned",
        "path": turn.path,
        "offered": turn.offered,
        "forwarded": len(turn.selection.tools),
        "tools": [
            {"name": t.name, "reason": t.reason, "score": None if t.score is None else round(t.score, 4)}
            for t in turn.selection.tools
        ],
        "left_out": [{"name": n, "score": round(s, 4)} for n, s in turn.selection.left_out],
        "dependency_of": dict(turn.selection.parents),
        "tier": list(turn.selection.tier),
        "meta_tools": sorted(turn.meta.names) if turn.meta else [],
        "schema_bytes_saved": saved,
        "tokens_saved_estimate": saved // BYTES_PER_TOKEN_ESTIMATE,
    }


def format_table(explained: dict[str, Any]) -> str:
    """The terminal rendering of :func:`report`'s result: columns sized to their content."""
    rows = [
        [t["name"], t["reason"], None if t["score"] is None else t["score"]]
        for t in explained["tools"]
    ]
    lines = [
        f"decision: {explained['decision']} ({explained['path']} path)",
        f"forwarded {explained['forwarded']} of {explained['offered']} tools; "
        f"meta-tools: {', '.join(explained['meta_tools']) or 'none'}",
        "",
        tabulate(rows, headers=["tool", "reason", "score"], floatfmt=".3f", missingval=""),
    ]
    if explained["left_out"]:
        left_out = [[t["name"], t["score"]] for t in explained["left_out"]]
        lines += ["", "best-scored tools left out:", "",
                  tabulate(left_out, headers=["tool", "score"], floatfmt=".3f")]
    lines += [
        "",
        f"prompt saving: {explained['schema_bytes_saved']} bytes of tool definitions "
        f"(≈{explained['tokens_saved_estimate']} tokens, estimate at "
        f"{BYTES_PER_TOKEN_ESTIMATE} bytes/token)",
    ]
    return "\n".join(lines)


#: How long ``explain`` waits for a catalogue's index (seconds): offline, no client waits.
OFFLINE_INDEX_TIMEOUT_S = 3600.0


async def explain(body: dict[str, Any], settings: Settings, top_k: int | None) -> dict[str, Any]:
    """Plan ``body`` as the proxy would, in a fresh conversation state."""
    policy = load_policy(settings)
    async with httpx.AsyncClient() as client:
        # Offline: wait for the catalogue's index however long it takes.
        engine = build_engine(
            settings.model_copy(update={"index_timeout_s": OFFLINE_INDEX_TIMEOUT_S}), client
        )
        planner = Planner(
            settings=settings,
            policy=policy,
            engine=engine,
            store=MemoryStateStore(settings.state_ttl_s, 1),
            metrics=Metrics(),
            on_late_error=lambda error: None,
        )
        try:
            return report(await planner.plan(body, [], top_k))
        except NothingToPrune:
            return {"decision": "passthrough", "reason": "no tools and no tool block"}
        except SmallCatalog as small:
            return {"decision": "small_catalog", "offered": small.size}
        finally:
            await engine.aclose()


def run(args: argparse.Namespace) -> int:
    try:
        body = json.loads(args.request.read_text())
    except (OSError, ValueError) as exc:
        print(f"toolprune explain: cannot read {args.request}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(body, dict):
        print("toolprune explain: the request body must be a JSON object", file=sys.stderr)
        return 2
    try:
        explained = asyncio.run(explain(body, Settings(), args.top_k))
    except (PolicyError, SelectionError) as exc:
        print(f"toolprune explain: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(explained, indent=2))
    elif explained["decision"] == "pruned":
        print(format_table(explained))
    else:
        print(json.dumps(explained))
    return 0
