"""Scoring ``toolprune eval --live``: the first call a client gets from a real model, for
one labelled case, sent two ways (``via``): ``direct`` (every tool of the case, straight
to the server) and ``toolprune`` (through the proxy). No I/O: the command
(``proxy/cli/live_eval.py``) sends the requests and hands each answer here as an
:class:`Answer`; the record it keeps per case is :func:`case_record`'s.

Outcomes, one per case and via (:func:`outcome`):

* ``correct``: the call names an expected tool the model had on its first round without
  asking (the forwarded block, or a tool toolprune delivered before the first round);
* ``recovered_by_search``: it names an expected tool that reached the model otherwise
  (a ``load_tools`` / ``search_tools`` call of the model, or a name it read in the
  meta-tool's menu);
* ``selection_error``: an expected tool was available to the model, and it called
  another tool or none;
* ``retrieval_miss``: no expected tool ever reached the model;
* ``errors``: the server or the wire failed (an HTTP error, a context overflow, an answer
  that is not a chat completion).

A case that expects no call (``expected: []``) is ``correct`` when the answer calls none,
``selection_error`` when it calls one. A requirement with alternatives
(``expected_any_of``) is met by any of its members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from selection.evaluation.cases import Case

DIRECT, TOOLPRUNE = "direct", "toolprune"
#: The two ways each case is sent, in report order.
VIAS = (DIRECT, TOOLPRUNE)
CORRECT = "correct"
RECOVERED = "recovered_by_search"
SELECTION_ERROR = "selection_error"
RETRIEVAL_MISS = "retrieval_miss"
ERRORS = "errors"
#: Every outcome, in report order.
OUTCOMES = (CORRECT, RECOVERED, SELECTION_ERROR, RETRIEVAL_MISS, ERRORS)
#: Outcomes in which the client got the right call.
SUCCESSES = frozenset({CORRECT, RECOVERED})


@dataclass(frozen=True)
class Answer:
    """What one via got for a case.

    ``called``: the name of the first tool call the client got (None: text only);
    ``error``: why the server or the wire failed (None: an answer came); ``first``: the
    tools the model had on its first round without asking; ``reached``: tools that
    reached it later (loaded, or found, by its own meta-calls); ``prompt_tokens``: prompt
    tokens over every round (the server's ``timings.prompt_n`` where it gives them, which
    leave out what its prefix cache reused; else ``usage.prompt_tokens``; None: neither);
    ``seconds``: the server's prefill and generation time over every round (``timings``
    ``prompt_ms`` + ``predicted_ms``) where it gives them for every round, else
    ``wall_s``; ``timed_by``: ``timings`` or ``wall``; ``wall_s``: the client's wait,
    seconds; ``rounds``: requests the server got.
    """

    called: str | None = None
    error: str | None = None
    first: frozenset[str] = field(default_factory=frozenset)
    reached: frozenset[str] = field(default_factory=frozenset)
    prompt_tokens: int | None = None
    seconds: float = 0.0
    timed_by: str = "wall"
    wall_s: float = 0.0
    rounds: int = 1


def expected_names(case: Case) -> set[str]:
    """Every name that meets one of ``case``'s requirements."""
    return {name for unit in case.requirements for name in unit}


def outcome(case: Case, answer: Answer) -> str:
    """The outcome of ``answer`` for ``case`` (see the module docstring)."""
    if answer.error is not None:
        return ERRORS
    if case.expects_none:
        return CORRECT if answer.called is None else SELECTION_ERROR
    expected = expected_names(case)
    if answer.called in expected:
        return CORRECT if answer.called in answer.first else RECOVERED
    if expected & (answer.first | answer.reached):
        return SELECTION_ERROR
    return RETRIEVAL_MISS


def via_record(case: Case, answer: Answer) -> dict[str, Any]:
    """One via's part of a case's record (JSON-ready): its outcome, the call, the error,
    whether an expected tool was in the first round, and the costs."""
    expected = expected_names(case)
    return {
        "outcome": outcome(case, answer),
        "called": answer.called,
        "error": answer.error,
        "expected_in_first": bool(expected & answer.first),
        "expected_reached": bool(expected & (answer.first | answer.reached)),
        "first_tools": len(answer.first),
        "rounds": answer.rounds,
        "prompt_tokens": answer.prompt_tokens,
        "seconds": round(answer.seconds, 4),
        "timed_by": answer.timed_by,
        "wall_s": round(answer.wall_s, 4),
    }


def case_record(set_name: str, case: Case, answers: Mapping[str, Answer]) -> dict[str, Any]:
    """A case's record (one JSON line of the results file): the set, the case's id and
    conversation, its expected tools, and each via's :func:`via_record`."""
    return {
        "set": set_name,
        "id": case.id,
        "conversation": case.conversation,
        "expected": [list(unit) for unit in case.requirements],
        **{via: via_record(case, answers[via]) for via in VIAS},
    }


def latest_records(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Case records by (set, id), the last of each winning (a re-run conversation's
    records follow its earlier ones in the results file)."""
    return {(str(r["set"]), str(r["id"])): r for r in records}
