"""Confidence intervals of ``toolprune eval --live``: a share of successes (Wilson's score
interval) and the difference of two shares measured on the same cases (Bonett and Price's
adjusted Wald interval for paired data).

References: E. B. Wilson, "Probable inference, the law of succession, and statistical
inference", JASA 22 (1927); D. G. Bonett and R. M. Price, "Adjusted Wald confidence
interval for a difference of binomial proportions based on paired data", Journal of
Educational and Behavioral Statistics 37 (2012), recommended for paired proportions by
M. W. Fagerland, S. Lydersen and P. Laake, Statistics in Medicine 33 (2014). Both keep
their coverage for a few dozen cases, where the plain normal approximation (Wald) does not,
and neither collapses to a point when every case agrees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

#: Confidence level of every interval reported.
LEVEL = 0.95


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson's score interval of the share ``successes / n``; ``(0.0, 1.0)`` for
    ``n == 0`` (nothing is known). Raises ValueError when ``successes`` is not in
    ``[0, n]``."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within [0, {n}], got {successes}")
    if n == 0:
        return 0.0, 1.0
    z = _z(level)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def paired_difference(
    first: Sequence[bool], second: Sequence[bool], level: float = LEVEL
) -> tuple[float, float, float]:
    """The difference of shares ``mean(first) - mean(second)`` of two outcomes of the same
    cases (``first[i]`` and ``second[i]``: case ``i``), with Bonett and Price's adjusted
    Wald interval for paired data: ``(difference, low, high)``. Only the discordant cases
    move it; it keeps a width when there are none (``(0.0, -1.0, 1.0)`` for no cases).
    Raises ValueError when the two differ in length."""
    if len(first) != len(second):
        raise ValueError("paired outcomes need one of each per case")
    n = len(first)
    if n == 0:
        return 0.0, -1.0, 1.0
    only_first = sum(1 for a, b in zip(first, second, strict=True) if a and not b)
    only_second = sum(1 for a, b in zip(first, second, strict=True) if b and not a)
    p12, p21 = (only_first + 1) / (n + 2), (only_second + 1) / (n + 2)
    centre = p12 - p21
    half = _z(level) * math.sqrt((p12 + p21 - centre * centre) / (n + 2))
    return (only_first - only_second) / n, max(-1.0, centre - half), min(1.0, centre + half)
