"""Where a turn's later tools reach the model: in the conversation, through the bridge
(:mod:`selection.clients.bridge`), or in a block that grows. Read once per turn from what
the request is, the block it starts from and the upstream's facts; pure.

A turn *delivers* when the upstream is known to cache the prompt's prefix (or the setting
says so: :attr:`selection.plan.Upstream.delivery`) and its API's adapter writes the bridge.
Its block is *frozen* — kept as the upstream cached it — when the request continues its
conversation's history (:mod:`selection.conversation.continuity`; a history the upstream
holds, a Responses ``previous_response_id`` chain, is taken to continue) on the
conversation's own block; a history the client rewrote, a block shared with another conversation of the agent,
or the conversation's first request may choose afresh.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog
from selection.catalog.history_facts import HistoryFacts
from selection.choosing.blocks import BlockStart
from selection.choosing.seconds import ServerSpeed, delivered_count, ranked_tools
from selection.clients.deferral import Deferral
from selection.clients.meta_tools import MetaTools
from selection.plan import TurnReading, Upstream
from selection.ranking.pipeline import Ranking


@dataclass(frozen=True)
class Delivery:
    """A turn's delivery: ``delivers``, ``continued`` (the history continues the
    conversation's last request's), ``frozen`` and the client's CORE as the turn forwards
    it (``client_core``: without what its searches found, where those are delivered)."""

    delivers: bool
    continued: bool
    frozen: bool
    client_core: tuple[str, ...] | None


def read_delivery(
    reading: TurnReading, start: BlockStart, upstream: Upstream, history: HistoryFacts
) -> Delivery:
    """The turn's :class:`Delivery` (see the module docstring); ``history``: what the
    request's messages say (:func:`selection.catalog.history_facts.read_history`, against the
    mark ``start``'s state holds)."""
    native = reading.native
    delivers = (upstream.delivery == "conversation" and reading.request.bridges
                and native is not None and not native.legacy)
    continued = reading.request.server_history or history.continued
    frozen = delivers and continued and start.kind is None and start.state.turn > 0
    return Delivery(delivers, continued, frozen, client_core(reading.deferral, delivers))


def client_core(deferral: Deferral, delivers: bool) -> tuple[str, ...] | None:
    """The client's CORE as the turn forwards it: without the tools its searches found
    where those are delivered in the conversation (a client that sends a found tool as a
    plain function would otherwise grow the block with it)."""
    core = deferral.client_core
    if not delivers or core is None:
        return core
    found = set(deferral.found)
    return tuple(name for name in core if name not in found)


def proactive_names(
    missing: Sequence[str], delivered: Sequence[str], meta: MetaTools | None,
    messages: Sequence[Any],
) -> tuple[str, ...]:
    """What a frozen turn may deliver before the model asks: its ``missing`` best tools
    not ``delivered`` yet, on a new user turn (the last message the user's), where a
    meta-tool can load them."""
    if meta is None or not (meta.load_name or meta.search_name):
        return ()
    if not starts_user_turn(messages):
        return ()
    return tuple(name for name in missing if name not in delivered)


def starts_user_turn(messages: Sequence[Any]) -> bool:
    """Whether the request starts a user turn: its last message is the user's (not a
    tool's result, nor an assistant's message)."""
    last = messages[-1] if messages else None
    return isinstance(last, dict) and last.get("role") == "user"


def proactive_delivery(
    names: Sequence[str], mode: str, catalog: Catalog, ranking: Ranking | None,
    speed: ServerSpeed | None, exact: Mapping[str, int] | None, held: Collection[str] = (),
) -> tuple[str, ...]:
    """Of a new user turn's ``names`` (:func:`proactive_names`), what the proxy delivers
    before the model asks (``mode``, the ``proactive_loads`` setting): ``always`` all,
    ``never`` none, ``auto`` those the turn's ranking puts above every tool the model
    holds already (``held``: the block's, and those delivered earlier: the model searches
    only when what it needs is not among them), best-ranked first, whose definitions'
    prefill the search round they spare is expected to earn back on this server
    (:func:`selection.choosing.seconds.delivered_count`; none where its speeds, or the
    turn's ranking, are not known, nor on BM25's scores alone while the catalogue's index
    is built: the odds are fitted on the whole ranking's)."""
    if mode == "always" or not names:
        return tuple(names)
    if mode == "never" or speed is None or ranking is None or ranking.lexical_only:
        return ()
    scores = ranking.values
    best_held = max((float(scores[index]) for name in held
                     if (index := catalog.index_of(name)) is not None), default=-math.inf)
    positions = sorted((index for name in names if (index := catalog.index_of(name)) is not None
                        and scores[index] > best_held), key=lambda index: -scores[index])
    count = delivered_count(speed, ranked_tools(catalog, scores, exact, positions))
    return tuple(catalog.tools[index].name for index in positions[:count])
