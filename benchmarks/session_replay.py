"""Multi-turn sets replayed offline: recall against the upstream's prefix-cache cost, per
later-turn admission setting, side by side in one run.

Run from the repository root::

    PYTHONPATH=. python benchmarks/session_replay.py tests/data/bfcl_multi_turn_tradingbot/cases.jsonl
    PYTHONPATH=. python benchmarks/session_replay.py CASES.jsonl --limit 800 --settings 100:8,3:8,3:16

Each conversation's steps go through the proxy's own selection (``toolprune eval``'s
replay: scored once, ``select`` per step with the conversation's state carried) for each
``refresh_rank:refresh_top_k:refresh_share`` setting (``100:8:0``: every later turn
admits its top-k, as before the cache-aware rules). Columns: ``recall@k``; ``changed``: share of later steps
whose forwarded tools differ from the previous step's (each change makes the upstream
evaluate the history again); ``fwd tokens``: mean forwarded schema + meta-tool tokens;
``eval / direct``: tokens the upstream would evaluate over every conversation through the
proxy over sending the whole catalogue every step (prefix-cache model of
:mod:`selection.choosing.prefix`, for both: a step with the same tools evaluates its new messages; a
changed step everything after the first changed tool — direct's tools change where a
conversation's catalogue does, as in BFCL's missing-function conversations), and the same
with llama-server's ``--cache-reuse`` (tools removed from the block cost nothing, so a change costs the tools
new to it and the messages; the meta-tool too when it follows the change). The block is
priced with the meta-tool in its place (:func:`selection.choosing.prefix.block_signature`).
``+ misses loaded``: the latter plus one ``load_tools`` round per step with a miss
(:func:`miss_cost`), as if the model always asked for what it lacks.

``late``: the same selections in the layout of ``session.py --late-oracle`` (schemas after
the history): the first step's block never changes (plus a ``call_tool`` meta-tool,
:data:`CALL_TOOL_TOKENS`); a later step's tools that the conversation has not seen yet
arrive after its messages as one load exchange, which stays in the history, so a step
evaluates its new messages, its new schemas and the exchange, and a miss loads the missing
schemas the same way (no history again); ``late recall``: requirements among the block and
every schema loaded so far. Token counts are estimates (:mod:`selection.catalog.tokens`), from the
sets' real messages and schemas.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from benchmarks.support.text_tables import table
from config.policy import load_policy
from config.settings import Settings
from proxy.cli.eval import default_embedder_factory
from selection.catalog.catalog import Catalog
from selection.catalog.policy import Policy
from selection.catalog.tokens import tool_tokens
from selection.choosing.prefix import estimated_text_tokens, expect_cache, is_meta_entry
from selection.evaluation import EngineScorer, load_cases, replay
from selection.evaluation.replay import CaseOutcome
from selection.evaluation.scoring import ScoredRun, score_cases
from selection.ranking.engine import SelectionEngine
from selection.ranking.signals.registry import Signals


@dataclass
class SessionCost:
    """Estimated tokens the upstream evaluates over a replay: ``proxy`` (prefix cache
    only), ``reuse`` (with ``--cache-reuse``), ``direct`` (the case's whole catalogue every
    step); ``later`` / ``changed``: later steps, and those whose tools changed;
    ``misses``: the meta rounds the misses would cost (:func:`miss_cost`)."""

    proxy: int = 0
    reuse: int = 0
    direct: int = 0
    later: int = 0
    changed: int = 0
    misses: int = 0
    late: int = 0
    late_satisfied: int = 0
    late_needs: int = 0


#: Tokens of the ``call_tool(name, arguments)`` definition a late block adds once.
CALL_TOOL_TOKENS = 70
#: Tokens of one meta exchange: the model's ``load_tools`` call and the proxy's answer.
META_EXCHANGE_TOKENS = 40


def miss_cost(outcome: CaseOutcome, history: int) -> int:
    """What a step's misses cost if the model asks for them (one ``load_tools`` round):
    the re-issued request adds the missing tools' schemas after the meta-tool, so the
    upstream evaluates them, the history again and the exchange. The loads' effect on
    later steps is not modelled (they would stay forwarded)."""
    catalog = outcome.case.catalog
    missing = [unit[0] for ok, unit in zip(outcome.satisfied, outcome.case.case.requirements, strict=True)
               if not ok]
    if not missing or catalog is None:
        return 0
    schemas = sum(tool_tokens(tool) for name in missing if (tool := catalog.get(name)) is not None)
    return schemas + history + META_EXCHANGE_TOKENS


def late_step(outcome: CaseOutcome, have: set[str], history: int, cached_history: int | None,
              tokens: Callable[[str], int]) -> int:
    """What one step costs in the late layout (module docstring), updating ``have`` (the
    tools whose schemas the conversation's prompt holds) with its loads and misses;
    ``cached_history`` None: the conversation's first step."""
    if cached_history is None:
        block = outcome.block if outcome.block is not None else outcome.forwarded
        cost = sum(tokens(entry) for entry in block) + CALL_TOOL_TOKENS + history
        loads: list[str] = []
        have.update(outcome.forwarded)
    else:
        cost = max(history - cached_history, 0)
        loads = [name for name in outcome.forwarded if name not in have]
        have.update(loads)
    missing = [unit[0] for unit in outcome.case.case.requirements if not have.intersection(unit)]
    for batch in (loads, missing):
        if batch:
            cost += sum(tokens(name) for name in batch) + META_EXCHANGE_TOKENS
            have.update(batch)
    return cost


def session_cost(outcomes: Sequence[CaseOutcome]) -> SessionCost:
    """Walk the replayed steps in order, conversation by conversation (see the module
    docstring for the model)."""
    cost = SessionCost()
    previous: dict[str, tuple[list[str], int]] = {}
    late_have: dict[str, set[str]] = {}
    direct_blocks: dict[str, list[str]] = {}
    for outcome in outcomes:
        case, catalog = outcome.case.case, outcome.case.catalog
        if catalog is None:
            continue

        def tokens(entry: str, catalog: Catalog = catalog, meta: int = outcome.meta_tokens) -> int:
            if is_meta_entry(entry):
                return meta
            tool = catalog.get(entry)
            return tool_tokens(tool) if tool is not None else 0

        history = estimated_text_tokens(case.messages)
        forwarded = outcome.block if outcome.block is not None else outcome.forwarded
        block, cached_history = previous.get(case.conversation, (None, 0))
        for reuse in (False, True):
            evaluated = expect_cache(
                block, forwarded, tokens, head_tokens=0,
                cached_history_tokens=cached_history, history_tokens=history, reuse=reuse,
            ).evaluated
            if reuse:
                cost.reuse += evaluated
            else:
                cost.proxy += evaluated
        cost.misses += miss_cost(outcome, history)
        have = late_have.setdefault(case.conversation, set())
        before = set(have)
        cost.late += late_step(outcome, have, history, None if block is None else cached_history, tokens)
        reachable = before | set(outcome.forwarded)
        cost.late_needs += len(case.requirements)
        cost.late_satisfied += sum(bool(reachable.intersection(unit)) for unit in case.requirements)
        cost.direct += expect_cache(
            direct_blocks.get(case.conversation), catalog.names, tokens, head_tokens=0,
            cached_history_tokens=cached_history, history_tokens=history,
        ).evaluated
        direct_blocks[case.conversation] = catalog.names
        if block is not None:
            cost.later += 1
            cost.changed += int(block != forwarded)
        previous[case.conversation] = (forwarded, history)
    return cost


async def score(path: str, limit: int | None, settings: Settings, policy: Policy) -> ScoredRun:
    async with httpx.AsyncClient() as client:
        embedder = default_embedder_factory(settings, client)
        await embedder.load()
        engine = SelectionEngine(
            embedder, vector_cache_size=200_000, index_cache_size=64, timeout_s=120,
            index_timeout_s=1200, signals=Signals.from_values(settings.signal_values()),
        )
        try:
            cases = load_cases(path, limit=limit, seed=0)
            return await score_cases(
                cases.cases, EngineScorer(engine, policy, "minilm"),
                forwards_whole=policy.forwards_whole,
                query_user_messages=settings.query_user_messages,
                query_chars=settings.query_chars, query_parts_max=settings.query_parts,
            )
        finally:
            await engine.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+", help="multi-turn case files (JSON Lines)")
    parser.add_argument("--limit", type=int, default=None, help="whole conversations until N cases")
    parser.add_argument("--k", type=int, default=8, help="top-k (default: 8)")
    parser.add_argument(
        "--settings", default="100:8:0,0:8:0,3:8:0,3:16:0.25,3:16:0.5,3:16:1,3:16:100,2:16:0.5",
        help="refresh_rank:refresh_top_k:refresh_share triples, comma-separated",
    )
    args = parser.parse_args(argv)
    settings = Settings()
    base = load_policy(settings)
    triples = [item.split(":") for item in args.settings.split(",")]
    for path in args.data:
        run = asyncio.run(score(path, args.limit, settings, base))
        rows = []
        for rank, refresh_k, share in triples:
            policy = dataclasses.replace(
                base, refresh_rank=int(rank), refresh_top_k=int(refresh_k), refresh_share=float(share)
            )
            outcomes = replay(run, policy, args.k)
            with_needs = [o for o in outcomes if o.satisfied]
            recall = sum(o.recall for o in with_needs) / max(len(with_needs), 1)
            cost = session_cost(outcomes)
            tokens = sum(o.schema_tokens + o.meta_tokens for o in outcomes) / max(len(outcomes), 1)
            rows.append([
                f"{rank}:{refresh_k}:{share}", f"{recall:.3f}", f"{cost.changed / max(cost.later, 1):.3f}",
                f"{tokens:,.0f}", f"{cost.proxy / max(cost.direct, 1):.2f}",
                f"{cost.reuse / max(cost.direct, 1):.2f}",
                f"{(cost.reuse + cost.misses) / max(cost.direct, 1):.2f}",
                f"{cost.late_satisfied / max(cost.late_needs, 1):.3f}",
                f"{cost.late / max(cost.direct, 1):.2f}",
            ])
        print(f"\n{path}: {len(run.cases)} steps, k = {args.k}")
        print(table(
            ["rank:top_k:share", f"recall@{args.k}", "changed", "fwd tokens", "eval / direct",
             "with --cache-reuse", "+ misses loaded", "late recall", "late / direct"],
            rows,
        ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
