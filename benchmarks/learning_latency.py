"""What a learned state adds to the request path: the boost of one request's query parts
(:meth:`selection.learning.learned.LearnedIndex.boost`) and the ``learned`` reasons in ``select``,
side by side with the same steps without a state.

Run from the repository root::

    nice env PYTHONPATH=. python benchmarks/learning_latency.py

Per catalogue size: a catalogue of that many tools, a state with 8 evidence vectors for
each of a share of them, and the largest state a catalogue can have
(:data:`selection.learning.learned.MAX_VECTORS`); random unit vectors of the embedder's 384
dimensions (the cost does not depend on the values), 7 query parts (the query and 6
sentences, the proxy's default), numpy's BLAS on one thread as in the proxy. Columns: p50
and p99 of the dense scores (``ToolIndex.best_scores``, what every request pays), of the
boost, and of ``select`` without and with the boost, in CPU milliseconds of this process
(``time.process_time``: on shared cores, wall time counts other processes' turns).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from selection.catalog.catalog import parse_tools
from selection.catalog.policy import Policy
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from selection.indexes.tool_index import ToolIndex
from selection.learning.learned import MAX_VECTORS, Evidence, LearnedIndex, learn
from selection.ranking.pipeline import Ranking

DIMENSION = 384
PARTS = 7
REPEATS = 300


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, DIMENSION)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def timed(function, repeats: int = REPEATS) -> tuple[float, float]:
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        function()
        samples.append((time.process_time() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


def measure(tools: int, vectors: int, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    catalog = parse_tools([
        {"type": "function", "function": {"name": f"tool_{i}", "description": f"tool {i}"}}
        for i in range(tools)
    ])
    index = ToolIndex.build(unit_rows(rng, 2 * tools), [i // 2 for i in range(2 * tools)], tools)
    evidence = [
        Evidence(str(i), str(i), f"tool_{(i // 8) % tools}", "loaded", vector)
        for i, vector in enumerate(unit_rows(rng, vectors))
    ]
    state = learn(evidence, catalog=catalog.fingerprint, embedder="bench", version=1, created=0.0)
    bound = LearnedIndex.bind(state, catalog)
    queries = unit_rows(rng, PARTS)
    dense = index.best_scores(queries)
    boost = bound.boost(queries)
    policy = Policy()
    return {
        "dense": timed(lambda: index.best_scores(queries)),
        "boost": timed(lambda: bound.boost(queries)),
        "select": timed(lambda: select(catalog, Ranking.of(dense), policy, ConversationState(),
                                       TurnFacts(now=0.0))),
        "select+learned": timed(
            lambda: select(catalog, Ranking.of(dense + boost, boost=boost), policy,
                           ConversationState(), TurnFacts(now=0.0))
        ),
        "vectors": (float(len(state.tools)), float(state.size_bytes)),
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    rng = np.random.default_rng(0)
    print(f"{'tools':>6} {'vectors':>8} {'state KB':>9}  "
          f"{'dense p50/p99':>14} {'boost p50/p99':>14} {'select':>14} {'select+learned':>15}")
    with threadpool_limits(limits=1, user_api="blas"):
        for tools, count in ((100, 200), (100, MAX_VECTORS), (527, 400), (527, MAX_VECTORS),
                             (2470, 800), (2470, MAX_VECTORS), (4000, MAX_VECTORS)):
            row = measure(tools, count, rng)
            vectors, size = row["vectors"]
            cells = " ".join(
                f"{row[key][0]:>6.3f}/{row[key][1]:<7.3f}"
                for key in ("dense", "boost", "select", "select+learned")
            )
            print(f"{tools:>6} {vectors:>8.0f} {size / 1024:>9.0f}  {cells}")


if __name__ == "__main__":
    main()
