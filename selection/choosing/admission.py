"""Admitting a turn's tools into the conversation's loaded set under its caps: at most
``max_tools`` tools that are neither CORE nor pinned, and a token cap (the forwarded tools'
share of the upstream's context). At a cap, the least recently used tool not selected this
turn is evicted; when nothing is evictable, the lowest-priority candidates are not
admitted. A loaded set over a cap (a pin ended, the cap was lowered) is brought back
under it first. Where an eviction costs the upstream every tool after it (a prefix cache
without chunk reuse: ``count_evicts`` False), ``max_tools`` evicts nothing: a tool that
must come in grows the block at its end, and only free room below ``max_tools`` takes
insurance; the token cap still evicts. Pure: no I/O; times are the turn's ``now`` (Unix
seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from selection.choosing.state import LoadedTool


class LoadedSet:
    """The loaded tools (name → times, in admission order: the block's order) being changed
    by one turn. ``pinned``: loaded tools outside the caps; ``selected``: what the turn
    selected (never evicted for room); ``cost``: a tool's prompt tokens; ``score``: a
    tool's score this turn (None: unscored), which decides what goes when the prompt
    would not fit the context and nothing else is evictable; ``count_evicts``: whether
    ``max_tools`` evicts (module docstring)."""

    def __init__(
        self, loaded: dict[str, LoadedTool], *, max_tools: int, token_cap: int | None,
        pinned: frozenset[str], selected: frozenset[str], cost: Callable[[str], int],
        score: Callable[[str], float | None], count_evicts: bool = True,
    ) -> None:
        self.loaded = loaded
        self.max_tools = max_tools
        #: The count above which tools are evicted for room.
        self.count_cap: float = max_tools if count_evicts else math.inf
        self.cap = token_cap if token_cap is not None else math.inf
        self.pinned = pinned
        self.selected = selected
        self.cost = cost
        self.score = score
        uncapped = [name for name in loaded if name not in pinned]
        self.spent = sum(cost(name) for name in uncapped)
        self.count = len(uncapped)
        self.admitted: list[str] = []
        self.evicted: list[str] = []

    def full(self, cost: int) -> bool:
        """Whether one more tool of ``cost`` tokens would pass a cap."""
        return self.count + 1 > self.max_tools or self.spent + cost > self.cap

    def _over(self, cost: int) -> bool:
        """Whether one more tool of ``cost`` tokens needs an eviction first."""
        return self.count + 1 > self.count_cap or self.spent + cost > self.cap

    def evict(self, over_context: bool) -> bool:
        """Evict the least recently used tool not selected this turn; past the token cap
        (the prompt would not fit the context), else the lowest-scored selected one.
        False when nothing is evictable."""
        victims = [n for n in self.loaded if n not in self.pinned and n not in self.selected]
        if victims:
            # Ties (tools admitted together): the latest in the block, so the longest
            # prefix of it, and of the upstream's KV cache, stays.
            victim = min(reversed(victims), key=lambda n: self.loaded[n].last_used_at)
        elif over_context and (victims := [n for n in self.loaded if n not in self.pinned]):
            victim = min(reversed(victims), key=self._score_or_least)
        else:
            return False
        del self.loaded[victim]
        self.evicted.append(victim)
        self.count -= 1
        self.spent -= self.cost(victim)
        return True

    def _score_or_least(self, name: str) -> float:
        score = self.score(name)
        return -math.inf if score is None else score

    def fit(self) -> None:
        """Bring a loaded set over a cap back under it."""
        while (self.count > self.count_cap or self.spent > self.cap) and self.evict(
            over_context=self.spent > self.cap
        ):
            pass

    def make_room(self, cost: int) -> bool:
        """Evict until one more tool of ``cost`` tokens fits the caps that evict."""
        while self._over(cost):
            if not self.evict(over_context=False):
                return False
        return True

    def add(self, name: str, now: float, cost: int | None) -> None:
        """Load ``name`` (``cost`` None: pinned, outside the caps)."""
        if cost is not None:
            self.count += 1
            self.spent += cost
        self.loaded[name] = LoadedTool(admitted_at=now, last_used_at=now)
        self.admitted.append(name)


def admit(
    loaded: LoadedSet, wanted: Iterable[str], now: float, *, spare: frozenset[str],
    room_only: frozenset[str], insurance: float,
) -> None:
    """Admit ``wanted`` (in priority order) into ``loaded``: pinned tools whatever the
    caps; others when room can be made, except that a ``room_only`` tool never evicts and
    ``spare`` tools (insurance) cost at most ``insurance`` tokens in all."""
    for name in wanted:
        if name in loaded.loaded:
            continue
        if name in loaded.pinned:
            loaded.add(name, now, None)
            continue
        cost = loaded.cost(name)
        if name in spare and cost > insurance:
            continue
        if name in room_only and loaded.full(cost):
            continue
        if not loaded.make_room(cost):
            continue
        if name in spare:
            insurance -= cost
        loaded.add(name, now, cost)


def touched(loaded: Mapping[str, LoadedTool], selected: Iterable[str], now: float) -> None:
    """Mark the loaded tools this turn selected again as used ``now``."""
    for name in selected:
        if name in loaded:
            loaded[name].last_used_at = now
