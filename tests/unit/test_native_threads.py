"""The proxy runs numpy's BLAS on one thread (proxy.components.limit_blas_threads)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from proxy.components import limit_blas_threads


def test_blas_runs_on_one_thread_after_the_limit() -> None:
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    limit_blas_threads()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)
