"""Selection learned from the agent's own traffic: per catalogue, the query vectors of the
requests that preceded real calls of each tool, and the boost they give a tool on a new
request that resembles them. Pure: no I/O (the usage log reads and writes the state,
:mod:`proxy.usage.learning`).

Evidence is a pair (query vector of a request, a tool a real call of that request used),
weighted by how the tool was reached (:data:`STATUS_WEIGHTS`: ``loaded`` through the
meta-tool and ``miss`` — the ranking failed there — count fully, ``forwarded`` confirms
at half weight). The query vector is the embedder's own vector of the request's whole
query (``query_parts``' first part), so no user text is needed.

A :class:`LearnedState` keeps, per tool, up to :data:`PER_TOOL` evidence vectors
(float16, L2-normalised), near-duplicates (cosine ≥ :data:`DEDUPE_COSINE`) merged into
one with the summed weight. Applied to a request (:meth:`LearnedIndex.boost`), each tool
gains ``gain × weight × P(cos(query, evidence))`` for its best evidence vector against
the request's whole query (what evidence vectors are), where P, the state's
``calibration``, is how often a request of this agent's own traffic needed a tool whose
best evidence was that alike (:mod:`selection.learning.calibration`): requests like
ones that led to a tool bring it, by as much as alike requests of this traffic share
tools, and a request like none of the traffic changes nothing. This is Tool2Vec's idea
(tool vectors from the queries that used them; Moghaddam et al., 2024) kept as separate
example vectors, as the policy file's example utterances are, rather than averaged into
one centroid: the same tool serves unrelated tasks.

A state also keeps the mean of the traffic's query vectors: the direction every request of
this agent shares (its boilerplate), which tells no tool from another. With ``centering``
c > 0 a query vector q is ranked against the index as ``normalise(q − c × mean)``
(:meth:`LearnedIndex.center`; the common-mean removal of "All-but-the-Top", Mu &
Viswanath, ICLR 2018): it needs no calls and reaches tools nobody called yet. The guard
(:mod:`selection.learning.guard`) picks ``gain`` and ``centering`` per catalogue.

A state is bound to one catalogue fingerprint and one embedder; binding it to a catalogue
(:meth:`LearnedIndex.bind`) drops evidence of tools the catalogue no longer has (renamed
tools are not guessed).
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from selection.catalog.catalog import Catalog
from selection.learning.calibration import PRIOR, calibrate, likelihood

#: Identifies the serialised form (:func:`encode_state`); another value is foreign (a
#: state of ``toolprune-learned/1``, before the calibration, is learned again).
FORMAT = "toolprune-learned/2"
#: Weight of one evidence pair by the call's status in the usage log.
STATUS_WEIGHTS: Mapping[str, float] = {"loaded": 1.0, "miss": 1.0, "forwarded": 0.5}
#: Evidence vectors kept per tool (the highest weight, then the most recent).
PER_TOOL = 32
#: Evidence vectors kept per catalogue, over all its tools (the same order): bounds the
#: state (1.5 MB at 384 dimensions) and the boost's cost on the request path.
MAX_VECTORS = 2048
#: Evidence vectors this close (cosine) are merged.
DEDUPE_COSINE = 0.95
#: Boost per unit of P(needed) × weight, added to the fused score, of a state learned
#: without the guard's choice (:data:`selection.learning.guard.GAINS`).
GAIN = 1.0
#: A weight counts at most this much (many repeats of one request do not dominate).
MAX_WEIGHT = 2.0


class LearnedStateError(ValueError):
    """A serialised learned state that cannot be read, or belongs elsewhere."""


@dataclass(frozen=True)
class Evidence:
    """One (request, tool) pair: ``vector`` float (d,), the request's query vector;
    ``request``: an id grouping the pairs of one request (the held-back replay scores
    requests); ``conversation``: the conversation hash (the held-back split is by
    conversation); ``ts``: Unix seconds; ``ranking``: the request's logged ranking
    (:func:`selection.learning.logged_ranking.encode_ranking` bytes) when it was logged on the
    catalogue the pair is evidence for, else None."""

    request: str
    conversation: str
    tool: str
    status: str
    vector: np.ndarray
    ts: float = 0.0
    ranking: bytes | None = None

    @property
    def weight(self) -> float:
        return STATUS_WEIGHTS.get(self.status, 0.0)


@dataclass(frozen=True)
class LearnedState:
    """What was learned for one catalogue: ``tools[i]`` owns ``vectors[i]`` (float16,
    shape (m, d), rows L2-normalised) with weight ``weights[i]`` (float32). ``version``
    counts promotions for the catalogue; ``measured``: the held-back replay that promoted
    it (``before``/``after`` recall@k, ``requests``, ``k``); ``evidence``: pairs by status."""

    catalog: str
    embedder: str
    version: int
    created: float
    tools: tuple[str, ...]
    vectors: np.ndarray
    weights: np.ndarray
    evidence: Mapping[str, int] = field(default_factory=dict)
    measured: Mapping[str, float] = field(default_factory=dict)
    #: Boost per unit of P(needed) × weight.
    gain: float = GAIN
    #: Share of ``center`` taken off a query vector before the dense ranking.
    centering: float = 0.0
    #: The mean of the traffic's L2-normalised query vectors, float16 (d,); None: none.
    center: np.ndarray | None = None
    #: P(a past request's tool is needed) at each cosine of
    #: :data:`selection.learning.calibration.POINTS`, float32 (21,).
    calibration: np.ndarray = field(default_factory=PRIOR.copy)

    @property
    def learned_tools(self) -> list[str]:
        return sorted(set(self.tools))

    @property
    def size_bytes(self) -> int:
        return int(self.vectors.nbytes + self.weights.nbytes)


def learn(
    evidence: Iterable[Evidence],
    *,
    catalog: str,
    embedder: str,
    version: int,
    created: float,
    measured: Mapping[str, float] | None = None,
    gain: float = GAIN,
    centering: float = 0.0,
) -> LearnedState:
    """A state from ``evidence`` (pairs of tools outside ``STATUS_WEIGHTS`` ignored):
    per tool, near-duplicate vectors merged, the :data:`PER_TOOL` heaviest kept, and at
    most :data:`MAX_VECTORS` in all (the heaviest, then the most recent); with ``gain``
    0, no vectors (no boost). ``center``: the mean of every evidence request's vector;
    ``calibration``: :func:`~selection.learning.calibration.calibrate` of the requests."""
    by_tool: dict[str, list[tuple[np.ndarray, float, float]]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    requests: dict[str, np.ndarray] = {}
    used: dict[str, set[str]] = defaultdict(set)
    conversations: dict[str, str] = {}
    for pair in evidence:
        weight = pair.weight
        if weight <= 0:
            continue
        vector = np.asarray(pair.vector, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        if norm == 0 or not np.isfinite(norm):
            continue
        counts[pair.status] += 1
        by_tool[pair.tool].append((vector / norm, weight, pair.ts))
        requests.setdefault(pair.request, vector / norm)
        used[pair.request].add(pair.tool)
        conversations[pair.request] = pair.conversation
    kept_all: list[tuple[str, np.ndarray, float, float]] = []
    for tool in sorted(by_tool):
        kept: list[list] = []  # [vector, weight, ts]
        for vector, weight, ts in sorted(by_tool[tool], key=lambda item: item[2]):
            for entry in kept:
                if float(entry[0] @ vector) >= DEDUPE_COSINE:
                    entry[1] = min(MAX_WEIGHT, entry[1] + weight)
                    entry[2] = max(entry[2], ts)
                    break
            else:
                kept.append([vector, weight, ts])
        kept.sort(key=lambda entry: (-entry[1], -entry[2]))
        kept_all += [(tool, vector, weight, ts) for vector, weight, ts in kept[:PER_TOOL]]
    kept_all.sort(key=lambda entry: (-entry[2], -entry[3]))
    kept_all = sorted(kept_all[:MAX_VECTORS], key=lambda entry: entry[0])
    tools = [entry[0] for entry in kept_all]
    rows = [entry[1] for entry in kept_all]
    weights = [entry[2] for entry in kept_all]
    dimension = rows[0].shape[0] if rows else 0
    if gain <= 0:
        tools, rows, weights = [], [], []
    center = np.vstack(list(requests.values())).mean(axis=0) if requests else None
    return LearnedState(
        catalog=catalog,
        embedder=embedder,
        version=version,
        created=created,
        tools=tuple(tools),
        vectors=(np.vstack(rows) if rows else np.zeros((0, dimension))).astype(np.float16),
        weights=np.asarray(weights, dtype=np.float32),
        evidence=dict(counts),
        measured=dict(measured or {}),
        gain=gain,
        centering=centering,
        center=None if center is None else center.astype(np.float16),
        calibration=calibrate(
            list(requests.values()), [frozenset(used[r]) for r in requests],
            [conversations[r] for r in requests],
        ),
    )


def encode_state(state: LearnedState) -> bytes:
    """``state`` as bytes: an ``.npz`` archive (numpy, no pickles) of the vectors, the
    weights and a JSON header (format, catalogue, embedder, version, tools, reports)."""
    header = {
        "format": FORMAT,
        "catalog": state.catalog,
        "embedder": state.embedder,
        "version": state.version,
        "created": state.created,
        "tools": list(state.tools),
        "evidence": dict(state.evidence),
        "measured": dict(state.measured),
        "gain": state.gain,
        "centering": state.centering,
    }
    arrays = {} if state.center is None else {"center": state.center.astype(np.float16)}
    buffer = io.BytesIO()
    np.savez(
        buffer,
        header=np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8),
        vectors=state.vectors.astype(np.float16),
        weights=state.weights.astype(np.float32),
        calibration=state.calibration.astype(np.float32),
        **arrays,
    )
    return buffer.getvalue()


def decode_state(raw: bytes, *, catalog: str | None = None, embedder: str | None = None) -> LearnedState:
    """Read :func:`encode_state`'s bytes. Raises LearnedStateError when they are corrupt,
    of another format (an older one included), or learned for another ``catalog`` /
    ``embedder`` (when given)."""
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
            header = json.loads(bytes(archive["header"]).decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise LearnedStateError("not a toolprune learned state of this version")
            vectors = np.asarray(archive["vectors"], dtype=np.float16)
            weights = np.asarray(archive["weights"], dtype=np.float32)
            calibration = np.asarray(archive["calibration"], dtype=np.float32)
            center = (np.asarray(archive["center"], dtype=np.float16)
                      if "center" in archive.files else None)
        tools = tuple(str(name) for name in header["tools"])
        state = LearnedState(
            catalog=str(header["catalog"]),
            embedder=str(header["embedder"]),
            version=int(header["version"]),
            created=float(header["created"]),
            tools=tools,
            vectors=vectors,
            weights=weights,
            evidence={str(k): int(v) for k, v in dict(header.get("evidence", {})).items()},
            measured={str(k): float(v) for k, v in dict(header.get("measured", {})).items()},
            gain=float(header["gain"]),
            centering=float(header["centering"]) if center is not None else 0.0,
            center=center,
            calibration=calibration,
        )
    except LearnedStateError:
        raise
    except Exception as exc:
        raise LearnedStateError(f"unreadable learned state: {type(exc).__name__}") from exc
    if vectors.ndim != 2 or vectors.shape[0] != len(tools) or weights.shape != (len(tools),):
        raise LearnedStateError("learned state arrays do not match its tools")
    if center is not None and (center.ndim != 1 or not np.isfinite(center).all()):
        raise LearnedStateError("learned state's mean query vector is malformed")
    if calibration.shape != PRIOR.shape or not np.isfinite(calibration).all():
        raise LearnedStateError("learned state's calibration is malformed")
    if catalog is not None and state.catalog != catalog:
        raise LearnedStateError("learned state of another catalogue")
    if embedder is not None and state.embedder != embedder:
        raise LearnedStateError("learned state of another embedder")
    return state


@dataclass(frozen=True)
class LearnedIndex:
    """A state bound to a catalogue: ``positions[i]`` is the catalogue position of the
    tool owning ``vectors[i]`` (float32). ``dropped``: learned tools the catalogue lacks.
    ``shift``: float32 (d,), ``centering × center`` (None: queries are ranked as they are)."""

    state: LearnedState
    positions: np.ndarray
    vectors: np.ndarray
    weights: np.ndarray
    n_tools: int
    dropped: tuple[str, ...]
    shift: np.ndarray | None = None

    @classmethod
    def bind(cls, state: LearnedState, catalog: Catalog) -> LearnedIndex:
        keep = [i for i, name in enumerate(state.tools) if catalog.index_of(name) is not None]
        dropped = tuple(sorted({name for name in state.tools if catalog.index_of(name) is None}))
        positions = np.asarray([catalog.index_of(state.tools[i]) for i in keep], dtype=np.int64)
        shift = None
        if state.center is not None and state.centering > 0:
            shift = np.float32(state.centering) * state.center.astype(np.float32)
        return cls(
            state,
            positions,
            np.ascontiguousarray(state.vectors[keep], dtype=np.float32),
            state.weights[keep].astype(np.float32),
            len(catalog),
            dropped,
            shift,
        )

    def center(self, queries: np.ndarray) -> np.ndarray:
        """The query vectors to rank against the catalogue's index: ``queries`` (float32
        (p, d), rows L2-normalised) less the state's share of the traffic's mean, rows
        L2-normalised again; ``queries`` themselves without centering (or of another
        dimension)."""
        if self.shift is None or queries.ndim != 2 or queries.shape[1] != self.shift.shape[0]:
            return queries
        shifted = np.asarray(queries, dtype=np.float32) - self.shift
        norms = np.linalg.norm(shifted, axis=1, keepdims=True)
        return shifted / np.maximum(norms, 1e-12)

    def boost(self, queries: np.ndarray) -> np.ndarray:
        """Per-tool boost, float32 ``(n_tools,)`` (0 for tools without evidence), for a
        request's query parts ``queries`` (float32 (p, d), rows L2-normalised): its whole
        query (the first part, :func:`selection.conversation.query.query_parts`) against the evidence,
        which are whole queries too, as the calibration measured them."""
        out = np.zeros(self.n_tools, dtype=np.float32)
        if not len(self.positions) or queries.shape[0] == 0:
            return out
        if queries.shape[1] != self.vectors.shape[1]:
            return out
        cosines = self.vectors @ np.asarray(queries[0], dtype=np.float32)
        chance = likelihood(cosines, self.state.calibration)
        gains = np.float32(self.state.gain) * self.weights * chance
        np.maximum.at(out, self.positions, gains)
        return out


def learned_names(
    catalog: Catalog, scores: np.ndarray, boost: np.ndarray, chosen: Iterable[str], k: int
) -> set[str]:
    """Which of ``chosen`` are there because of learned state: boosted, and outside the
    ``k`` best tools by their scores without the boost."""
    if k <= 0 or not len(scores):
        return set()
    plain = np.asarray(scores, dtype=np.float32) - boost
    cutoff = float(np.partition(-plain, min(k, len(plain)) - 1)[min(k, len(plain)) - 1]) * -1
    names = set()
    for name in chosen:
        position = catalog.index_of(name)
        if position is not None and boost[position] > 0 and plain[position] < cutoff:
            names.add(name)
    return names
