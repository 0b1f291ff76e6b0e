"""The selection goals of issue 14, through the proxy's own planning code.

Each case of the hard sets (LiveMCPBench, RestBench Spotify, ToolBench; first turn, one
user message, the whole catalogue as ``tools``) is planned by ``proxy.planner.Planner``
at the default settings, with a fresh in-memory conversation state, exactly as the proxy
plans a request; the forwarded ``tools`` array is the one the proxy would send
(``Turn.forwarded_entries``). Printed per set:

* recall: expected tools forwarded / expected tools (``expected_any_of``: any member);
* reachable: forwarded, or listed by name in the meta-tool's description (the tier),
  or returned by the meta-tool's ``search_tools`` for the task's own words
  (``Planner.run_meta_calls`` on a copy of the turn);
* schema tokens: estimated prompt tokens of the forwarded client tools, and of the
  meta-tool (``selection.tokens``: compact JSON at 3.57 bytes a token);
* the same for GAIA's dense top-k loader (``TOOLPRUNE_LEXICAL_WEIGHT=0``, count budget,
  no dependencies, full menu) — what the proxy did before — as the "before" column.

    PYTHONPATH=. python benchmarks/selection_goals.py [--data DIR] [--sets A,B] [--limit N] [--json]

Goals: recall ≥ 0.75 (livemcpbench_dev), ≥ 0.85 (restbench_spotify), ≥ 0.92
(toolbench_dev), schema tokens no higher than before.
"""

from __future__ import annotations

import argparse
import os
import asyncio
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config.policy import load_policy
from config.settings import Settings
from proxy.components import build_engine
from proxy.metrics import Metrics
from proxy.chat.planner import Planner
from proxy.chat.turn import MetaCall
from selection.catalog import canonical_json
from selection.evaluation import load_cases
from selection.evaluation.replay import TOP_K
from selection.state import MemoryStateStore
from selection.tokens import BYTES_PER_TOKEN
from tests.support.data import EVALUATION_DATA_VARIABLE

SETS = {"livemcpbench_dev": 0.75, "restbench_spotify": 0.85, "toolbench_dev": 0.92}


def tokens_of(definitions: list[Any]) -> int:
    return sum(math.ceil(len(canonical_json(d)) / BYTES_PER_TOKEN) for d in definitions)


async def plan_set(planner: Planner, path: Path, limit: int | None) -> dict[str, Any]:
    case_set = load_cases(path, limit=limit)
    hits = reach = units = 0
    schema, meta_tokens, forwarded_counts = [], [], []
    for number, case in enumerate(case_set.cases):
        tools = json.loads(canonical_json([t.definition for t in case.catalog.tools]))
        body = {"model": "m", "messages": case.messages, "tools": tools}
        turn = await planner.plan(body, [(b"x-conversation-id", f"goal-{number}".encode())])
        names = {tool.name for tool in turn.selection.tools}
        entries = turn.forwarded_entries(with_meta=True)
        meta = list(turn.meta.definitions) if turn.meta else []
        client = [e for e in entries if e not in meta]
        schema.append(tokens_of(client))
        meta_tokens.append(tokens_of(meta))
        forwarded_counts.append(len(names))
        listed = set(turn.selection.tier)
        if turn.meta and turn.meta.search_name:  # measured above; the probe may change it
            query = " ".join(m["content"] for m in case.messages if m.get("role") == "user")
            call = MetaCall("probe", turn.meta.search_name, json.dumps({"query": query}))
            result = json.loads((await planner.run_meta_calls(turn, [call]))[0])
            listed.update(found["name"] for found in result.get("found", []))
        elif turn.meta and not turn.selection.tier:
            listed.update(case.catalog.names)  # the full load_tools menu
        for unit in case.requirements:
            units += 1
            hits += any(name in names for name in unit)
            reach += any(name in names or name in listed for name in unit)
    return {
        "set": case_set.name,
        "cases": len(case_set.cases),
        "recall": hits / units,
        "reachable": reach / units,
        "forwarded_mean": statistics.fmean(forwarded_counts),
        "schema_tokens_mean": statistics.fmean(schema),
        "meta_tokens_mean": statistics.fmean(meta_tokens),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    # Budgets as toolprune eval's: a cold catalogue is indexed, never given up on.
    settings = Settings().model_copy(update={"index_timeout_s": 3600.0, "embedder_timeout_s": 120.0})
    results: dict[str, Any] = {"before": [], "after": []}
    async with httpx.AsyncClient() as client:
        engine = build_engine(settings, client)  # one engine: tool vectors embedded once
        try:
            for name in args.sets:
                for label in ("before", "after"):
                    policy = load_policy(settings)
                    if label == "before":
                        policy = replace(policy, ranking=TOP_K)
                    engine.lexical_weight = policy.ranking.lexical_weight
                    engine.name_weight = policy.ranking.name_weight
                    planner = Planner(
                        settings=settings, policy=policy, engine=engine,
                        store=MemoryStateStore(settings.state_ttl_s, 100_000),
                        metrics=Metrics(), on_late_error=lambda error: None,
                    )
                    path = args.data / name / "cases.jsonl"
                    results[label].append(await plan_set(planner, path, args.limit))
        finally:
            await engine.aclose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=os.environ.get(EVALUATION_DATA_VARIABLE),
                        help="the evaluation data folder ($TOOLPRUNE_SHARED_DATA)")
    parser.add_argument("--limit", type=int, help="sample whole conversations until N cases per set")
    parser.add_argument("--sets", type=lambda text: text.split(","), default=list(SETS),
                        help="comma-separated subset of %(default)s")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.data is None and not getattr(args, "from_json", None):
        parser.error("needs the evaluation data: --data PATH or $TOOLPRUNE_SHARED_DATA")
    if unknown := set(args.sets) - set(SETS):
        parser.error(f"unknown sets {sorted(unknown)}")
    results = asyncio.run(run(args))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print("first turn through proxy.planner.Planner, default settings; before = dense top-k "
          "(lexical weight 0, count budget, no dependencies, full menu)")
    print(f"{'set':<18} {'cases':>5} {'goal':>5} {'recall':>13} {'reachable':>13} "
          f"{'tools':>11} {'schema tokens':>13} {'meta tokens':>11}")
    for before, after in zip(results["before"], results["after"], strict=True):
        goal = SETS[after["set"]]
        print(
            f"{after['set']:<18} {after['cases']:>5} {goal:>5.2f} "
            f"{before['recall']:>5.3f} → {after['recall']:.3f} "
            f"{before['reachable']:>5.3f} → {after['reachable']:.3f} "
            f"{before['forwarded_mean']:>4.1f} → {after['forwarded_mean']:<4.1f} "
            f"{before['schema_tokens_mean']:>5.0f} → {after['schema_tokens_mean']:<5.0f} "
            f"{before['meta_tokens_mean']:>4.0f} → {after['meta_tokens_mean']:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
