"""Dependency expansion from schemas (selection/ranking/dependencies.py), on the real Spotify
catalogue of RestBench (40 REST endpoints) and small hand-made catalogues."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from selection.catalog.catalog import parse_tools
from selection.ranking.dependencies import Need, expand, identifier_needs, producer_index
from tests.support.data import evaluation_set


@pytest.fixture(scope="module")
def spotify() -> Any:
    """RestBench's Spotify catalogue (optional evaluation data: skipped when absent)."""
    return parse_tools(json.loads((evaluation_set("restbench_spotify") / "catalog_spotify.json").read_text()))


def flat(catalog: Any) -> np.ndarray:
    return np.zeros(len(catalog), dtype=np.float32)


def test_needs_come_from_required_identifier_parameters(spotify: Any) -> None:
    assert identifier_needs(spotify.get("POST_users_user_id_playlists")) == (Need("user_id", "user"),)
    assert identifier_needs(spotify.get("POST_playlists_playlist_id_tracks")) == (
        Need("playlist_id", "playlist"),
    )
    # A bare ``id``: the entity its description names ("The Spotify ID of the album").
    assert identifier_needs(spotify.get("GET_albums_id_tracks")) == (Need("id", "album"),)
    # Optional identifiers and tools without parameters need nothing.
    assert identifier_needs(spotify.get("GET_me")) == ()
    assert identifier_needs(spotify.get("GET_search")) == ()


def test_a_playlist_creation_brings_the_current_user_and_adding_tracks_my_playlists(spotify: Any) -> None:
    added = expand(
        spotify, flat(spotify), ["POST_users_user_id_playlists", "POST_playlists_playlist_id_tracks"],
        set(), max_added=4,
    )
    by_parent = {(d.parent, d.name) for d in added}
    assert ("POST_users_user_id_playlists", "GET_me") in by_parent
    assert ("POST_playlists_playlist_id_tracks", "GET_me_playlists") in by_parent
    # The best search producer comes too: it finds playlists that are not "mine".
    assert ("POST_playlists_playlist_id_tracks", "GET_search") in by_parent
    assert all(d.name not in {"POST_users_user_id_playlists", "POST_playlists_playlist_id_tracks"} for d in added)


def test_a_tool_needing_the_same_identifier_is_no_producer(spotify: Any) -> None:
    producers = {spotify.tools[p].name for p, _, _ in producer_index(spotify).producers("playlist")}
    assert "GET_me_playlists" in producers
    assert "GET_playlists_playlist_id" not in producers  # it needs a playlist_id itself


def test_expansion_is_bounded_skips_present_producers_and_low_scores(spotify: Any) -> None:
    parents = ["POST_users_user_id_playlists", "POST_playlists_playlist_id_tracks"]
    assert len(expand(spotify, flat(spotify), parents, set(), max_added=1)) == 1
    assert expand(spotify, flat(spotify), parents, set(), max_added=0) == []
    present = expand(
        spotify, flat(spotify), parents, {"GET_me", "GET_me_playlists", "GET_search"}, max_added=4
    )
    assert present == []
    low = expand(spotify, flat(spotify) - 1.0, parents, set(), max_added=4, min_score=0.1)
    assert low == []


def tool(name: str, description: str, required: dict[str, str] | None = None) -> dict[str, Any]:
    properties = {p: {"type": "string", "description": d} for p, d in (required or {}).items()}
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": list(properties)},
    }}


def test_a_search_tool_is_preferred_and_the_query_breaks_ties() -> None:
    catalog = parse_tools([
        tool("get_order", "Get one order.", {"order_id": "The order's id."}),
        tool("search_orders", "Search orders by text.", {"text": "Words to find."}),
        tool("delete_order", "Delete an order.", {"order_ref": "Order reference."}),
        tool("list_customers", "List customers."),
    ])
    # get_order (a read that names "order") is itself the parent; search_orders is both the
    # best producer and the best search.
    (dependency,) = expand(catalog, flat(catalog), ["get_order"], set(), max_added=4)
    assert dependency == type(dependency)("search_orders", "get_order", Need("order_id", "order"))
    # Nothing names "customer" as an identifier need: no expansion for list_customers.
    assert expand(catalog, flat(catalog), ["list_customers"], set(), max_added=4) == []
