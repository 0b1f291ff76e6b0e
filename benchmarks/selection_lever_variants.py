"""The ranking variants of issue 14's third round, as patches over the product's code.

Each variant is a context manager that swaps ONE step of the proxy's scoring path
(``selection.engine.tool_texts``, ``ToolIndex.best_scores``, or the query parts the
evaluation embeds) for the measured alternative, so ``benchmarks/selection_levers.py``
replays every variant through the same ``score_cases`` → ``select`` code as
``toolprune eval``. None of them is the product's default (benchmarks/README.md,
"Third round" says why). Vectors are float32, rows L2-normalised; shapes in each docstring.

* text variants — what a tool is embedded by: its first sentence as a text of its own;
  its description cut into chunks of about 48 words (at most 3 more texts a tool);
* score variants — how the texts' cosines become a tool's score: centring tool and query
  vectors on the catalogue's mean vector (anisotropy correction; Mu & Viswanath, "All-but-
  the-Top", ICLR 2018); a hubness penalty (cosine minus β × the text's mean cosine to its
  10 nearest texts of other tools; CSLS, Conneau et al., "Word Translation Without
  Parallel Data", ICLR 2018); a mix of the best and the mean cosine of a tool's texts;
  Rocchio pseudo-relevance feedback (each query part moved towards the mean of its m
  best texts' vectors by β, renormalised, re-scored; Rocchio 1971, as in Manning et al.,
  "Introduction to Information Retrieval", ch. 9);
* query variants — file paths and URLs in the request rewritten to what they are ("a
  file" / "a web page", or "the file NAME" / "the web page HOST").

The fourth round's variants (the order ``choose`` admits candidates in: diversity,
namespace caps, query-part quotas) live in ``benchmarks/selection_choice_variants.py`` and
are registered here too.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol
from unittest import mock

import numpy as np

import selection.engine
import selection.evaluation.scoring
from benchmarks.selection_choice_variants import VARIANTS as CHOICE_VARIANTS
from selection.catalog import Tool, name_words
from selection.index import MAX_TOOL_TEXT_CHARS, ToolIndex, tool_texts
from selection.query import query_parts

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+|\n\s*\n")
_URL = re.compile(r"\bhttps?://[^\s'\"<>)]+|\bwww\.[^\s'\"<>)]+", re.I)
_PATH = re.compile(
    r"(?<![\w/.:])(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}/?|\b[A-Za-z]:\\(?:[\w.@+ -]+\\)*[\w.@+-]+"
)


def sentences(text: str) -> list[str]:
    """``text`` cut after ``. ! ?`` (and at blank lines), stripped, blanks dropped."""
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece and piece.strip()]


def chunked_texts(
    tool: Tool, examples: Sequence[str] = (), max_chars: int = MAX_TOOL_TEXT_CHARS,
    chunks: int = 0, chunk_words: int = 48,
) -> list[str]:
    """:func:`selection.index.tool_texts` plus, for a description of two sentences or
    more, ``name words: first sentence`` and up to ``chunks`` texts of the following
    sentences (about ``chunk_words`` words each). A one-sentence description: unchanged."""
    texts = tool_texts(tool, examples, max_chars)
    parts = sentences(tool.description)
    if len(parts) <= 1:
        return texts
    words = name_words(tool.name)
    extra = [f"{words}: {parts[0][:max_chars]}"]
    pieces: list[str] = []
    current: list[str] = []
    for sentence in parts[1:]:
        current.append(sentence)
        if sum(len(s.split()) for s in current) >= chunk_words:
            pieces.append(" ".join(current))
            current = []
    if current:
        pieces.append(" ".join(current))
    extra += [f"{words}: {piece[:max_chars]}" for piece in pieces[:chunks]]
    return [texts[0], *extra, *texts[1:]]


def rewrite_locators(text: str, keep_name: bool) -> str:
    """File paths (two components or more, POSIX or ``C:\\``) and URLs in ``text``
    replaced by ``a file`` / ``a web page``, or with ``keep_name`` by ``the file NAME``
    (the last component) / ``the web page HOST``."""

    def url(match: re.Match[str]) -> str:
        host = re.sub(r"^(https?://)?(www\.)?", "", match.group(0), flags=re.I).split("/")[0]
        return f"the web page {host}" if keep_name else "a web page"

    def path(match: re.Match[str]) -> str:
        name = re.split(r"[/\\]", match.group(0).rstrip("/\\"))[-1]
        return f"the file {name}" if keep_name else "a file"

    return _PATH.sub(path, _URL.sub(url, text))


class TextScores(Protocol):
    """A replacement for the max-cosine scoring of a tool's texts."""

    def prepare(self, vectors: np.ndarray, owners: np.ndarray) -> Any:
        """Per-index state from the texts' vectors ``(n_texts, d)`` and owners ``(n_texts,)``."""
        ...

    def score(self, state: Any, queries: np.ndarray) -> np.ndarray:
        """Scores ``(p, n_texts)`` float32 for query parts ``(p, d)``."""
        ...


class Centred:
    """Cosine after subtracting ``alpha`` × the catalogue texts' mean vector from tool
    and query vectors (both renormalised)."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def prepare(self, vectors: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = vectors.mean(axis=0) * self.alpha
        centred = vectors - mean
        return mean, centred / np.linalg.norm(centred, axis=1, keepdims=True)

    def score(self, state: tuple[np.ndarray, np.ndarray], queries: np.ndarray) -> np.ndarray:
        mean, centred = state
        moved = queries - mean
        return (moved / np.linalg.norm(moved, axis=1, keepdims=True)) @ centred.T


class HubPenalty:
    """Cosine minus ``beta`` × (the text's mean cosine to its ``k`` nearest texts of other
    tools, centred on the catalogue's average of that)."""

    def __init__(self, beta: float, k: int = 10) -> None:
        self.beta, self.k = beta, k

    def prepare(self, vectors: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        similarities = vectors @ vectors.T
        similarities[owners[:, None] == owners[None, :]] = -1.0
        k = min(self.k, len(vectors) - 1)
        density = np.sort(similarities, axis=1)[:, -k:].mean(axis=1) if k > 0 else np.zeros(len(vectors))
        return vectors, (density - density.mean()).astype(np.float32)

    def score(self, state: tuple[np.ndarray, np.ndarray], queries: np.ndarray) -> np.ndarray:
        vectors, density = state
        return queries @ vectors.T - self.beta * density[None, :]


class BestMeanMix:
    """A tool's score per part: ``lam`` × its best text's cosine + (1 − ``lam``) × its
    texts' mean cosine (returned per text, so the max over texts is that score)."""

    def __init__(self, lam: float) -> None:
        self.lam = lam

    def prepare(self, vectors: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return vectors, owners

    def score(self, state: tuple[np.ndarray, np.ndarray], queries: np.ndarray) -> np.ndarray:
        vectors, owners = state
        n_tools = int(owners.max()) + 1
        counts = np.maximum(np.bincount(owners, minlength=n_tools), 1).astype(np.float32)
        cosines = queries @ vectors.T
        best = np.full((len(queries), n_tools), -1.0, dtype=np.float32)
        total = np.zeros((len(queries), n_tools), dtype=np.float32)
        for row in range(len(queries)):
            np.maximum.at(best[row], owners, cosines[row])
            np.add.at(total[row], owners, cosines[row])
        return (self.lam * best + (1 - self.lam) * total / counts)[:, owners]


class Rocchio:
    """Pseudo-relevance feedback: each query part (``first_only``: the whole query only)
    plus ``beta`` × the mean vector of its ``m`` best-scoring texts, renormalised."""

    def __init__(self, beta: float, m: int = 3, first_only: bool = False) -> None:
        self.beta, self.m, self.first_only = beta, m, first_only

    def prepare(self, vectors: np.ndarray, owners: np.ndarray) -> np.ndarray:
        return vectors

    def score(self, vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
        m = min(self.m, len(vectors))
        best = np.argpartition(-(queries @ vectors.T), m - 1, axis=1)[:, :m]
        moved = queries + self.beta * vectors[best].mean(axis=1)
        if self.first_only:
            moved[1:] = queries[1:]
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        return moved @ vectors.T


def _scored_by(scores: TextScores) -> Callable[[ToolIndex, np.ndarray], np.ndarray]:
    """A ``ToolIndex.best_scores`` that ranks by ``scores`` (state built once per index)."""
    states: dict[int, tuple[ToolIndex, Any]] = {}

    def best_scores(index: ToolIndex, queries: np.ndarray) -> np.ndarray:
        best = np.full(index.n_tools, -1.0, dtype=np.float32)
        if index.index.ntotal == 0 or queries.shape[0] == 0:
            return best
        if id(index) not in states:  # the index is kept with its state: its id stays unique
            import faiss

            flat = faiss.rev_swig_ptr(index.index.get_xb(), index.index.ntotal * index.index.d)
            vectors = np.array(flat, dtype=np.float32).reshape(index.index.ntotal, index.index.d)
            states[id(index)] = (index, scores.prepare(vectors, index.owners))
        similarities = scores.score(states[id(index)][1], np.asarray(queries, dtype=np.float32))
        np.maximum.at(best, index.owners, similarities.max(axis=0))
        return best

    return best_scores


Patch = Callable[[], contextlib.AbstractContextManager[Any]]


def _texts(chunks: int) -> Patch:
    return lambda: mock.patch.object(
        selection.engine, "tool_texts",
        lambda tool, examples=(), max_chars=MAX_TOOL_TEXT_CHARS: chunked_texts(
            tool, examples, max_chars, chunks
        ),
    )


def _scores(scores: TextScores) -> Patch:
    return lambda: mock.patch.object(ToolIndex, "best_scores", _scored_by(scores))


def _query(keep_name: bool) -> Patch:
    def parts(*args: Any, **kwargs: Any) -> list[str]:
        return [rewrite_locators(part, keep_name) for part in query_parts(*args, **kwargs)]

    return lambda: mock.patch.object(selection.evaluation.scoring, "query_parts", parts)


def _both(*patches: Patch) -> Patch:
    @contextlib.contextmanager
    def combined() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for patch in patches:
                stack.enter_context(patch())
            yield

    return combined


#: Variant name → patches (the empty tuple: the defaults).
VARIANTS: dict[str, tuple[Patch, ...]] = {
    "defaults": (),
    "first-sentence": (_texts(0),),
    "chunks-3": (_texts(3),),
    "centred": (_scores(Centred(1.0)),),
    "centred-half": (_scores(Centred(0.5)),),
    "hub-0.25": (_scores(HubPenalty(0.25)),),
    "hub-0.5": (_scores(HubPenalty(0.5)),),
    "hub-1": (_scores(HubPenalty(1.0)),),
    "mix-0.5": (_scores(BestMeanMix(0.5)),),
    "mix-0.75": (_scores(BestMeanMix(0.75)),),
    "rocchio-0.15": (_scores(Rocchio(0.15)),),
    "rocchio-0.25": (_scores(Rocchio(0.25)),),
    "rocchio-0.35": (_scores(Rocchio(0.35)),),
    "rocchio-0.5": (_scores(Rocchio(0.5)),),
    "rocchio-1": (_scores(Rocchio(1.0)),),
    "rocchio-0.25-m1": (_scores(Rocchio(0.25, 1)),),
    "rocchio-0.25-m5": (_scores(Rocchio(0.25, 5)),),
    "rocchio-0.5-m5": (_scores(Rocchio(0.5, 5)),),
    "rocchio-0.25-whole": (_scores(Rocchio(0.25, 3, first_only=True)),),
    "locators-type": (_query(False),),
    "locators-name": (_query(True),),
    "locators-name+first-sentence": (_query(True), _texts(0)),
    "locators-name+rocchio-0.25": (_query(True), _scores(Rocchio(0.25))),
    "locators-name+mix-0.75": (_query(True), _scores(BestMeanMix(0.75))),
    "locators-name+centred": (_query(True), _scores(Centred(1.0))),
    **CHOICE_VARIANTS,  # the fourth round's admission orders
}


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """Apply variant ``name`` (a key of :data:`VARIANTS`) for the ``with`` block.
    Raises KeyError for an unknown name."""
    with _both(*VARIANTS[name])():
        yield
