"""Settings of the ranking signals and expansions (pydantic-settings), one group of knobs
per signal of :mod:`selection.ranking.signals.registry`, each field named as the signal's
``Params`` field it sets (the first of each switches the signal: 0 or false is off; the
name signal runs while either of its two is on). The
second group of :class:`config.settings.Settings`, which extends this class; each field's
description is its documentation (``docs/reference/settings.md``).
"""

from __future__ import annotations

from pydantic import Field

from config.server_settings import ServerSettings


class SignalSettings(ServerSettings):
    """The signals' knobs (weights chosen on the shared development sets:
    docs/measuring-selection.md)."""

    # --- ranking signals ----------------------------------------------------------
    dense_weight: float = Field(
        1.0,
        ge=0.0,
        le=2.0,
        description="Weight of the dense signal: the cosine between the request's best part "
        "and a tool's best text. 0: off (BM25, names and groups rank alone).",
    )
    lexical_weight: float = Field(
        0.1,
        ge=0.0,
        le=2.0,
        description="Weight of the BM25 score (normalised by the turn's best) added to the "
        "cosine: a request that uses a tool's own words ranks it first. 0: dense only.",
    )
    name_weight: float = Field(
        0.2,
        ge=0.0,
        le=2.0,
        description="Weight of the share of a tool's name words that the request uses, "
        "added to the score (`list the pull requests` → `list_pull_requests`). 0: no such "
        "score; a request that names its tools still gets them alone (`named_only`).",
    )
    named_only: bool = Field(
        True,
        description="When a request that asks for one thing uses every word of the best "
        "candidate's name (two or more words), forward only the tools it names; the rest "
        "are listed in the meta-tool's tier. Off: such a request is ranked like any other "
        "(the name score stays: `name_weight`).",
    )
    group_weight: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="How far a grouped tool's score is drawn toward its group's best tool "
        "(servers, namespaces, toolkits: docs/measuring-selection.md); groups of more than "
        "`group_size` tools draw proportionally less. 0 (with the two weights below): "
        "catalogues rank as if they had no groups.",
    )
    group_lexical_weight: float = Field(
        0.2,
        ge=0.0,
        le=2.0,
        description="Weight of the BM25 score of the request over a group's text (its name, "
        "description and its tools' words), normalised by the turn's best, added to each "
        "of the group's tools.",
    )
    group_vector_weight: float = Field(
        0.0,
        ge=0.0,
        le=2.0,
        description="Weight of the cosine between the request and a group's vector (the mean "
        "of its tools' text vectors) added to each of its tools (0: measured no better).",
    )
    group_size: int = Field(
        4,
        ge=0,
        description="Groups of more tools than this draw their tools toward their best "
        "tool by `group_weight` × this / their size (0: all by `group_weight`).",
    )
    learned_prior: bool = Field(
        True,
        description="Rank with the states learned from the agent's traffic (`learn`, "
        "docs/learning.md) for the catalogues they were promoted for; off: they are kept and "
        "reported but not applied.",
    )

    # --- expansions -------------------------------------------------------------
    max_dependencies: int = Field(
        4,
        ge=0,
        description="Producer tools added per turn for the identifiers selected tools "
        "need (`user_id` → the tool that returns it). 0: off.",
    )
    bundle_mates: bool = Field(
        True,
        description="A selected tool brings the other members of its bundles (the policy "
        "file's, and the `server__tool` namespaces of at most `max_bundle_size` tools). "
        "Off: bundles only group the meta-tool's menu.",
    )

    def signal_values(self) -> dict[str, object]:
        """The values of every setting, by field name: what
        :meth:`selection.ranking.signals.registry.Signals.from_values` reads each signal's knobs
        from."""
        return self.model_dump()
