"""Shared fixtures: a scripted test upstream and the proxy, both real uvicorn servers on
loopback."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest

from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream
from config.settings import Settings
from proxy.app import create_app
from tests.support.logs import Lines


@dataclass
class RunningUpstream:
    upstream: Upstream
    origin: str

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"


@pytest.fixture(autouse=True)
def own_vector_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's proxies, CLI commands and their child processes keep tool vectors in a
    store of the test's own (``TOOLPRUNE_VECTOR_STORE_DIR``): a catalogue is cold in every
    test, whatever ran before."""
    monkeypatch.setenv("TOOLPRUNE_VECTOR_STORE_DIR", str(tmp_path_factory.mktemp("vectors")))


@pytest.fixture
def upstream() -> Iterator[RunningUpstream]:
    fake = Upstream()
    with serve_in_thread(fake.app) as origin:
        yield RunningUpstream(fake, origin)


ProxyFactory = Callable[..., str]


@pytest.fixture
def start_proxy(upstream: RunningUpstream) -> Iterator[ProxyFactory]:
    """Start a proxy in front of the test upstream; returns its origin. Keyword arguments
    are ``Settings`` fields."""
    with ExitStack() as stack:

        def start(**overrides: object) -> str:
            # Tests wait for a cold catalogue to be indexed (the default forwards it unpruned
            # after 1.5 s): their first request is pruned like the ones after it.
            settings = Settings(
                **{"upstream_url": upstream.base_url, "index_timeout_s": 300.0, **overrides}
            )
            return stack.enter_context(
                serve_in_thread(create_app(settings), server_header=False, date_header=False)
            )

        yield start


@pytest.fixture
def proxy(start_proxy: ProxyFactory) -> str:
    """A proxy with default settings in front of the test upstream."""
    return start_proxy()


@pytest.fixture
def log_lines() -> Iterator[Lines]:
    """The records the ``toolprune`` logger writes during the test."""
    handler = Lines()
    logger = logging.getLogger("toolprune")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
