"""Learning selection from the agent's own traffic, as the proxy's usage log drives it
(:mod:`proxy.usage.learning`): evidence pairs learned into a per-catalogue state
(:mod:`selection.learned`), judged on held-back traffic before promotion
(:mod:`selection.learned_guard`), and the promoted states a process applies
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

__all__ = [
    "STATUS_WEIGHTS", "Evidence", "Fold", "HeldBack", "LearnedState", "LearnedStateError",
    "LearnedStates", "decode_state", "encode_state", "judge", "learn",
]
