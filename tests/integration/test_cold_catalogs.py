"""A catalogue not seen before costs its first request a short wait at most: past
``index_timeout_s`` the request is forwarded unpruned while indexing goes on, and the
catalogue is pruned once indexed; ``toolprune serve --warm`` indexes catalogues at start-up,
and ``/readyz`` waits for them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ProxyFactory, RunningUpstream
from tests.support.data import REAL_CATALOGS

CATALOG = REAL_CATALOGS / "playwright_mcp.json"
PLAYWRIGHT: list[dict[str, Any]] = json.loads(CATALOG.read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
CHAT = "/v1/chat/completions"
TOOLS_HEADER = "x-tool-pruning-tools"
DEADLINE_S = 180.0


def post(proxy: str) -> httpx.Response:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    response = httpx.post(proxy + CHAT, json=body, timeout=60)
    assert response.status_code == 200
    return response


def forwarded_count(upstream: RunningUpstream) -> int:
    last = [r for r in upstream.upstream.requests if r.path.endswith(CHAT)][-1]
    return len(last.json()["tools"])


def test_a_cold_catalogue_is_forwarded_unpruned_then_pruned_once_indexed(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(index_timeout_s=0.01)
    first = post(proxy)
    assert TOOLS_HEADER not in first.headers
    assert forwarded_count(upstream) == len(PLAYWRIGHT)
    deadline = time.monotonic() + DEADLINE_S
    while TOOLS_HEADER not in post(proxy).headers:  # the build goes on in the background
        assert time.monotonic() < deadline, "the catalogue was never indexed"
        time.sleep(0.2)
    assert forwarded_count(upstream) < len(PLAYWRIGHT)


def test_warm_files_are_indexed_before_readiness_and_prune_the_first_request(
    upstream: RunningUpstream, start_proxy: ProxyFactory, tmp_path: Path
) -> None:
    request_file = tmp_path / "body.json"
    request_file.write_text(json.dumps({"model": "m", "messages": ASK, "tools": PLAYWRIGHT}))
    proxy = start_proxy(index_timeout_s=0.01, warm_files=[CATALOG, request_file])
    deadline = time.monotonic() + DEADLINE_S
    while (ready := httpx.get(proxy + "/readyz", timeout=30)).status_code != 200:
        assert ready.json()["checks"].keys() >= {"warm_catalogs"}
        assert time.monotonic() < deadline, "warm catalogues were never indexed"
        time.sleep(0.2)
    assert TOOLS_HEADER in post(proxy).headers
    assert forwarded_count(upstream) < len(PLAYWRIGHT)
