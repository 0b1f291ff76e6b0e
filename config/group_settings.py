"""Settings of ranking by the catalogue's groups (``TOOLPRUNE_GROUP_*``, pydantic-settings):
its servers, namespaces and toolkits (:mod:`selection.groups`, :mod:`selection.group_ranking`).
The second group of :class:`config.settings.Settings`, which extends this class; each field's
description is its documentation (``docs/reference/settings.md``).
"""

from __future__ import annotations

from pydantic import Field

from config.server_settings import ServerSettings


class GroupSettings(ServerSettings):
    """How far a tool's score draws on its group's match (weights chosen on the shared
    development sets: docs/measuring-selection.md)."""

    # --- groups -------------------------------------------------------------------
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
