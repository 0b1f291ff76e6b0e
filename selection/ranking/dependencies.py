"""Dependency expansion: a selected tool that takes an identifier it cannot get from the
user (``user_id``, ``playlist_id``, an album's ``id``) brings the tool that produces or
finds it (``GET /me``, ``GET /me/playlists``, a search endpoint).

Judged from the schemas only, no model: an *identifier need* is a required parameter whose
name ends in ``id``/``ids``/``uri``/``uris``; its *entity* is the rest of the parameter's
name (``playlist_id`` → ``playlist``), else the noun its description names (``"The
Spotify ID of the album"`` → ``album``, ``"the artist Spotify IDs"`` → ``artist``), else
the tool-name word before ``id``
(``GET_albums_id_tracks`` → ``albums``). A *producer* of an entity is another tool that
names the entity in its name or in the start of its description and does not itself
need an identifier of that entity. Producers are ranked by where they name the entity
(name over description), by what their name says they do (a search finds any entity it
names; a read — ``get``/``list``… — beats a change — ``create``/``delete``/``play``…), by
having fewer required parameters, then by the query's score; the best one per need is
taken, and the best search too (a search finds any entity it names, where a listing
finds only the user's own). Pure functions over :class:`~selection.catalog.catalog.Catalog` (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from selection.catalog.catalog import Catalog, Tool, name_words
from selection.indexes.tool_index import LRUCache

#: Last word of a parameter name that makes it an identifier.
_IDENTIFIER_WORDS = frozenset({"id", "ids", "uri", "uris"})
#: Name words of a tool that reads (lists, gets) things: it can produce identifiers.
_LOOKUP_WORDS = frozenset({"get", "list", "read", "fetch", "show", "retrieve"})
#: Name words of a tool that searches: it produces identifiers of whatever it finds.
_SEARCH_WORDS = frozenset({"search", "find", "lookup", "query"})
#: Name words of a tool that changes things: a poor producer.
_MUTATION_WORDS = frozenset({
    "post", "put", "patch", "delete", "create", "update", "remove", "add", "set", "edit",
    "write", "send", "start", "stop", "pause", "play", "skip", "follow", "unfollow", "save",
})
#: "… ID of the album", "… URI of a track": the entity an identifier names.
_OF_ENTITY = re.compile(r"\b(?:id|ids|uri|uris)\b\s+of\s+(?:the\s+|an?\s+)?([a-z]{3,})", re.I)
#: "… the artist Spotify IDs", "… a track uri": the word before the identifier.
_BEFORE_ENTITY = re.compile(r"\b([a-z]{3,})\s+(?:[a-z]+\s+)?(?:id|ids|uri|uris)\b", re.I)
#: A markdown link ``[text](url)``: matched as its text.
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_NOT_ENTITIES = frozenset({"the", "and", "any", "your", "its", "their", "this", "that", "unique", "with"})
_WORD = re.compile(r"[a-z0-9]+")
#: Characters of a description searched for an entity's name.
DESCRIPTION_CHARS = 160


@dataclass(frozen=True)
class Need:
    """A required identifier parameter of a tool and the entity it identifies (a
    lower-case word, e.g. ``playlist``)."""

    parameter: str
    entity: str


@dataclass(frozen=True)
class Dependency:
    """A producer added for ``parent``'s ``need``."""

    name: str
    parent: str
    need: Need


def _words(text: str) -> list[str]:
    return _WORD.findall(name_words(text).lower())


def _stem(entity: str) -> str:
    """``albums`` → ``album``: the key an entity is looked up by."""
    return entity[:-1] if entity.endswith("s") and len(entity) > 3 else entity


def _keys(word: str) -> set[str]:
    """The stems a word can name: itself, without ``s``, without ``es``."""
    keys = {word}
    if word.endswith("s") and len(word) > 3:
        keys.add(word[:-1])
        if word.endswith("es"):
            keys.add(word[:-2])
    return keys


#: Needs by tool fingerprint (a tool's needs depend on its definition only).
_NEEDS: LRUCache[str, tuple[Need, ...]] = LRUCache(100_000)


def _needs_of(tool: Tool) -> tuple[Need, ...]:
    properties = tool.parameters.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    tool_words = _words(tool.name)
    needs = []
    for parameter in tool.required_parameters():
        words = _words(parameter)
        if not words or words[-1] not in _IDENTIFIER_WORDS:
            continue
        entity = " ".join(words[:-1])
        if not entity:
            schema = properties.get(parameter)
            about = schema.get("description") if isinstance(schema, dict) else None
            about = _LINK.sub(r"\1", about) if isinstance(about, str) else ""
            found = [m[1].lower() for pattern in (_OF_ENTITY, _BEFORE_ENTITY)
                     for m in pattern.finditer(about) if m[1].lower() not in _NOT_ENTITIES]
            if found:
                entity = found[0]
            elif words[-1] in tool_words and tool_words.index(words[-1]) > 0:
                entity = tool_words[tool_words.index(words[-1]) - 1]
        entity = entity.split()[-1] if entity else ""
        if entity and entity not in _IDENTIFIER_WORDS:
            needs.append(Need(parameter, entity))
    return tuple(needs)


def identifier_needs(tool: Tool) -> tuple[Need, ...]:
    """The tool's required identifier parameters, with their entities (see the module
    docstring); ``()`` when it needs none. Cached by the tool's fingerprint."""
    needs = _NEEDS.get(tool.fingerprint)
    if needs is None:
        needs = _needs_of(tool)
        _NEEDS.put(tool.fingerprint, needs)
    return needs


@dataclass(frozen=True)
class _Producer:
    position: int
    in_name: bool
    base: float  # the rank without the in-name / in-description terms
    search: bool


class ProducerIndex:
    """For one catalogue: each tool's identifier needs, and entity stem → the tools that
    name it (in the name or the first :data:`DESCRIPTION_CHARS` of the description)."""

    def __init__(self, catalog: Catalog) -> None:
        self.needs = [identifier_needs(tool) for tool in catalog.tools]
        self._by_stem: dict[str, list[_Producer]] = {}
        for position, tool in enumerate(catalog.tools):
            name = _words(tool.name)
            head = _WORD.findall(tool.description[:DESCRIPTION_CHARS].lower())
            words = set(name)
            base = (
                0.5 * bool(words & _LOOKUP_WORDS) + 1.0 * bool(words & _SEARCH_WORDS)
                - 1.0 * bool(words & _MUTATION_WORDS) - 0.25 * len(tool.required_parameters())
                - 0.01 * len(name)
            )
            name_keys = set().union(*(_keys(w) for w in name)) if name else set()
            head_keys = set().union(*(_keys(w) for w in head)) if head else set()
            for key in name_keys | head_keys:
                self._by_stem.setdefault(key, []).append(
                    _Producer(position, key in name_keys, base, bool(words & _SEARCH_WORDS))
                )

    def producers(self, entity: str) -> list[tuple[int, float, bool]]:
        """``(position, rank, is_search)`` of every producer of ``entity`` (higher rank is
        better):
        2 if it names the entity in its name, else 1 (description), plus what its name
        says it does (search +1, read +0.5, change −1), −0.25 per required parameter,
        −0.01 per name word (the more generic tool first). A tool that itself needs an
        identifier of the entity is no producer."""
        stem = _stem(entity)
        found = []
        for producer in self._by_stem.get(stem, ()):
            if any(_stem(need.entity) == stem for need in self.needs[producer.position]):
                continue
            rank = (2.0 if producer.in_name else 1.0) + producer.base
            found.append((producer.position, rank, producer.search))
        return found


_INDEXES: LRUCache[str, ProducerIndex] = LRUCache(64)


def producer_index(catalog: Catalog) -> ProducerIndex:
    """The catalogue's :class:`ProducerIndex`, cached by catalogue fingerprint."""
    index = _INDEXES.get(catalog.fingerprint)
    if index is None:
        index = ProducerIndex(catalog)
        _INDEXES.put(catalog.fingerprint, index)
    return index


def expand(
    catalog: Catalog,
    scores: np.ndarray,
    parents: Sequence[str],
    exclude: set[str],
    *,
    max_added: int,
    min_score: float = -np.inf,
    group_of: np.ndarray | None = None,
) -> list[Dependency]:
    """Producers for the identifier needs of ``parents`` (in their order): per need the
    best producer, and the best search producer when that is another tool (a search
    finds what a listing of "my" items does not); ``max_added`` in all, each scoring at
    least ``min_score`` (τ) for the query. ``group_of``: int ``(len(catalog),)``, each
    tool's group (:class:`selection.catalog.groups.CatalogGroups`, −1: none); a grouped parent's
    producers come from its own group only (an identifier of one server or toolkit means
    nothing to another's tools).

    ``scores``: float32 ``(len(catalog),)``, the query's score per tool (breaks ties
    between equally ranked producers). A need whose best producer is already in
    ``parents``, ``exclude`` or added for an earlier need adds nothing.
    """
    if max_added <= 0:
        return []
    index = producer_index(catalog)
    present = set(exclude) | set(parents)
    added: list[Dependency] = []
    for parent_name in parents:
        parent_position = catalog.index_of(parent_name)
        if parent_position is None:
            continue
        for need in index.needs[parent_position]:
            if len(added) >= max_added:
                return added
            group = -1 if group_of is None else int(group_of[parent_position])
            ranked = [
                (rank, float(scores[position]), -position, search)
                for position, rank, search in index.producers(need.entity)
                if position != parent_position and scores[position] >= min_score
                and (group < 0 or group_of is None or group_of[position] == group)
            ]
            best = max(ranked, default=None)
            best_search = max((item for item in ranked if item[3]), default=None)
            for choice in dict.fromkeys(item for item in (best, best_search) if item):
                name = catalog.tools[-choice[2]].name
                if name in present or len(added) >= max_added:  # already there, or full
                    continue
                present.add(name)
                added.append(Dependency(name, parent_name, need))
    return added
