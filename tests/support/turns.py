"""Turns built from their parts, for tests of what reads a planned turn (the API relays,
the usage log) without planning one."""

from __future__ import annotations

from typing import Any

from proxy.turn.turn import Turn
from selection.catalog.catalog import Catalog
from selection.choosing.block_order import Selection
from selection.clients.deferral import Deferral
from selection.clients.meta_tools import MetaTools
from selection.conversation.history import ToolChoice, read_tool_choice
from selection.plan import Plan, TurnInput, TurnReading
from selection.ranking.pipeline import Ranking


def planned_turn(
    body: dict[str, Any], catalog: Catalog, selection: Selection, *,
    meta: MetaTools | None = None, choice: ToolChoice | None = None,
    ranking: Ranking | None = None, conversation: str = "c",
) -> Turn:
    """A turn as the planner would have made it for ``body`` with ``catalog`` as its native
    tools, forwarding ``selection`` (no deferral, no text block)."""
    choice = read_tool_choice(body) if choice is None else choice
    messages = body.get("messages", [])
    request = TurnInput(body, catalog, messages if isinstance(messages, list) else [], choice)
    deferral = Deferral(False, False, None, (), catalog.fingerprint)
    reading = TurnReading(request, catalog, catalog, None, deferral, choice, preload=True,
                          offered=len(catalog), system="", history=[], agent="agent:test")
    return Turn(Plan(reading, selection, None, meta, ranking), conversation)
