"""Finding tools by their name, with no embedder: a search whose query is a tool's name,
or close to it, finds that tool whether or not the catalogue is indexed yet.

A model that knows the tool it wants searches by its name (``search_tools`` invites it
to; Claude Code's first request of a session did, and found nothing while the catalogue
was being indexed, issue 32), often by the tool's own name whatever its client calls it
(``search_code`` for opencode's ``github_search_code``, issue 43). Names are compared as
words (:func:`selection.catalog.catalog.name_words`, lower case): ``list_pull_requests``,
``listPullRequests`` and "list pull requests" are one name, and the namespace a client
puts in front may be left out: after an explicit separator (``mcp__github__``,
``github.``, ``github/``, ``github:``) or the server prefix the catalogue shows
(``github_``, ``github-``: :func:`selection.catalog.groups.server_prefixes`). A query *names* a
tool when it, or one of its identifier-like words (``get_me``, ``searchCode``), is one
of the tool's forms — exactly, or within :data:`CLOSE_RATIO` by rapidfuzz's normalised
Indel similarity (``fuzz.ratio``: a typo, a singular for a plural, part of a
namespace). A form is a whole name or what follows one of its namespaces, never an
arbitrary tail of it: "code" names no ``github_search_code``. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from selection.catalog.catalog import Catalog, name_words
from selection.catalog.groups import server_prefixes
from selection.indexes.name_match import MIN_NAMED_WORDS
from selection.indexes.tool_index import LRUCache

#: Least ``rapidfuzz.fuzz.ratio`` (0–100) of a close name: "list pull request" for
#: ``list_pull_requests`` is 97, "list the open pull requests" 80, "list issues" for
#: ``list_issue_types`` 82.
CLOSE_RATIO = 90.0
#: What separates a namespace from a tool's own name.
_NAMESPACE = re.compile(r"__|[./:]")
_SEPARATED = r"[A-Za-z0-9]+(?:(?:__|[_./:-])[A-Za-z0-9]+)+"
#: A word of a query that is written like an identifier (``get_me``, ``searchCode``,
#: ``TaskList``, ``mcp__github__get_me``, ``browser.click``).
_IDENTIFIER = re.compile(rf"{_SEPARATED}|[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+")
#: An identifier whose words are joined by separators or written in lower camel case
#: (``search_code``, ``mcp__github__get_me``, ``searchCode``), not a capitalised word
#: (``GitHub``, ``TaskList``: a name as people write it).
_JOINED = re.compile(rf"\b(?:{_SEPARATED}|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+)\b")
_FORMS: LRUCache[str, dict[str, list[str]]] = LRUCache(32)


def name_form(text: str) -> str:
    """``text`` as name words, lower case: ``mcp__github__listPullRequests`` →
    ``mcp github list pull requests``."""
    return name_words(text).lower()


def spelled_out(query: str) -> str:
    """``query`` with each identifier written as words (``search_code`` → ``search code``,
    ``searchCode`` → ``search Code``; ``GitHub`` kept): what a search ranks by, so a name
    written as an identifier meets the name words the catalogue is indexed by (BM25
    reads ``search_code`` as one word no tool text has)."""
    return _JOINED.sub(lambda match: name_words(match.group()), query)


def own_names(name: str, prefix: str | None = None) -> list[str]:
    """``name`` and what follows each of its namespaces: each explicit separator
    (``mcp__github__get_me`` → ``github__get_me``, ``get_me``) and each separator within
    its server ``prefix`` (:func:`selection.catalog.groups.server_prefixes`: ``git_git_status``
    with ``git_git_`` → ``git_status``, ``status``)."""
    names = [name, *(name[match.end():] for match in _NAMESPACE.finditer(name))]
    if prefix and name.startswith(prefix):
        names += [name[cut + 1:] for cut, char in enumerate(prefix) if char == prefix[-1]]
    return names


def _forms(catalog: Catalog) -> dict[str, list[str]]:
    """Each form of every tool's name (:func:`own_names`, as :func:`name_form`) → the
    tools that have it, in catalogue order (cached per catalogue)."""

    def build() -> dict[str, list[str]]:
        forms: dict[str, list[str]] = {}
        prefixes = server_prefixes(catalog.names)
        for tool in catalog.tools:
            for own in own_names(tool.name, prefixes.get(tool.name)):
                form = name_form(own)
                if form and tool.name not in forms.setdefault(form, []):
                    forms[form].append(tool.name)
        return forms

    return _FORMS.get_or_build(catalog.fingerprint, build)


def _asked(query: str) -> list[str]:
    """The name forms ``query`` may be: the whole query and each identifier-like word."""
    asked = [name_form(query), *(name_form(word) for word in _IDENTIFIER.findall(query))]
    return [form for form in dict.fromkeys(asked) if form]


def exactly_named(catalog: Catalog, query: str, *, exclude: Collection[str] = ()) -> list[str]:
    """The tools ``query`` names exactly by a form of
    :data:`~selection.indexes.name_match.MIN_NAMED_WORDS` or more words (the whole query, or one
    of its identifiers, is that form), in catalogue order; none of ``exclude``. "search
    issues" and ``search_issues`` name ``github_search_issues``; "search" names no
    ``jira__search`` here (one word singles out no tool)."""
    forms = _forms(catalog)
    named = {name for form in _asked(query) if len(form.split()) >= MIN_NAMED_WORDS
             for name in forms.get(form, ())}
    return [name for name in catalog.names if name in named and name not in exclude]


def named_tools(
    catalog: Catalog, query: str, *, limit: int, exclude: Collection[str] = ()
) -> list[str]:
    """The tools ``query`` names (see the module docstring), at most ``limit``: exact
    matches first, then close ones, best first (ties in catalogue order); none of
    ``exclude``."""
    from rapidfuzz import fuzz, process  # loaded on the first search, kept off idle memory

    forms = _forms(catalog)
    asked = _asked(query)
    found: dict[str, float] = {}
    for form in asked:
        for name in forms.get(form, ()):
            found.setdefault(name, 101.0)
    for form in asked:
        for match, ratio, _ in process.extract(
            form, list(forms), scorer=fuzz.ratio, score_cutoff=CLOSE_RATIO, limit=None
        ):
            for name in forms[match]:
                found[name] = max(found.get(name, 0.0), ratio)
    order = {name: position for position, name in enumerate(catalog.names)}
    ranked = sorted(found, key=lambda name: (-found[name], order[name]))
    return [name for name in ranked if name not in exclude][:limit]


def spelled_names(given: str, names: Sequence[str]) -> list[str]:
    """The ``names`` that ``given`` spells another way, in their order: the same name
    words (``ListIssues``, ``list issues``, ``list-issues`` for ``list_issues``); failing
    that, the same after a namespace one of them writes and the other leaves out
    (``mcp__github__list_issues`` or ``functions.list_issues`` for ``list_issues``, and
    ``list_issues`` for ``github_list_issues``: :func:`own_names`), unless the name has a
    namespace and ``given`` writes another of the catalogue's (``github__search`` spells no
    ``gitlab__search`` where ``github_…`` tools exist). Several: the spelling is ambiguous."""
    full = name_form(given)
    if not full:
        return []
    same = [name for name in names if name_form(name) == full]
    if same:
        return same
    prefixes = server_prefixes(names)
    forms = {name: [name_form(own) for own in own_names(name, prefixes.get(name))] for name in names}
    spaces = {name: set(form[0].split()) - set(form[-1].split()) for name, form in forms.items()}
    catalogue_spaces = set().union(*spaces.values()) if spaces else set()
    tails = [(full, set())] + [
        (name_form(given[match.end():]), set(name_form(given[: match.start()]).split()))
        for match in _NAMESPACE.finditer(given)
    ]
    return [
        name for name in names
        if any(tail and tail in forms[name]
               and not (spaces[name] and (dropped & catalogue_spaces) - spaces[name])
               for tail, dropped in tails)
    ]
