"""The methods ``toolprune eval`` compares on the same cases (:mod:`selection.evaluation`):

* ``toolprune``: the product's default pipeline (the configured policy: every signal the
  settings switch on, token budget, dependencies, tier);
* ``dense``: GAIA's loader — dense top-k with τ on the cosines alone (no BM25 term, no
  token budget, no dependencies, no tier): what the proxy did before the ranking levers;
* ``bm25``: Anthropic's tool-search tool, BM25 variant — BM25 top-k, no τ;
* ``oracle``: the expected tools only (the first member of each requirement): their
  schema tokens are the floor any method pays;
* ``-NAME`` (``--ablate NAME``): the pipeline without one signal or expansion
  (:mod:`selection.ranking.signals.registry`), or without the conversation's state (``sticky``).
"""

from __future__ import annotations

from dataclasses import dataclass

from selection.catalog.policy import CandidatePolicy

TOOLPRUNE, DENSE, BM25, ORACLE = "toolprune", "dense", "bm25", "oracle"


@dataclass(frozen=True)
class Method:
    """How one method of the comparison selects: ``scores`` which of a scored case's
    arrays it ranks by (``values`` or ``dense``); ``ranking`` its candidate policy (None:
    the configured one); ``oracle``: the expected tools only; ``dependencies``: whether
    the dependency expansion runs (bundle-mates run when the scorer's signals have them);
    ``sticky``: whether a conversation's state is carried from step to step (off: each
    step starts afresh, ``--ablate sticky``)."""

    name: str
    scores: str = "values"
    ranking: CandidatePolicy | None = None
    oracle: bool = False
    dependencies: bool = True
    sticky: bool = True


#: Classic top-k: k candidates, no dependencies, no tier.
TOP_K = CandidatePolicy(budget="count", tier_size=0, named_only=False)

METHODS = {
    TOOLPRUNE: Method(TOOLPRUNE),
    DENSE: Method(DENSE, scores="dense", ranking=TOP_K, dependencies=False),
    BM25: Method(BM25, ranking=TOP_K, dependencies=False),
    ORACLE: Method(ORACLE, oracle=True),
}


def ablated(name: str) -> Method:
    """The product's pipeline without ``name`` (a signal's or expansion's, whose scorer
    leaves it out, or ``sticky``)."""
    return Method(f"-{name}", sticky=name != STICKY)


#: ``--ablate`` name of the conversation's state carried between steps (not a signal).
STICKY = "sticky"
