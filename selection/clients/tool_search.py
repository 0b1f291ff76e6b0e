"""The client's own tool search, emulated: the request brings a search tool the upstream
cannot run (Anthropic's ``tool_search_tool_regex_*`` / ``tool_search_tool_bm25_*`` server
tools, OpenAI's hosted ``tool_search``), so the upstream model is offered a plain function
that stands for it (:func:`search_meta_tools`) and the proxy runs the model's calls itself
(:func:`regex_search`, :func:`ranked_search`), with the tool's own semantics. No I/O.

Semantics, after Anthropic's tool search tool page and OpenAI's tool search guide:

* regex: Python ``re.search`` syntax, a pattern of at most :data:`MAX_PATTERN_CHARS`
  characters, matched against each searchable tool's name, description, argument names
  and argument descriptions (each field on its own, so ``^`` and ``$`` anchor to it).
  Evaluated by the ``regex`` package with a deadline (:data:`REGEX_TIMEOUT_S`): a pattern
  that backtracks catastrophically ends in ``execution_time_exceeded``, never holds the
  event loop.
* natural-language query (BM25 variant, OpenAI's hosted search): the tools the query
  names first (:mod:`selection.clients.name_search`: a tool's name, or close to it, found with no
  embedder), then toolprune's own ranking (the scores of
  :meth:`selection.ranking.engine.SelectionEngine.score`), or BM25 alone when the embedder fails;
  :func:`ranked_search`'s ``threshold`` keeps out the tools the query does not match (τ,
  or sharing no word), so a search that matches nothing finds nothing.

What is searched is the pool: every catalogue tool but the client's CORE
(:attr:`selection.catalog.catalog.Catalog.kept`). At most :data:`SEARCH_RESULTS` tools are
found per call. Errors carry the codes of Anthropic's ``tool_search_tool_result_error``
(``invalid_tool_input``, ``execution_time_exceeded``; ``unavailable`` is read from
histories another server wrote); an API adapter writes them in its own shape.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import regex

from selection.catalog.catalog import Catalog, Tool
from selection.choosing.candidates import semantic_candidates
from selection.clients.meta_tools import MetaTools, answer_text, free_name, short_purpose
from selection.clients.name_search import named_tools

#: Longest regex pattern accepted (Anthropic's limit for its regex variant).
MAX_PATTERN_CHARS = 200
#: Tools one search finds at most.
SEARCH_RESULTS = 5
#: Seconds a regex search may take over the whole pool.
REGEX_TIMEOUT_S = 0.5

#: ``error_code`` values (Anthropic's ``ToolSearchToolResultErrorCode``).
INVALID_TOOL_INPUT = "invalid_tool_input"
UNAVAILABLE = "unavailable"
EXECUTION_TIME_EXCEEDED = "execution_time_exceeded"

SearchKind = Literal["regex", "query"]


@dataclass(frozen=True)
class ClientSearch:
    """The search tool a request brings. ``kind``: ``regex`` (a pattern) or ``query``
    (natural language). ``name``: the name the client knows the tool by
    (``tool_search_tool_regex``, ``tool_search``…): the function offered upstream takes
    it unless a catalogue tool has it (:func:`search_meta_tools`)."""

    kind: SearchKind
    name: str


@dataclass(frozen=True)
class SearchResult:
    """One executed search call.

    ``argument``: the pattern or query as the model gave it (None when its arguments
    held none). ``found``: matching tool names, best first (at most
    :data:`SEARCH_RESULTS`; already forwarded ones included). ``error`` / ``message``:
    an error code and its explanation (nothing found then).
    """

    kind: SearchKind
    argument: str | None
    found: tuple[str, ...] = ()
    error: str | None = None
    message: str | None = None

    def content(self, catalog: Catalog) -> str:
        """The function's answer for the upstream model (JSON text): the tools found, each
        with a short purpose, or the error. It depends on the result and the catalogue
        only, so an adapter that rebuilds a search's exchange from the client's history
        (where the API keeps the found names or the error) writes the same text on every
        later turn, and the upstream's cached prefix holds."""
        if self.error is not None:
            return answer_text({"error_code": self.error, "error": self.message})
        found = [
            {"name": name, "purpose": short_purpose(tool)}
            for name in self.found
            if (tool := catalog.get(name)) is not None
        ]
        note = (
            "The found tools are loaded: call them directly." if found
            else "No tool matched: search again with other terms."
        )
        return answer_text({"found": found, "note": note})


def search_argument(arguments: str) -> str | None:
    """The ``query`` (or ``pattern``) string of a search call's JSON ``arguments``; None
    when absent, empty or not a string."""
    try:
        parsed = json.loads(arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    value = parsed.get("query", parsed.get("pattern"))
    return value if isinstance(value, str) and value.strip() else None


def invalid_input(kind: SearchKind, argument: str | None, message: str) -> SearchResult:
    return SearchResult(kind, argument, error=INVALID_TOOL_INPUT, message=message)


def search_meta_tools(search: ClientSearch, catalog: Catalog) -> MetaTools:
    """The function (Chat Completions shape; ``functions`` entry for a legacy catalogue)
    that stands for the client's search tool, as the only meta-tool of the request.
    Its name is the client's, or ``toolprune_<name>`` when a catalogue tool has it. Its
    text depends on the catalogue only (byte-identical for a conversation)."""
    name = free_name(search.name, set(catalog.names))
    pool = len(catalog) - len(catalog.kept)
    if search.kind == "regex":
        description = (
            f"Search {pool} more tools than the ones you have with a Python regular "
            "expression (re.search, at most 200 characters), matched against tool names, "
            "descriptions and argument names and descriptions; (?i) ignores case. The "
            "matching tools are loaded: call them next."
        )
        about = "A Python regular expression, at most 200 characters, e.g. (?i)pull.?request"
    else:
        description = (
            f"Search {pool} more tools than the ones you have: describe what the tool "
            "must do. The best matching tools are loaded: call them next."
        )
        about = "What the tool must do, in a few words."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": about}},
        "required": ["query"],
    }
    function = {"name": name, "description": description, "parameters": parameters}
    definition = function if catalog.legacy else {"type": "function", "function": function}
    return MetaTools(None, None, (definition,), client_search=name)


def _fields(tool: Tool) -> Iterator[str]:
    """The texts a regex is matched against: name, description, argument names and
    argument descriptions (top-level properties)."""
    yield tool.name
    yield tool.description
    properties = tool.parameters.get("properties")
    if isinstance(properties, dict):
        for argument, schema in properties.items():
            yield str(argument)
            about = schema.get("description") if isinstance(schema, dict) else None
            if isinstance(about, str):
                yield about


def regex_search(
    catalog: Catalog,
    pattern: str | None,
    *,
    limit: int = SEARCH_RESULTS,
    timeout_s: float = REGEX_TIMEOUT_S,
    clock: Any = time.monotonic,
) -> SearchResult:
    """Run a regex search over the pool (every tool but ``catalog.kept``): tools whose
    name matches first, then those matching elsewhere, each group in catalogue order.

    Errors (``invalid_tool_input``): no pattern, a pattern over
    :data:`MAX_PATTERN_CHARS` characters, one Python's ``re`` cannot compile;
    ``execution_time_exceeded``: the search took longer than ``timeout_s`` seconds."""
    if pattern is None:
        return invalid_input("regex", pattern, 'arguments must be {"query": "<regex>"}')
    if len(pattern) > MAX_PATTERN_CHARS:
        return invalid_input(
            "regex", pattern,
            f"the pattern has {len(pattern)} characters; at most {MAX_PATTERN_CHARS} are allowed",
        )
    try:
        re.compile(pattern)  # the syntax is Python's re (the regex package accepts more)
        compiled = regex.compile(pattern)
    except (re.error, regex.error, OverflowError, RecursionError) as exc:
        return invalid_input("regex", pattern, f"invalid regular expression: {exc}")
    deadline = clock() + timeout_s
    by_name: list[str] = []
    elsewhere: list[str] = []
    kept = set(catalog.kept)
    try:
        for tool in catalog.tools:
            if tool.name in kept:
                continue
            for position, text in enumerate(_fields(tool)):
                remaining = deadline - clock()
                if remaining <= 0:
                    raise TimeoutError
                if compiled.search(text, timeout=remaining) is not None:
                    (by_name if position == 0 else elsewhere).append(tool.name)
                    break
    except TimeoutError:
        return SearchResult(
            "regex", pattern, error=EXECUTION_TIME_EXCEEDED,
            message=f"the pattern took longer than {timeout_s:g} s to match: simplify it",
        )
    return SearchResult("regex", pattern, tuple([*by_name, *elsewhere][:limit]))


def found_tools(
    catalog: Catalog, query: str, scores: np.ndarray | None, *, limit: int = SEARCH_RESULTS,
    threshold: float = -np.inf, exclude: Collection[str] = (),
) -> list[str]:
    """What a search for ``query`` finds, at most ``limit`` tools, none of ``exclude``:
    the tools it names (:func:`selection.clients.name_search.named_tools`), then the best-scored
    whose score is at least ``threshold``. ``scores``: the query's score per catalogue
    tool (float32, ``(len(catalog),)``), None when there is no ranking to add."""
    named = named_tools(catalog, query, limit=limit, exclude=exclude)
    if scores is None or len(named) >= limit:
        return named
    ranked = semantic_candidates(catalog, scores, limit - len(named), threshold,
                                 {*exclude, *named})
    return [*named, *(name for name, _ in ranked)]


def ranked_search(
    catalog: Catalog, query: str, scores: np.ndarray | None, *, limit: int = SEARCH_RESULTS,
    threshold: float = -np.inf,
) -> SearchResult:
    """A natural-language search of the pool (:func:`found_tools` over every tool but
    ``catalog.kept``)."""
    found = found_tools(catalog, query, scores, limit=limit, threshold=threshold,
                        exclude=set(catalog.kept))
    return SearchResult("query", query, tuple(found))
