"""How alike a request must be to a past one for the past one's tools to serve it, learned
from the agent's own traffic: the calibration of a learned state's boost
(:mod:`selection.learning.learned`). Pure: no I/O.

The boost gives a tool the chance its best evidence vector's cosine stands for, so the
calibration measures that very statistic on the traffic: for every request and every tool
other conversations' requests called, the best cosine between the request and those
requests is an observation, and whether the request called the tool its outcome. The
share called, per cosine bin of :data:`POINTS`, made non-decreasing in the cosine
(isotonic regression, pool adjacent violators, weighted by observations), is P(needed |
best evidence cosine). The best of many cosines is high by chance, so a tool many
requests called needs a closer match than one a single request called; measuring the
best cosine, not each pair's, counts that. Each request also counts as its own repeat
(cosine 1, each of its tools needed: the same request again needs the same tools), and
cosine 0 as needing none; between observed bins, and for traffic too small to observe
any, the curve is interpolated linearly. What traffic measures is far from one fixed
threshold: on ToolBench's requests a tool whose best evidence is at cosine 0.3–0.4 is
needed well under 1% of the time, on LiveMCPBench's already several percent at 0.25.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Cosines at which the calibration is kept (bins of 0.05 between them), float32 (21,).
POINTS = np.linspace(0.0, 1.0, 21, dtype=np.float32)
#: The calibration of no observations: P = cosine.
PRIOR = POINTS.copy()
#: Requests of the traffic the calibration reads (pairs grow with its square).
SAMPLE = 512


def calibrate(
    vectors: Sequence[np.ndarray], tools: Sequence[frozenset[str]], conversations: Sequence[str]
) -> np.ndarray:
    """P(needed) at each of :data:`POINTS`, float32 (21,), from the first :data:`SAMPLE`
    requests: ``vectors[i]`` float (d,) L2-normalised, the tools ``tools[i]`` its calls
    used, its conversation ``conversations[i]`` (requests of one conversation are not
    evidence for each other: the held-back replay keeps a conversation together)."""
    count = min(len(vectors), SAMPLE)
    if count == 0:
        return PRIOR.copy()
    matrix = np.vstack([np.asarray(v, dtype=np.float32) for v in vectors[:count]])
    names = sorted({name for used in tools[:count] for name in used})
    column = {name: j for j, name in enumerate(names)}
    calls = np.zeros((count, len(names)), dtype=np.float32)
    for i, used in enumerate(tools[:count]):
        calls[i, [column[name] for name in used]] = 1.0
    labels = np.asarray(conversations[:count])
    others = labels[:, None] != labels[None, :]  # one conversation is held back together
    similar = np.where(others, np.clip(matrix @ matrix.T, 0.0, 1.0), -1.0)
    best = np.empty((count, len(names)), dtype=np.float32)
    for j in range(len(names)):  # each request's best cosine to the tool's other users
        best[:, j] = similar[:, np.flatnonzero(calls[:, j])].max(axis=1)
    observed_pairs = best >= 0  # some request of another conversation called the tool
    cosines = best[observed_pairs]
    needed = calls[observed_pairs]
    edges = POINTS[1:-1]
    bins = len(POINTS) - 1
    seen = np.bincount(np.digitize(cosines, edges), minlength=bins).astype(np.float64)
    hits = np.bincount(np.digitize(cosines, edges), weights=needed, minlength=bins)
    seen[-1] += calls.sum()  # each request is its own repeat
    hits[-1] += calls.sum()
    observed = np.flatnonzero(seen > 0)
    centres = (POINTS[:-1] + POINTS[1:]) / 2
    shares = _isotonic(hits[observed] / seen[observed], seen[observed])
    knots = np.concatenate([[0.0], centres[observed], [1.0]])
    values = np.concatenate([[0.0], shares, [shares[-1]]])
    return np.interp(POINTS, knots, values).astype(np.float32)


def likelihood(cosines: np.ndarray, calibration: np.ndarray) -> np.ndarray:
    """P(needed) for ``cosines`` (float32, any shape) under ``calibration`` (float32 (21,)
    at :data:`POINTS`), linear between points; 0 below cosine 0."""
    return np.interp(cosines, POINTS, calibration, left=0.0).astype(np.float32)


def _isotonic(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest ``values`` in weighted least squares (pool
    adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for value, weight in zip(values.tolist(), weights.tolist(), strict=True):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, size, length = blocks.pop()
            blocks[-1] = [
                (blocks[-1][0] * blocks[-1][1] + mean * size) / (blocks[-1][1] + size),
                blocks[-1][1] + size,
                blocks[-1][2] + length,
            ]
    return np.asarray([mean for mean, _, length in blocks for _ in range(int(length))])
