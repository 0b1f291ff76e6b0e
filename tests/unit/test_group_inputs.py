"""Tests for selection.ranking.group_inputs: within a server, the mates that produce a tool's
required inputs (OpenStreetMap's route directions take the coordinates its geocoder
returns)."""

from __future__ import annotations

import numpy as np

from selection.catalog.catalog import parse_tools
from selection.catalog.groups import find_groups
from selection.ranking.group_inputs import input_producers


def function(name: str, description: str, *required: str) -> dict:
    properties = {p: {"type": "string"} for p in required}
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(required)}}}


CATALOG = parse_tools([
    function("osm__get_route_directions", "Route between two points.", "from_coordinates",
             "to_coordinates"),
    function("osm__geocode_address", "Returns the coordinates of an address.", "address"),
    function("osm__find_nearby_places", "Places near coordinates.", "coordinates", "query"),
    function("maps__geocode", "Returns coordinates for a place name.", "place"),
    function("maps__static_map", "Render a map image.", "center"),
])
GROUP_OF = find_groups(CATALOG).of
SCORES = np.full(len(CATALOG), 0.5, dtype=np.float32)


def test_a_tools_inputs_come_from_the_group_mate_that_names_them() -> None:
    added = input_producers(CATALOG, GROUP_OF, SCORES, ["osm__get_route_directions"], set(),
                            max_added=4)
    # the other server's geocoder names coordinates too, but is not a mate; a mate that
    # needs coordinates itself produces none
    assert [(d.name, d.parent) for d in added] == [
        ("osm__geocode_address", "osm__get_route_directions")]


def test_producers_respect_tau_the_budget_and_what_is_present() -> None:
    parent = ["osm__get_route_directions"]
    below = SCORES.copy()
    below[1] = 0.1
    assert input_producers(CATALOG, GROUP_OF, below, parent, set(), max_added=4, min_score=0.3) == []
    assert input_producers(CATALOG, GROUP_OF, SCORES, parent, set(), max_added=0) == []
    assert input_producers(CATALOG, GROUP_OF, SCORES, parent, {"osm__geocode_address"},
                           max_added=4) == []
    ungrouped = np.full(len(CATALOG), -1, dtype=np.int32)
    assert input_producers(CATALOG, ungrouped, SCORES, parent, set(), max_added=4) == []
