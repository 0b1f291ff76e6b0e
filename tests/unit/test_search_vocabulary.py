"""One vocabulary for the tool-search edges: each concept the Messages and Responses edges
share (proxy/apis/messages/search.py; proxy/apis/responses/search.py and history.py) has
one name on both, and the names they had before the edges were made parallel are gone."""

from __future__ import annotations

import importlib
import inspect

import pytest

#: The concepts, by their one name (docs/internals/modules.md, "Tool search: one vocabulary").
VOCABULARY = (
    "read_search_tool",      # the client's search tool the proxy emulates
    "found_in_history",      # the tools earlier searches found, kept loaded
    "upstream_history",      # the history as a server without tool search takes it
    "is_search_call",        # a call of the function standing for the client's search
    "client_search_id",      # the id the client sees on a search the proxy ran
    "client_output",         # a round's output as the client sees it
    "shown_search",          # what the client sees of one search the proxy ran
    "shown_search_events",   # the same, streamed
)
#: The modules of each API's edge.
EDGES = {
    "messages": ("proxy.apis.messages.search",),
    "responses": ("proxy.apis.responses.search", "proxy.apis.responses.history"),
}
#: The names these concepts had on one API or the other before.
RETIRED = ("history_found", "loaded_tools", "upstream_messages", "upstream_items",
           "is_hosted_search", "server_id", "search_call_id", "client_blocks", "search_pair",
           "hosted_search_items", "stream_events")


def functions(modules: tuple[str, ...]) -> set[str]:
    """Names of the functions defined (not imported) in ``modules``."""
    found = set()
    for name in modules:
        module = importlib.import_module(name)
        found |= {n for n, value in vars(module).items()
                  if inspect.isfunction(value) and value.__module__ == name}
    return found


@pytest.mark.parametrize("api", EDGES)
def test_each_edge_names_every_shared_concept_alike(api: str) -> None:
    assert set(VOCABULARY) - functions(EDGES[api]) == set()


def test_the_old_names_are_gone() -> None:
    everywhere = functions(tuple(m for modules in EDGES.values() for m in modules))
    assert everywhere & set(RETIRED) == set()
