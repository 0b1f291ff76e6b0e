"""Learning selection from the agent's own traffic, as the proxy's usage log drives it
(:mod:`proxy.usage.learning`): evidence pairs learned into a per-catalogue state
(:mod:`selection.learning.learned`), judged on held-back traffic before promotion
(:mod:`selection.learning.guard`, replaying the ranking the usage log kept:
:mod:`selection.learning.logged_ranking`), and the promoted states a process applies
(:mod:`selection.learning.states`, read by the learned signal). Everything here is defined
in the module named beside it, and documented there. Imports :mod:`selection.catalog`."""

from __future__ import annotations

from selection.learning.guard import Fold, HeldBack, judge
from selection.learning.learned import (
    STATUS_WEIGHTS,
    Evidence,
    LearnedState,
    LearnedStateError,
    decode_state,
    encode_state,
    learn,
)
from selection.learning.logged_ranking import (
    LoggedRanking,
    LoggedRankingError,
    decode_ranking,
    encode_ranking,
)
from selection.learning.states import LearnedStates

__all__ = [
    "STATUS_WEIGHTS", "Evidence", "Fold", "HeldBack", "LearnedState", "LearnedStateError",
    "LearnedStates", "LoggedRanking", "LoggedRankingError", "decode_ranking", "decode_state",
    "encode_ranking", "encode_state", "judge", "learn",
]
