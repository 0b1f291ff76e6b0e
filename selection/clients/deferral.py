"""The client's deferral as one turn reads it, whatever its API: whether the deferral
contract holds, whether the client runs its own search, which tools are its CORE (and in
what order), what its searches found, and the catalogue's part that names the
conversation.

The contract holds when the client deferred tools (``defer_loading``), brought a search
tool the proxy emulates (:attr:`selection.plan.TurnInput.search`), or runs its own search:
a search tool it executes itself (:attr:`~selection.plan.TurnInput.client_runs_search`, set
by its API's adapter) or a plain function that fetches deferred tools (:mod:`selection.clients.client_deferral`, recognised
here for every API). Then every tool the client did not defer is its CORE, forwarded
every round, and a client that runs its own search gets no toolprune meta-tool beside it:
one discovery mechanism per request.

A client's search adds tools to later requests (to ``tools``, marked deferred or not, or
in the history's search output): the conversation's identity leaves them out, so the
conversation, its sticky state and its cached block survive the search. Tools a plain
search function found go after the rest of the CORE, in the order found, wherever the
client put them, so the forwarded block keeps its prefix in the upstream's KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from selection.catalog.catalog import Catalog, fingerprint
from selection.clients.client_deferral import client_deferral, found_by_search
from selection.conversation.query import content_text

#: Roles whose texts are the request's instructions (where a deferred-tool menu is).
_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Deferral:
    """``active``: the deferral contract holds. ``client_searches``: the client runs its
    own search (no toolprune meta-tool). ``client_core``: the client's CORE in forwarding
    order (None: no contract, toolprune selects from the whole catalogue). ``found``:
    tools the conversation's searches found, kept loaded. ``identity``: the fingerprint
    of the catalogue's part that names the conversation and its agent. ``finder``: the
    plain function the client finds tools with (None: none). ``menu``: the tools its
    prompt names as deferred without defining them (:func:`selection.clients.client_deferral.deferred_menu`)."""

    active: bool
    client_searches: bool
    client_core: tuple[str, ...] | None
    found: tuple[str, ...]
    identity: str
    finder: str | None = None
    menu: tuple[str, ...] = ()


def system_texts(messages: Sequence[Any]) -> list[str]:
    """The texts of a Chat-Completions-shaped conversation's system and developer
    messages, in order."""
    return [
        content_text(m.get("content")) for m in messages
        if isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES
    ]


def read_deferral(
    catalog: Catalog, native: Catalog | None, messages: Sequence[Any], *,
    found: tuple[str, ...], emulated_search: bool, client_runs_search: bool,
) -> Deferral:
    """How a request defers its tools (see the module docstring), from what its API's
    adapter read (:class:`selection.plan.TurnInput`): ``catalog``, what the turn
    selects from (its ``native`` tools and any text block); ``messages``, the
    conversation in Chat Completions shape; ``found``, what the history's searches found;
    ``emulated_search``, it brings a search tool the proxy emulates;
    ``client_runs_search``, a search tool the client runs."""
    plain = client_deferral(native, system_texts(messages)) if native is not None else None
    if plain is not None:
        found = tuple(dict.fromkeys([*found, *found_by_search(messages, plain.search, catalog)]))
    client_searches = client_runs_search or plain is not None
    active = bool(catalog.deferred) or emulated_search or client_searches
    if not active:
        return Deferral(False, False, None, found, catalog.fingerprint)
    found_set = set(found)
    undeferred = [tool for tool in catalog.tools if not tool.deferred]
    core = [t.name for t in undeferred if t.name not in found_set]
    core += [name for name in found if (tool := catalog.get(name)) and not tool.deferred]
    identity = fingerprint([t.fingerprint for t in undeferred if t.name not in found_set])
    finder = plain.search if plain is not None else None
    menu = plain.menu.names if plain is not None and plain.menu is not None else ()
    return Deferral(True, client_searches, tuple(core), found, identity, finder, menu)
