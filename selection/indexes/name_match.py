"""Name match: the share of a tool's name words that the request itself uses.

A request that says "list the open pull requests" names ``list_pull_requests`` — every
word of that name is in the request — while ``pull_request_read`` and
``update_pull_request_state`` share only some of theirs. The embedder scores all three
alike (cosines within 0.03 on the GitHub MCP server's 117 tools) and BM25 spreads the
same words over descriptions; the share of a tool's *name* words found in the request
separates them. It is added to the fused score with its own weight
(:mod:`selection.ranking.signals.names`).

Words: lower-case runs of two or more letters and digits of :func:`selection.catalog.catalog.name_words`
(``getPullRequest`` → ``get pull request``), English function words left out, plurals
folded to their singular (``requests`` → ``request``, ``entries`` → ``entry``) on both
sides. A tool whose name has no word left scores 0.

A request that asks for one thing (:func:`one_intent`) and uses every word of a tool's
name of two or more words *names* that tool (:meth:`NameIndex.named`); when the best
candidate is named, :func:`selection.choosing.candidates.choose` forwards the named tools only and
lists the rest in the tier (``CandidatePolicy.named_only``): "list the open pull requests
in octo/widgets" pays for ``list_pull_requests``, not for eight tools. Pure functions,
no I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from selection.catalog.catalog import Catalog, name_words

#: Function words that carry no intent in a name (``for`` in ToolBench's
#: ``count_for_suivi_colis``) or a request.
STOP_WORDS = frozenset({
    "a", "an", "and", "at", "by", "for", "from", "in", "into", "is", "it", "me", "my",
    "of", "on", "or", "the", "to", "with", "you", "your",
})
_WORD = re.compile(r"[a-z0-9]+")
#: Plural endings folded to a singular, longest first, with what replaces them.
_PLURALS = (("ies", "y"), ("es", ""), ("s", ""))
#: Letters a word keeps at least after its plural ending is removed.
MIN_STEM = 3


#: Words a tool's name needs for the request to *name* it: one word (``search``,
#: ``cd``) is too common to single a tool out.
MIN_NAMED_WORDS = 2
#: What joins several requests in one sentence: a comma, a semicolon, "and", "then", "also".
_CONNECTIVE = re.compile(r"[,;]|\b(?:and|then|also)\b", re.IGNORECASE)


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """``requests`` → ``request``, ``entries`` → ``entry``, ``boxes`` → ``box``;
    a word that would keep fewer than :data:`MIN_STEM` letters is left as it is."""
    for ending, replacement in _PLURALS:
        if word.endswith(ending) and len(word) - len(ending) >= MIN_STEM:
            return word[: -len(ending)] + replacement
    return word


def words(text: str) -> list[str]:
    """The words of ``text`` as compared: lower-case, single characters and function
    words out, plurals folded."""
    return [fold(w) for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOP_WORDS]


class NameIndex:
    """One catalogue's name words (each tool's distinct :func:`words` of its name), kept
    as flat arrays so that a query is matched against every name in a few vector
    operations (about 1 ms at Seal-Tools' 4,076 tools on the loaded 2-core development
    machine, against 22 ms for a loop over the names)."""

    def __init__(self, catalog: Catalog) -> None:
        vocabulary: dict[str, int] = {}
        ids: list[int] = []
        owners: list[int] = []
        lengths: list[int] = []
        for position, tool in enumerate(catalog.tools):
            name = dict.fromkeys(words(name_words(tool.name)))
            lengths.append(len(name))
            for word in name:
                ids.append(vocabulary.setdefault(word, len(vocabulary)))
                owners.append(position)
        self._vocabulary = vocabulary
        self._ids = np.asarray(ids, dtype=np.int64)
        self._owners = np.asarray(owners, dtype=np.int64)
        self._lengths = np.asarray(lengths, dtype=np.int64)

    def _matched(self, query: str) -> np.ndarray:
        """Per tool, how many of its name words ``query`` uses: int64 ``(len(catalog),)``."""
        used = [self._vocabulary[w] for w in words(query) if w in self._vocabulary]
        if not used:
            return np.zeros(len(self._lengths), dtype=np.int64)
        in_query = np.zeros(len(self._vocabulary), dtype=bool)
        in_query[used] = True
        return np.bincount(self._owners[in_query[self._ids]], minlength=len(self._lengths))

    def coverage(self, query: str) -> np.ndarray:
        """Per tool, the share of its name words that occur in ``query``: float32
        ``(len(catalog),)`` in [0, 1] (1: every word of the name is in the request)."""
        matched = self._matched(query)
        share = matched / np.maximum(self._lengths, 1)
        return share.astype(np.float32)

    def named(self, query: str) -> np.ndarray:
        """Per tool, whether ``query`` uses every word of its name and the name has at
        least :data:`MIN_NAMED_WORDS` words: bool ``(len(catalog),)``."""
        return (self._lengths >= MIN_NAMED_WORDS) & (self._matched(query) == self._lengths)


def one_intent(parts: list[str] | tuple[str, ...]) -> bool:
    """Whether a query asks for one thing: a single part (one sentence, no tool result;
    :func:`selection.conversation.query.query_parts`) with no connective that joins requests."""
    return len(parts) == 1 and not _CONNECTIVE.search(parts[0])
