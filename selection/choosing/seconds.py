"""What a plan's choices cost the user in seconds, on a server whose speeds are known.

A request costs the prompt tokens the server evaluates ÷ its prefill speed, plus the tokens
the model generates ÷ its decode speed, plus a fixed cost per request (:class:`ServerSpeed`).
Each choice that trades prompt tokens against model rounds is made here by expected
seconds: a tool definition is worth its prefill when the chance ``p`` it is needed times
the seconds it saves then is at least the chance it is not times its prefill
(:func:`worth`). What is saved:

* a **search round** (:func:`search_round_s`): the model writing a ``search_tools`` /
  ``load_tools`` call (:data:`SEARCH_CALL_TOKENS`) and one more request; the definitions
  it then reads are read either way;
* a **bridged call** (:func:`bridge_call_s`): a tool outside the block is called through
  ``call_tool``, whose wrapper the model writes around the call
  (:data:`BRIDGE_CALL_TOKENS` more than the call by the tool's own name).

The chance a tool is needed comes from where the turn's ranking puts it
(:data:`TURN_RANK_ODDS`: the share of needed tools at each rank of toolprune's own ranking,
measured with ``toolprune eval`` on MetaTool, one tool a case, and Seal-Tools, 2.7 a case:
the mean of the two per rank; BFCL, API-Bank, NESTFUL, LiveMCPBench, RestBench and
ToolBench were not used), and, for the first block of a conversation, the chance that the
session's later turns need it too (:func:`session_odds`). Where the usage log holds traffic,
learning from it (:mod:`selection.learning`) moves tools up the ranking. Pure: no I/O.

Where the speeds are not known, none of this applies: the token-only plan stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.tokens import tool_tokens

#: Fixed seconds of one request to the server (the profiles of
#: ``benchmarks/support/hardware_profiles.py``).
REQUEST_S = 0.05
#: Tokens a model writes for one ``search_tools`` / ``load_tools`` call: the call's syntax,
#: the meta-tool's name and a query of a few words, as the Qwen2.5 chat template renders it
#: (hermes ``<tool_call>``; the long session's scripted calls: 20–28).
SEARCH_CALL_TOKENS = 24
#: Tokens a call through ``call_tool`` takes beyond the same call by the tool's own name
#: (``call_tool", "arguments": {"name": "`` and a closing brace; Qwen2.5's tokenizer).
BRIDGE_CALL_TOKENS = 12
#: Calls a session makes of a tool it calls at all (the long session: 22 calls of 18 tools).
CALLS_PER_TOOL = 1.2
#: The chance that a turn needs its ranking's tool at rank 1, 2, … (then
#: :data:`TAIL_ODDS`): MetaTool's and Seal-Tools' needed-tool shares per rank, averaged
#: (see the module docstring).
TURN_RANK_ODDS = (0.75, 0.22, 0.22, 0.15, 0.10, 0.10, 0.04, 0.04)
TAIL_ODDS = 0.02
#: Later user turns of a session that stay on its first turn's subject (a session's
#: first block serves them too): the first block's tools are weighed by
#: 1 − (1 − p)^(1 + TOPIC_TURNS).
TOPIC_TURNS = 2


@dataclass(frozen=True)
class ServerSpeed:
    """The upstream's speeds for one model, tokens per second, and the fixed seconds of
    one request (``request_s``)."""

    prefill_tps: float
    decode_tps: float
    request_s: float = REQUEST_S

    def prefill_s(self, tokens: float) -> float:
        return tokens / self.prefill_tps

    def decode_s(self, tokens: float) -> float:
        return tokens / self.decode_tps

    def shown(self) -> dict[str, float]:
        return {"prefill_tokens_per_s": round(self.prefill_tps, 1),
                "decode_tokens_per_s": round(self.decode_tps, 1)}


def search_round_s(speed: ServerSpeed) -> float:
    """Seconds of a search round the model makes (its call written, one more request)."""
    return speed.decode_s(SEARCH_CALL_TOKENS) + speed.request_s


def bridge_call_s(speed: ServerSpeed) -> float:
    """Seconds a call through the bridge costs beyond the call by the tool's own name."""
    return speed.decode_s(BRIDGE_CALL_TOKENS)


def turn_odds(rank: int) -> float:
    """The chance the turn needs its ranking's tool at ``rank`` (1-based)."""
    return TURN_RANK_ODDS[rank - 1] if 1 <= rank <= len(TURN_RANK_ODDS) else TAIL_ODDS


def session_odds(rank: int) -> float:
    """The chance the session needs the first turn's tool at ``rank``: that turn or one
    of :data:`TOPIC_TURNS` later ones on its subject."""
    return 1.0 - (1.0 - turn_odds(rank)) ** (1 + TOPIC_TURNS)


def worth(p: float, saved_s: float, cost_s: float) -> bool:
    """Whether spending ``cost_s`` seconds on what is needed with chance ``p`` and then
    saves ``saved_s`` is expected to pay: p × saved ≥ (1 − p) × cost."""
    return p * saved_s >= (1.0 - p) * cost_s


def first_block_count(speed: ServerSpeed, tokens: Sequence[int], least: int = 1) -> int:
    """How many of a conversation's first-turn candidates (``tokens``: each one's prompt
    tokens, best-ranked first) its first block holds: those whose prefill the session is
    expected to earn back in search rounds and bridged calls saved, and never fewer than
    ``least`` (the token-only plan's top-k: the seconds add to it, they do not take from
    it; a first block the seconds made smaller cost a long session 1–2% more seconds on
    every hardware profile, ``docs/agent-sessions.md``, since the search rounds it
    spares cost more than :func:`search_round_s` assumes before it has seen one)."""
    saved = search_round_s(speed) + CALLS_PER_TOOL * bridge_call_s(speed)
    kept = [rank for rank, cost in enumerate(tokens, 1)
            if worth(session_odds(rank), saved, speed.prefill_s(cost))]
    return max(*kept, least, 1)


def delivered_count(speed: ServerSpeed, ranked: Sequence[tuple[int, int]]) -> int:
    """How many of the tools a turn would deliver in the conversation (``ranked``: each
    one's rank in the ranking that found it and its definition's tokens, best first) are
    worth their prefill against the search round that finds them otherwise: a prefix of
    them, possibly empty."""
    saved = search_round_s(speed)
    count = 0
    for rank, cost in ranked:
        if not worth(turn_odds(rank), saved, speed.prefill_s(cost)):
            break
        count += 1
    return count


def ranked_costs(catalog: Catalog, scores: np.ndarray, exact: Mapping[str, int] | None,
                 count: int) -> list[int]:
    """The prompt tokens of the ``count`` best-scored tools (``scores``: float32
    ``(len(catalog),)``), best first."""
    best = np.argsort(-scores, kind="stable")[:count]
    return [tool_tokens(catalog.tools[int(position)], exact) for position in best]
