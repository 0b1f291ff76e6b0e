"""What a plan's choices cost the user in seconds, on a server whose speeds are known.

A request costs the prompt tokens the server evaluates ÷ its prefill speed, plus the tokens
the model generates ÷ its decode speed, plus a fixed cost per request (:class:`ServerSpeed`).
Each choice that trades prompt tokens against model rounds is made here by expected
seconds: a tool definition is worth its prefill when the chance ``p`` it is needed times
the seconds it saves then is at least the chance it is not times its prefill
(:func:`worth`). What is saved:

* a **search round** (:func:`search_round_s`): the model writing a ``search_tools`` /
  ``load_tools`` call (:attr:`ServerSpeed.search_call_tokens`: what the model served
  wrote in its own search rounds, else :data:`SEARCH_CALL_TOKENS`) and one more request;
  the definitions it then reads are read either way;
* a **bridged call** (:func:`bridge_call_s`): a tool outside the block is called through
  ``call_tool``, whose wrapper the model writes around the call
  (:data:`BRIDGE_CALL_TOKENS` more than the call by the tool's own name).

The chance a tool is needed comes from where the turn's ranking puts it: its rank, its
score, and how far that lies below the best tool's (:func:`turn_odds`, a logistic model
fitted by ``benchmarks/turn_odds.py`` on toolprune's own ranking of MetaTool, one tool a
case, and Seal-Tools, 2.7 a case; BFCL, API-Bank, NESTFUL, LiveMCPBench, RestBench and
ToolBench were not used): two tools scored alike are about as likely, and a turn whose
best tools all score low is matched by none of them with confidence, where the rank alone
gave each rank one share. For the first block of a conversation, the chance that the
session's later turns need it too (:func:`session_odds`). Where the usage log holds traffic,
learning from it (:mod:`selection.learning`) moves tools up the ranking. Pure: no I/O.

Where the speeds are not known, none of this applies: the token-only plan stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog
from selection.catalog.tokens import tool_tokens

#: Fixed seconds of one request to the server (the profiles of
#: ``benchmarks/support/hardware_profiles.py``).
REQUEST_S = 0.05
#: Tokens a model writes for one ``search_tools`` / ``load_tools`` call before the server
#: has shown its own: the call's syntax, the meta-tool's name and a query of a few words,
#: as the Qwen2.5 chat template renders it (hermes ``<tool_call>``). The long session's
#: scripted rounds write 33 (``benchmarks.agent_sessions --long``, the counts of its
#: llama-server); a model that reasons or writes prose before its call writes far more.
#: The server's answers tell what the model in use writes (``proxy.servers.speeds``).
SEARCH_CALL_TOKENS = 24
#: Tokens a call through ``call_tool`` takes beyond the same call by the tool's own name
#: (``call_tool", "arguments": {"name": "`` and a closing brace; Qwen2.5's tokenizer).
BRIDGE_CALL_TOKENS = 12
#: Calls a session makes of a tool it calls at all (the long session: 22 calls of 18 tools).
CALLS_PER_TOOL = 1.2
#: The logistic model of the chance a turn needs a tool of its ranking (:func:`turn_odds`):
#: intercept, per unit of score below the best tool's, per unit of ln rank, per unit of
#: the tool's score. Fitted by ``benchmarks/turn_odds.py`` (iteratively reweighted least
#: squares) on the 8 best tools of 1,500 MetaTool and 1,500 Seal-Tools cases (24,000
#: observations); log-loss 0.259, against 0.360 for the share needed at each rank alone
#: and 0.344 for the rank and the gap without the score.
ODDS_INTERCEPT = -3.120
ODDS_PER_GAP = -4.976
ODDS_PER_LOG_RANK = -1.206
ODDS_PER_SCORE = 6.055
#: Later user turns of a session that stay on its first turn's subject (a session's
#: first block serves them too): the first block's tools are weighed by
#: 1 − (1 − p)^(1 + TOPIC_TURNS).
TOPIC_TURNS = 2


@dataclass(frozen=True)
class ServerSpeed:
    """The upstream's speeds for one model, tokens per second; the tokens the model
    writes in a round that only searches (``search_call_tokens``: its call, and whatever
    it reasons or says first) and the fixed seconds of one request (``request_s``)."""

    prefill_tps: float
    decode_tps: float
    search_call_tokens: float = SEARCH_CALL_TOKENS
    request_s: float = REQUEST_S

    def prefill_s(self, tokens: float) -> float:
        return tokens / self.prefill_tps

    def decode_s(self, tokens: float) -> float:
        return tokens / self.decode_tps

    def shown(self) -> dict[str, float]:
        return {"prefill_tokens_per_s": round(self.prefill_tps, 1),
                "decode_tokens_per_s": round(self.decode_tps, 1),
                "search_call_tokens": round(self.search_call_tokens, 1)}


def search_round_s(speed: ServerSpeed) -> float:
    """Seconds of a search round the model makes (its call written, one more request)."""
    return speed.decode_s(speed.search_call_tokens) + speed.request_s


def bridge_call_s(speed: ServerSpeed) -> float:
    """Seconds a call through the bridge costs beyond the call by the tool's own name."""
    return speed.decode_s(BRIDGE_CALL_TOKENS)


@dataclass(frozen=True)
class Ranked:
    """A tool as a turn's ranking places it: its ``rank`` (1-based), its ``score`` (the
    ranking's fused value: cosine-scaled, about −0.2 to 1), the score's ``gap`` below the
    best tool's (≥ 0) and its definition's prompt ``tokens``."""

    rank: int
    score: float
    gap: float
    tokens: int


def turn_odds(tool: Ranked) -> float:
    """The chance the turn needs ``tool``: 1 / (1 + exp(−(a + b·gap + c·ln rank +
    d·score))), the coefficients :data:`ODDS_INTERCEPT`, :data:`ODDS_PER_GAP`,
    :data:`ODDS_PER_LOG_RANK`, :data:`ODDS_PER_SCORE`."""
    logit = (ODDS_INTERCEPT + ODDS_PER_GAP * max(tool.gap, 0.0)
             + ODDS_PER_LOG_RANK * math.log(tool.rank) + ODDS_PER_SCORE * tool.score)
    if logit < 0:  # the same function, written so that no exponent overflows
        return math.exp(logit) / (1.0 + math.exp(logit))
    return 1.0 / (1.0 + math.exp(-logit))


def session_odds(tool: Ranked) -> float:
    """The chance the session needs the first turn's ``tool``: that turn or one of
    :data:`TOPIC_TURNS` later ones on its subject."""
    return 1.0 - (1.0 - turn_odds(tool)) ** (1 + TOPIC_TURNS)


def worth(p: float, saved_s: float, cost_s: float) -> bool:
    """Whether spending ``cost_s`` seconds on what is needed with chance ``p`` and then
    saves ``saved_s`` is expected to pay: p × saved ≥ (1 − p) × cost."""
    return p * saved_s >= (1.0 - p) * cost_s


def first_block_count(speed: ServerSpeed, ranked: Sequence[Ranked], least: int = 1) -> int:
    """How many of a conversation's first-turn candidates (``ranked``: each one's place
    and prompt tokens, best first) its first block holds: those whose prefill the session is
    expected to earn back in search rounds and bridged calls saved, and never fewer than
    ``least`` (the token-only plan's top-k: the seconds add to it, they do not take from
    it; a first block the seconds made smaller cost a long session 1–2% more seconds on
    every hardware profile, ``docs/agent-sessions.md``, since the search rounds it
    spares cost more than :func:`search_round_s` assumes before it has seen one)."""
    saved = search_round_s(speed) + CALLS_PER_TOOL * bridge_call_s(speed)
    kept = [count for count, tool in enumerate(ranked, 1)
            if worth(session_odds(tool), saved, speed.prefill_s(tool.tokens))]
    return max(*kept, least, 1)


def delivered_count(speed: ServerSpeed, ranked: Sequence[Ranked]) -> int:
    """How many of the tools a turn would deliver in the conversation (``ranked``: each
    one's place in the ranking that found it and its definition's tokens, best first) are
    worth their prefill against the search round that finds them otherwise: a prefix of
    them, possibly empty."""
    saved = search_round_s(speed)
    count = 0
    for tool in ranked:
        if not worth(turn_odds(tool), saved, speed.prefill_s(tool.tokens)):
            break
        count += 1
    return count


def ranked_tools(catalog: Catalog, scores: np.ndarray, exact: Mapping[str, int] | None,
                 positions: Sequence[int]) -> list[Ranked]:
    """The tools at catalogue ``positions`` as ``scores`` (float32 ``(len(catalog),)``)
    rank them, in the order given: each one's rank, score, gap below the best score and
    prompt tokens."""
    best = float(scores.max()) if len(scores) else 0.0
    return [Ranked(int((scores > scores[position]).sum()) + 1, float(scores[position]),
                   best - float(scores[position]), tool_tokens(catalog.tools[position], exact))
            for position in positions]


def best_ranked(catalog: Catalog, scores: np.ndarray, exact: Mapping[str, int] | None,
                count: int) -> list[Ranked]:
    """The ``count`` best-scored tools (``scores``: float32 ``(len(catalog),)``), best
    first (:func:`ranked_tools`)."""
    best = np.argsort(-scores, kind="stable")[:count]
    return ranked_tools(catalog, scores, exact, best.tolist())
