"""``toolprune explain REQUEST.json``: an offline dry run of the proxy's selection on one
request body of any of the three APIs (chat completions, Responses, Anthropic Messages;
``--api``, guessed from the body by default) — which tools would be forwarded and why,
the best-scored tools left out, forwarded/offered, and the estimated prompt saving. Same code path as
the proxy (each API's adapter, then :class:`proxy.turn.planner.Planner`); no upstream is contacted unless the
configured embedder is an HTTP one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from config.selector import build_embedder, build_selector
from config.settings import Settings, request_top_k
from proxy.apis.chat.adapter import ChatApi
from proxy.apis.messages.adapter import MessagesApi
from proxy.apis.responses.adapter import ResponsesApi
from proxy.cli.help import from_setting
from proxy.metrics import Metrics
from proxy.state.store import MemoryStateStore
from proxy.turn.adapter import Api, MalformedRequest
from proxy.turn.planner import Planner
from proxy.turn.turn import Turn
from proxy.usage.learning_schedule import load_states
from selection.learning import LearnedStates
from selection.types import (
    CatalogCache,
    CatalogError,
    NothingToPrune,
    PolicyError,
    SelectionError,
    SmallCatalog,
)

#: Bytes per token of the saving estimate (JSON tool schemas; labelled an estimate).
BYTES_PER_TOKEN_ESTIMATE = 4
APIS = ("auto", "chat_completions", "responses", "messages")
#: Content block types only the Anthropic Messages API has in ``messages``.
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result"})


#: Why a catalogue is forwarded whole (:class:`~proxy.turn.planner.SmallCatalog` reasons).
SMALL_CATALOG_REASONS = {
    "min_catalog_tools": "at most min_catalog_tools tools",
    "no_saving": "pruning would save less than min_saving of its tool tokens",
}


def request_api(body: dict[str, Any]) -> str:
    """Which API ``body`` is a request of: ``responses`` (it has ``input``), ``messages``
    (a top-level ``system``, tools with ``input_schema``, or ``tool_use`` /
    ``tool_result`` content blocks), else ``chat_completions``."""
    if "input" in body:
        return "responses"
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    blocks = [
        block.get("type")
        for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"] if isinstance(block, dict)
    ]
    if (
        "system" in body
        or any(isinstance(tool, dict) and "input_schema" in tool for tool in tools)
        or _ANTHROPIC_BLOCKS & set(blocks)
    ):
        return "messages"
    return "chat_completions"


DESCRIPTION = """\
Show what the proxy would do with one request (chat completions, Responses API or
Anthropic Messages API), without sending it anywhere: the tools it would forward and why
(core, pinned, sticky, or the semantic score), the best-scored tools it would leave out,
and the estimated prompt saving. The request is planned as the first turn of a new
conversation, with the settings of TOOLPRUNE_* variables and the policy file.

example:
  toolprune explain request.json --top-k 4
"""


def top_k(text: str) -> int:
    """``--top-k``: what ``X-Tool-Pruning-Top-K`` takes (:func:`config.settings.request_top_k`).
    Raises argparse.ArgumentTypeError (argparse's one-line usage error, exit 2)."""
    try:
        return request_top_k(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request", type=Path, metavar="REQUEST.json",
                        help="a request body of POST /v1/chat/completions, /v1/responses or "
                        "/v1/messages")
    parser.add_argument("--api", choices=APIS, default="auto",
                        help="the request's API; auto: guessed from the body")
    parser.add_argument("--top-k", type=top_k, metavar="K",
                        help=f"semantic matches admitted, as X-Tool-Pruning-Top-K would set "
                        f"{from_setting('top_k')}")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def report(turn: Turn) -> dict[str, Any]:
    """The explanation of a planned turn, as plain data."""
    saved = turn.plan.schema_bytes_saved()
    return {
        "decision": "pruned",
        "path": turn.path,
        "offered": turn.offered,
        "forwarded": len(turn.plan.selection.tools),
        "tools": [
            {"name": t.name, "reason": t.reason, "score": None if t.score is None else round(t.score, 4)}
            for t in turn.plan.selection.tools
        ],
        "left_out": [{"name": n, "score": round(s, 4)} for n, s in turn.plan.selection.left_out],
        "dependency_of": dict(turn.plan.selection.parents),
        "tier": list(turn.plan.selection.tier),
        "meta_tools": sorted(turn.plan.meta.names) if turn.plan.meta else [],
        **turn.plan.group_fields(),
        "schema_bytes_saved": saved,
        "tokens_saved_estimate": saved // BYTES_PER_TOKEN_ESTIMATE,
    }


def format_table(explained: dict[str, Any]) -> str:
    """The terminal rendering of :func:`report`'s result: columns sized to their content."""
    through = explained.get("through_group", {})
    rows = [
        [t["name"], t["reason"] + (f" (group {through[t['name']]})" if t["name"] in through else ""),
         None if t["score"] is None else t["score"]]
        for t in explained["tools"]
    ]
    lines = [
        f"decision: {explained['decision']} ({explained['path']} path, {explained['api']} API)",
        f"forwarded {explained['forwarded']} of {explained['offered']} tools; "
        f"meta-tools: {', '.join(explained['meta_tools']) or 'none'}",
    ]
    if explained.get("groups"):
        matched = ", ".join(f"{name} ({score:.3f})" for name, score in explained["groups"])
        lines.append(f"groups matched best: {matched}")
    lines += [
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


async def explain(
    body: dict[str, Any], settings: Settings, top_k: int | None, api: str = "auto"
) -> dict[str, Any]:
    """Plan ``body`` (a request of ``api``; ``auto``: :func:`request_api`) as the proxy
    would, in a fresh conversation state."""
    import httpx  # imported here: `toolprune serve` never loads it

    api = request_api(body) if api == "auto" else api
    async with httpx.AsyncClient() as client:
        # Offline: wait for the catalogue's whole index however long it takes.
        selector = build_selector(settings, build_embedder(settings, client), offline=True)
        engine = selector.engine
        if settings.learn and settings.usage_db is not None and settings.usage_db.is_file():
            engine.learned = LearnedStates(engine.embedder.id)  # as the proxy would apply
            load_states(settings.usage_db, engine.learned)
        planner = Planner(
            settings=settings,
            selector=selector,
            store=MemoryStateStore(settings.state_ttl_s, 1),
            metrics=Metrics(),
            on_late_error=lambda error: None,
        )
        try:
            adapter: Api = (
                ChatApi(CatalogCache(0, max_tool_bytes=settings.max_tool_definition_bytes))
                if api == "chat_completions"
                else ResponsesApi() if api == "responses" else MessagesApi()
            )
            turn = await planner.plan((await adapter.read(body)).input, [], top_k)
            return {"api": api, **report(turn)}
        except MalformedRequest as malformed:  # the upstream answers it (its 400)
            return {"api": api, "decision": "malformed", "reason": str(malformed)}
        except NothingToPrune:
            return {"api": api, "decision": "passthrough", "reason": "no function tools and no tool block"}
        except SmallCatalog as small:
            return {"api": api, "decision": "small_catalog", "offered": small.size,
                    "reason": SMALL_CATALOG_REASONS[small.reason]}
        except CatalogError as unreadable:  # the proxy forwards such a request unchanged
            return {"api": api, "decision": "fallback", "reason": unreadable.reason,
                    "detail": str(unreadable)}
        finally:
            await selector.aclose()


def run(args: argparse.Namespace) -> int:
    try:
        body = json.loads(args.request.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        reason = "JSON nested too deeply" if isinstance(exc, RecursionError) else exc
        print(f"toolprune explain: cannot read {args.request}: {reason}", file=sys.stderr)
        return 2
    if not isinstance(body, dict):
        print("toolprune explain: the request body must be a JSON object", file=sys.stderr)
        return 2
    try:
        explained = asyncio.run(explain(body, Settings(), args.top_k, args.api))
    except (PolicyError, SelectionError) as exc:
        print(f"toolprune explain: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(explained, indent=2))
    elif explained["decision"] == "pruned":
        print(format_table(explained))
    else:
        print(format_unpruned(explained))
    return 0


def format_unpruned(explained: dict[str, Any]) -> str:
    """One line for a request the proxy would forward unchanged: its decision and why."""
    why = explained["reason"]
    if "detail" in explained:
        why = f"{why}: {explained['detail']}"
    if "offered" in explained:
        why = f"{why} ({explained['offered']} tools)"
    return f"decision: {explained['decision']} ({explained['api']} API): forwarded unchanged, {why}"
