"""Offline evaluation of tool selection on labelled cases (``toolprune eval``). No HTTP.

The evaluation runs the proxy's own steps for every case (proxy/turn/planner.py
``Planner.plan``): a catalogue the policy forwards whole (``Policy.forwards_whole``: at
most ``min_catalog_tools`` tools, or too little to save) is passed through whole;
otherwise ``query_parts`` → scorer → ``select`` with ``pinned`` = a ``tool_choice``
function + ``called_tools(messages)`` + ``text_called_tools`` and the conversation's
:class:`~selection.choosing.state.ConversationState` carried from its previous step, so stickiness
and history pinning count exactly as in the proxy. Conversations are keyed by
:func:`conversation_key` (as if sent as ``X-Conversation-Id``), cases replayed in file
order; tests check that the forwarded lists equal ``Planner.plan``'s. Meta-tool calls are
not simulated: a miss here is a miss the model would have to repair with the escape hatch
(``reachable`` says whether one round could).

Modules: :mod:`.cases` (reading sets), :mod:`.scoring` (scoring cases once),
:mod:`.bm25` (the BM25 anchor), :mod:`.replay` (methods and ``select`` per k),
:mod:`.report` (metrics and tables), :mod:`.plot` (``toolprune eval --plot``).

``toolprune eval --live`` sends each case to a real model, straight and through the proxy
(the proxy's side: ``proxy/cli/live_eval.py``); its pure parts are here:
:mod:`.live` (the outcome of the first call a client gets), :mod:`.live_report` (counts,
end-to-end with its interval, the paired difference), :mod:`.intervals` (Wilson's and
Bonett and Price's paired intervals).
"""

from selection.evaluation.bm25 import BM25Scorer
from selection.evaluation.cases import (
    ALL,
    DEFAULT_KS,
    Case,
    CaseSet,
    conversation_key,
    k_label,
    load_cases,
    parse_ks,
)
from selection.evaluation.intervals import paired_difference, wilson
from selection.evaluation.live import (
    OUTCOMES,
    VIAS,
    Answer,
    case_record,
    latest_records,
    outcome,
)
from selection.evaluation.live_report import format_live_report, summarise_set
from selection.evaluation.methods import METHODS, Method
from selection.evaluation.plot import PlotUnavailable, plot_live, plot_reports
from selection.evaluation.replay import CaseOutcome, policy_for_k, replay
from selection.evaluation.report import (
    evaluate,
    format_report,
    score_distribution,
    strip_miss_lists,
    summarise_k,
    summarise_method,
)
from selection.evaluation.scoring import (
    ABLATIONS,
    EngineScorer,
    ScoredCase,
    ScoredRun,
    Scorer,
    ablation_scorers,
    requirement_ranks,
    score_cases,
)

__all__ = [
    "ABLATIONS",
    "ALL",
    "OUTCOMES",
    "VIAS",
    "Answer",
    "BM25Scorer",
    "DEFAULT_KS",
    "METHODS",
    "Case",
    "CaseOutcome",
    "CaseSet",
    "EngineScorer",
    "Method",
    "PlotUnavailable",
    "ScoredCase",
    "ScoredRun",
    "Scorer",
    "ablation_scorers",
    "case_record",
    "conversation_key",
    "evaluate",
    "format_live_report",
    "format_report",
    "k_label",
    "latest_records",
    "load_cases",
    "outcome",
    "paired_difference",
    "parse_ks",
    "plot_live",
    "plot_reports",
    "policy_for_k",
    "replay",
    "requirement_ranks",
    "score_cases",
    "score_distribution",
    "strip_miss_lists",
    "summarise_set",
    "summarise_k",
    "summarise_method",
    "wilson",
]
