"""The proxy learns a real llama-server's speeds from the ``timings`` of its answers
(issue 57), plain and streamed: after one pruned request, ``/readyz`` shows the model's
prefill and decode speeds with ``timings`` as their source, and the next request's
decision line names them.

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (builds llama-server on
first use). Twelve small tools keep the prompt short: SmolLM2 prefills it in seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.llama import llama_server
from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app
from tests.support.logs import Lines

pytestmark = pytest.mark.real_upstream

TOOLS = [
    {"type": "function", "function": {
        "name": f"{verb}_{thing}", "description": f"{verb.title()} a {thing}.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    for verb in ("get", "list", "delete") for thing in ("issue", "branch", "release", "label")
]


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with llama_server() as llama:
        settings = Settings(upstream_url=llama + "/v1", index_timeout_s=300.0, top_k=3,
                            idle_timeout_s=600.0)
        with serve_in_thread(create_app(settings), server_header=False) as origin:
            yield origin


def ask(proxy: str, stream: bool, text: str) -> httpx.Response:
    body: dict[str, Any] = {"model": "m", "max_tokens": 16, "stream": stream, "tools": TOOLS,
                            "messages": [{"role": "user", "content": text}]}
    response = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=600)
    assert response.status_code == 200, response.text[:300]
    return response


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_speeds_of_a_real_llama_server_are_read_from_its_timings(
    proxy: str, stream: bool, log_lines: Lines
) -> None:
    ask(proxy, stream, f"Which releases are there? ({stream})")
    speeds = httpx.get(proxy + "/readyz", timeout=60).json()["server"]["speeds"]
    (speed,) = speeds.values()
    assert speed["prefill_source"] == speed["decode_source"] == "timings"
    assert speed["prefill_tokens_per_s"] > 0 and speed["decode_tokens_per_s"] > 0
    second = ask(proxy, stream, f"Delete the label named stale. ({stream})")
    line = log_lines.wait_for("pruning_decision", second.headers["x-request-id"])
    assert line["speed"]["prefill_tokens_per_s"] > 0 and line["speed"]["decode_tokens_per_s"] > 0
