"""A catalogue's index while it is being built, and what a request ranks by meanwhile.

A build embeds every text of every tool (:func:`~selection.indexes.tool_index.tool_texts`): the
descriptions first (``name words: description``, a quarter of the tokens), then the
parameter and example texts. Ranked by their descriptions alone, with BM25 and the name
match, the shared sets lose little of a full index's recall (toolbench_dev 0.775 against
0.779 at top-8, livemcpbench_dev 0.441 against 0.461: docs/measured.md).

A request that arrives while its catalogue is being built does not wait for all of it: it
has the descriptions of the tools its own words point at embedded first — the best
:attr:`~selection.ranking.engine.SelectionEngine.cold_start_tools` tools by BM25 and name match
(:func:`first_tools`), or every text still missing when that is no more — and is ranked by
the texts embedded so far (:meth:`IndexBuild.partial`); a tool without any scores -1 there,
below every tool that has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from selection.catalog.catalog import Catalog
from selection.indexes.tool_index import ToolIndex, encodable, tool_texts


@dataclass(eq=False)
class IndexBuild:
    """The texts of one catalogue's index (catalogue order, each tool's description text
    first) and those embedded so far. ``task``: the build, once started."""

    texts: list[str]
    owners: np.ndarray  # int64 (n_texts,): catalogue position of each text's tool
    descriptions: np.ndarray  # int64 (n_tools,): each tool's description text
    n_tools: int
    task: asyncio.Task[tuple[ToolIndex, float]] | None = None
    #: Set once the vectors already known (in memory, on disk) are recorded.
    looked_up: asyncio.Event = field(default_factory=asyncio.Event)
    _vectors: np.ndarray | None = None  # float32 (n_texts, d) once the first is known
    _have: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @classmethod
    def of(
        cls, catalog: Catalog, examples: Mapping[str, Sequence[str]], max_chars: int
    ) -> IndexBuild:
        """The texts of ``catalog`` (:func:`~selection.indexes.tool_index.tool_texts`, each clipped to
        ``max_chars`` characters, made :func:`~selection.indexes.tool_index.encodable`)."""
        texts: list[str] = []
        owners: list[int] = []
        descriptions: list[int] = []
        for position, tool in enumerate(catalog.tools):
            own = tool_texts(tool, examples.get(tool.name, ()), max_chars)
            descriptions.append(len(texts))
            texts.extend(encodable(text) for text in own)
            owners.extend([position] * len(own))
        return cls(
            texts, np.asarray(owners, dtype=np.int64), np.asarray(descriptions, dtype=np.int64),
            len(catalog), _have=np.zeros(len(texts), dtype=bool),
        )

    @property
    def detail_texts(self) -> list[int]:
        """Indices of the texts that are not a description (parameters, examples)."""
        first = np.zeros(len(self.texts), dtype=bool)
        first[self.descriptions] = True
        return np.flatnonzero(~first).tolist()

    def record(self, text: int, vector: np.ndarray) -> None:
        """Text ``text``'s vector (float32 ``(d,)``) is known."""
        if self._vectors is None:
            self._vectors = np.zeros((len(self.texts), vector.shape[0]), dtype=np.float32)
        self._vectors[text] = vector
        self._have[text] = True

    def missing(self) -> list[int]:
        """Indices of the texts not embedded yet."""
        return np.flatnonzero(~self._have).tolist()

    def partial(self) -> ToolIndex | None:
        """An index of the texts embedded so far (tools with none score -1); None when
        there are none."""
        if self._vectors is None or not self._have.any():
            return None
        return ToolIndex.build(self._vectors[self._have], self.owners[self._have], self.n_tools)


def first_tools(lexical: np.ndarray, names: np.ndarray, count: int) -> list[int]:
    """The ``count`` tools whose descriptions a request on a catalogue being built has
    embedded first: best by normalised BM25 plus name-word coverage (both float32
    ``(n_tools,)`` in [0, 1]), ties in catalogue order; tools scoring 0 follow in
    catalogue order."""
    order = np.argsort(-(lexical + names), kind="stable")
    return [int(position) for position in order[:count]]


def urgent_texts(build: IndexBuild, tools: Sequence[int], count: int) -> tuple[list[int], bool]:
    """Texts a request has embedded first, and whether they are all that is missing (the
    request then waits for the whole index): every text still missing when there are at
    most ``count``, else the missing descriptions of ``tools`` (in that order)."""
    missing = build.missing()
    if len(missing) <= count:
        return missing, True
    texts = [int(build.descriptions[t]) for t in tools if not build._have[build.descriptions[t]]]
    return texts, False
