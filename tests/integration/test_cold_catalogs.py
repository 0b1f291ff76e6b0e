"""A catalogue not seen before costs its first request a short wait at most: past
``index_timeout_s`` the request is pruned by BM25 alone (``X-Tool-Pruning-Index:
building``) while indexing goes on, and by the full ranking once indexed; ``toolprune serve --warm`` indexes catalogues at start-up,
and ``/readyz`` waits for them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support.data import REAL_CATALOGS
from tests.conftest import ProxyFactory, RunningUpstream

CATALOG = REAL_CATALOGS / "playwright_mcp.json"
PLAYWRIGHT: list[dict[str, Any]] = json.loads(CATALOG.read_text())
ASK = [{"role": "user", "content": "Open https://example.com in the browser and take a screenshot"}]
CHAT = "/v1/chat/completions"
TOOLS_HEADER = "x-tool-pruning-tools"
INDEX_HEADER = "x-tool-pruning-index"
DEADLINE_S = 180.0


def post(proxy: str) -> httpx.Response:
    body = {"model": "m", "messages": ASK, "tools": PLAYWRIGHT}
    response = httpx.post(proxy + CHAT, json=body, timeout=60)
    assert response.status_code == 200
    return response


def forwarded_count(upstream: RunningUpstream) -> int:
    last = [r for r in upstream.upstream.requests if r.path.endswith(CHAT)][-1]
    return len(last.json()["tools"])


def forwarded_names(upstream: RunningUpstream) -> set[str]:
    last = [r for r in upstream.upstream.requests if r.path.endswith(CHAT)][-1]
    return {tool["function"]["name"] for tool in last.json()["tools"]}


def test_a_cold_catalogue_is_pruned_by_bm25_until_indexed_then_by_the_full_ranking(
    upstream: RunningUpstream, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(index_timeout_s=0.01)
    first = post(proxy)
    assert first.headers[INDEX_HEADER] == "building"
    assert TOOLS_HEADER in first.headers
    names = forwarded_names(upstream)
    assert len(names) < len(PLAYWRIGHT)
    assert "browser_take_screenshot" in names  # ranked by the query's own words
    deadline = time.monotonic() + DEADLINE_S
    while INDEX_HEADER in (answer := post(proxy)).headers:  # the build goes on meanwhile
        assert time.monotonic() < deadline, "the catalogue was never indexed"
        time.sleep(0.2)
    assert TOOLS_HEADER in answer.headers
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
