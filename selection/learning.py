"""Learning selection from the agent's own traffic, as the proxy's usage log drives it
(:mod:`proxy.usage.learning`): evidence pairs learned into a per-catalogue state
(:mod:`selection.learned`), judged on held-back traffic before promotion
(:mod:`selection.learned_guard`, replaying the ranking the usage log kept:
:mod:`selection.logged_ranking`), and the promoted states a process applies
(:mod:`selection.learned_states`, read by the learned signal). Everything here is defined
in the module named beside it, and documented there."""

from __future__ import annotations

from selection.learned import (
    STATUS_WEIGHTS,
    Evidence,
    LearnedState,
    LearnedStateError,
    decode_state,
    encode_state,
    learn,
)
from selection.learned_guard import Fold, HeldBack, judge
from selection.learned_states import LearnedStates
from selection.logged_ranking import (
    LoggedRanking,
    LoggedRankingError,
    decode_ranking,
    encode_ranking,
)

__all__ = [
    "STATUS_WEIGHTS", "Evidence", "Fold", "HeldBack", "LearnedState", "LearnedStateError",
    "LearnedStates", "LoggedRanking", "LoggedRankingError", "decode_ranking", "decode_state",
    "encode_ranking", "encode_state", "judge", "learn",
]
