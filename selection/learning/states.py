"""The promoted learned states a process applies (:mod:`selection.learning.learned`), in memory, by
catalogue fingerprint, with their bindings to the catalogues they serve. No I/O: the usage
log (:mod:`proxy.usage.learning_schedule`) and Redis (:mod:`proxy.usage.learning_share`)
fill it."""

from __future__ import annotations

import threading

from selection.catalog.catalog import Catalog
from selection.learning.learned import LearnedIndex, LearnedState, LearnedStateError


class LearnedStates:
    """The promoted states in memory, by catalogue fingerprint, and their bindings
    (built once per state). Safe to replace from another thread."""

    def __init__(self, embedder: str) -> None:
        self.embedder = embedder
        self._states: dict[str, LearnedState] = {}
        self._bound: dict[str, LearnedIndex] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def states(self) -> list[LearnedState]:
        return list(self._states.values())

    def get(self, catalog: str) -> LearnedState | None:
        return self._states.get(catalog)

    def install(self, state: LearnedState) -> None:
        """Use ``state`` for its catalogue from now on. Raises LearnedStateError for a
        state of another embedder."""
        if state.embedder != self.embedder:
            raise LearnedStateError("learned state of another embedder")
        with self._lock:
            self._states[state.catalog] = state
            self._bound.pop(state.catalog, None)

    def install_if_newer(self, state: LearnedState) -> bool:
        """:meth:`install` ``state`` unless the state in use for its catalogue has the same
        or a higher version; whether it was installed. Raises LearnedStateError for a
        state of another embedder."""
        if state.embedder != self.embedder:
            raise LearnedStateError("learned state of another embedder")
        with self._lock:
            held = self._states.get(state.catalog)
            if held is not None and held.version >= state.version:
                return False
            self._states[state.catalog] = state
            self._bound.pop(state.catalog, None)
        return True

    def remove(self, catalog: str) -> None:
        with self._lock:
            self._states.pop(catalog, None)
            self._bound.pop(catalog, None)

    def bound(self, catalog: Catalog) -> LearnedIndex | None:
        """The state of ``catalog``'s fingerprint bound to it, or None."""
        state = self._states.get(catalog.fingerprint)
        if state is None:
            return None
        bound = self._bound.get(catalog.fingerprint)
        if bound is None or bound.state is not state:
            bound = LearnedIndex.bind(state, catalog)
            with self._lock:
                self._bound[catalog.fingerprint] = bound
        return bound
