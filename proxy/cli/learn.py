"""``toolprune learn``: one learning pass over the usage log by hand (docs/learning.md):
per catalogue, the evidence the log holds, the held-back recall@k of the state in use
and of the candidate, and whether the candidate was promoted."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from config.policy import load_policy
from config.selector import build_selector
from config.settings import Settings
from proxy.cli.eval import EmbedderFactory, default_embedder_factory
from proxy.cli.help import from_setting
from proxy.usage.learning import LearnOutcome, learn_from_log
from proxy.usage.learning_schedule import load_states
from proxy.usage.learning_share import SharedStates
from selection.learning import LearnedStates
from selection.types import EmbedderError, PolicyError, SelectionError

DESCRIPTION = """\
Learn tool selection from the agent's own traffic, once: read the query vectors and tool
calls the usage log holds (kept when TOOLPRUNE_LEARN is on), learn per catalogue which
requests lead to which tools, and promote the result only when it ranks held-back
requests of the log better than the state in use without costing the held-back requests
whose tools were never called. Prints the before/after recall@k per catalogue. A running
proxy picks promoted states up at its next start or scheduled pass
(TOOLPRUNE_LEARN_INTERVAL_S). With TOOLPRUNE_LEARN and a Redis state store
(TOOLPRUNE_STATE_URL), the states other replicas published there are the states in use,
and promotions are published there (replicas install them every
TOOLPRUNE_LEARN_REFRESH_S).

example:
  toolprune learn --db /var/lib/toolprune/usage.db
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, metavar="FILE",
                        help=f"the usage database {from_setting('usage_db')}")
    parser.add_argument("--policy", type=Path, metavar="FILE",
                        help=f"TOML policy file {from_setting('policy_file')}")
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")


def format_outcomes(outcomes: Sequence[LearnOutcome]) -> str:
    """The terminal table of one pass."""
    if not outcomes:
        return "nothing to learn: the usage log holds no query vectors with tool calls"
    lines = [f"{'catalogue':<14} {'tools':>6} {'requests':>9} {'pairs':>6} "
             f"{'recall@k before → after':>24} {'untouched before → after':>26}  outcome"]
    for o in outcomes:
        judged = o.reason != "too_little_traffic"
        change = f"{o.before:.3f} → {o.after:.3f} (k={o.k})" if judged else "–"
        spared = (f"{o.untouched_before:.3f} → {o.untouched_after:.3f} ({o.untouched})"
                  if judged and o.untouched else "–")
        verdict = (f"promoted v{o.version}: {o.learned_tools} tools, {o.size_bytes} B, "
                   f"gain {o.gain:g}, centering {o.centering:g}" if o.promoted else o.reason)
        lines.append(f"{o.catalog[:12]:<14} {o.tools:>6} {o.requests:>9} {o.pairs:>6} "
                     f"{change:>24} {spared:>26}  {verdict}")
    return "\n".join(lines)


async def run_learn(
    args: argparse.Namespace, embedder_factory: EmbedderFactory | None = None
) -> list[LearnOutcome]:
    import httpx

    overrides = {"usage_db": args.db, "policy_file": args.policy}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    if settings.usage_db is None:
        raise ValueError("no usage database: pass --db or set TOOLPRUNE_USAGE_DB")
    if not settings.usage_db.is_file():
        raise FileNotFoundError(f"no usage database at {settings.usage_db}")
    policy = load_policy(settings)
    async with httpx.AsyncClient() as client:
        embedder = (embedder_factory or default_embedder_factory)(settings, client)
        await embedder.load()
        selector = build_selector(settings, embedder, policy=policy, offline=True)
        engine = selector.engine
        engine.learned = LearnedStates(embedder.id)
        shared = None
        if settings.learn and settings.state_url:
            shared = SharedStates(settings.state_url, embedder=embedder.id,
                                  key_prefix=settings.state_key_prefix,
                                  timeout_s=settings.redis_timeout_s)
        try:
            load_states(settings.usage_db, engine.learned)
            if shared is not None:
                await shared.refresh(engine.learned)
            return await learn_from_log(
                settings.usage_db, engine, policy.examples, k=policy.top_k, now=time.time(),
                publish=shared.publish if shared is not None else None,
            )
        finally:
            await selector.aclose()
            if shared is not None:
                await shared.aclose()


def run(args: argparse.Namespace, embedder_factory: EmbedderFactory | None = None) -> int:
    """The ``learn`` subcommand. Exit status 0, or 2 on bad input / embedder failure."""
    try:
        outcomes = asyncio.run(run_learn(args, embedder_factory))
    except (OSError, ValueError, sqlite3.Error, PolicyError, EmbedderError, SelectionError) as exc:
        print(f"toolprune learn: {exc}", file=sys.stderr)
        return 2
    if args.json:
        report: list[dict[str, Any]] = [asdict(o) for o in outcomes]
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_outcomes(outcomes))
    return 0
