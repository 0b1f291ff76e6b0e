"""Labelled cases replayed as an agent's traffic (``toolprune eval --learn-from``): each
case is planned by the proxy's planner as a chat request, the simulated agent then calls
every expected tool, and the served turn is written to a fresh usage log by its own
writer (query vectors on, as with ``TOOLPRUNE_LEARN``); then one learning pass
(:func:`proxy.usage.learning.learn_from_log`, with its held-back guard) runs on that log.

An expected tool that was forwarded is called directly (logged ``forwarded``); one that
was not is reached the way a model would: through ``load_tools`` by name when the
meta-tool lists or offers it, else through ``search_tools`` with the tool's own words
(name and description; logged ``loaded`` when the search found it, ``miss`` when the agent
called it anyway). Nothing is sent to a model.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from config.settings import Settings
from proxy.apis.chat.adapter import read_chat
from proxy.metrics import Metrics
from proxy.state.store import MemoryStateStore
from proxy.turn.planner import Planner
from proxy.turn.turn import MetaCall, Turn
from proxy.usage.learning import learn_from_log
from proxy.usage.writer import UsageLog
from selection.evaluation import Case, load_cases
from selection.planning import Selector
from selection.types import CatalogCache, NothingToPrune, SelectionError, SmallCatalog, name_words

#: Characters of a tool's description a simulated search query uses.
SEARCH_QUERY_CHARS = 200
#: The model name the replayed requests carry.
REPLAY_MODEL = "toolprune-replay"


@dataclass(frozen=True)
class TrafficSummary:
    """Cases replayed as requests, skipped (forwarded whole, or selection failed), and
    expected tool calls by how the agent reached them."""

    requests: int
    skipped: int
    forwarded: int
    meta: int


def _expected(case: Case, turn: Turn) -> list[str]:
    names = [next((n for n in unit if turn.plan.catalog.get(n)), None) for unit in case.requirements]
    return [name for name in dict.fromkeys(names) if name is not None]


async def _reach(planner: Planner, turn: Turn, missing: list[str]) -> None:
    meta = turn.plan.meta
    if meta is None:
        return
    if meta.load_name is not None:
        calls = [MetaCall("replay-load", meta.load_name, json.dumps({"names": missing}))]
    else:
        calls = []
        for position, name in enumerate(missing):
            tool = turn.plan.catalog.get(name)
            assert tool is not None
            query = f"{name_words(name)}: {tool.description[:SEARCH_QUERY_CHARS]}"
            calls.append(MetaCall(f"replay-search-{position}", str(meta.search_name),
                                  json.dumps({"query": query})))
    await planner.run_meta_calls(turn, calls)


async def replay_traffic(
    cases: Iterable[Case], planner: Planner, catalogs: CatalogCache, usage: UsageLog
) -> TrafficSummary:
    """Plan every case as a Chat Completions request (its catalogue parsed through
    ``catalogs``), reach its expected tools, record it in ``usage`` (flushed)."""
    requests = skipped = forwarded_calls = meta_calls = 0
    for case in cases:
        if case.catalog is None or not case.requirements:
            skipped += 1
            continue
        body = {
            "model": REPLAY_MODEL,
            "messages": case.messages,
            "tools": [tool.definition for tool in case.catalog.tools],
        }
        if case.tool_choice is not None:
            body["tool_choice"] = case.tool_choice
        headers = [(b"x-conversation-id", case.conversation.encode("utf-8"))]
        try:
            turn = await planner.plan(await read_chat(body, catalogs), headers)
        except (NothingToPrune, SmallCatalog, SelectionError):
            skipped += 1
            continue
        expected = _expected(case, turn)
        forwarded = {tool.name for tool in turn.plan.selection.tools}
        missing = [name for name in expected if name not in forwarded]
        if missing:
            await _reach(planner, turn, missing)
        turn.response_calls = expected
        usage.record(turn, "pruned")
        requests += 1
        forwarded_calls += len(expected) - len(missing)
        meta_calls += len(missing)
    await asyncio.to_thread(usage.flush, 60.0)
    return TrafficSummary(requests, skipped, forwarded_calls, meta_calls)


def traffic_share(cases: Sequence[Case], share: float, seed: int) -> list[Case]:
    """The cases of ``share`` (0–1] of the conversations, drawn with ``seed``; file order."""
    conversations = sorted({case.conversation for case in cases})
    random.Random(seed).shuffle(conversations)
    kept = set(conversations[: math.ceil(share * len(conversations))])
    return [case for case in cases if case.conversation in kept]


async def learn_from_cases(
    path: Path, *, share: float, seed: int, settings: Settings, selector: Selector,
) -> dict[str, Any]:
    """Replay ``share`` of the cases of ``path`` as traffic into a temporary usage log,
    learn from it (installing what is promoted in the selector's ``engine.learned``); the
    JSON-ready summary. Raises ValueError / OSError on bad data."""
    engine, policy = selector.engine, selector.policy
    cases = traffic_share(load_cases(path).cases, share, seed)
    with tempfile.TemporaryDirectory(prefix="toolprune-learn-") as folder:
        database = Path(folder) / "usage.db"
        usage = UsageLog(database, embedder=engine.embedder.id)
        planner = Planner(
            settings=settings, selector=selector,
            store=MemoryStateStore(ttl_s=86400.0, max_conversations=1_000_000),
            metrics=Metrics(), on_late_error=lambda error: None,
        )
        catalogs = CatalogCache(settings.catalog_cache_bytes,
                                max_tool_bytes=settings.max_tool_definition_bytes)
        try:
            summary = await replay_traffic(cases, planner, catalogs, usage)
        finally:
            await asyncio.to_thread(usage.close)
        outcomes = await learn_from_log(
            database, engine, policy.examples, k=policy.top_k, now=time.time()
        )
    return {
        "from": str(path),
        "share": share,
        "seed": seed,
        "cases": len(cases),
        "traffic": asdict(summary),
        "outcomes": [asdict(outcome) for outcome in outcomes],
    }
