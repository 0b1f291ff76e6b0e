"""One agent CLI session, directly against an upstream or through a cold ``toolprune
serve``, with what crossed each hop recorded and written out. A session is one CLI run per
user prompt: the first starts it, each later one continues it with the CLI's own switch
(:func:`benchmarks.support.agent_clients.run_client`, ``follow_up``), through the same
relays and proxy.

Layout: CLI → recording relay → [``toolprune serve``, or a relay rewriting each request →]
recording relay → upstream (the last relay keeps the upstream's answers too, for their
``usage``). The proxy is a fresh process with default settings (no ``--warm``: every catalogue is new to
it), started once its ``/readyz`` answers 200. :func:`run_session` writes into its output
folder::

    client_requests.jsonl    what the CLI sent (to the proxy, or to the upstream directly)
    upstream_requests.jsonl  what reached the upstream (through the proxy, or directly)
    proxy.log                the proxy's JSON log lines (its ``pruning_decision`` lines
    decisions.jsonl          and ``request`` lines, also on their own)
    client/                  the CLI's home, configuration, stdout, stderr, MCP calls
                             (elsewhere when ``client_dir`` is given)

Requests are written as JSON lines ``{"method", "path", "query", "headers", "body"}``
(``body`` parsed when it is JSON) without credential headers. These files hold the
clients' prompts: they are test and benchmark output, never committed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.processes import Server, clean_env, free_port, start_server
from benchmarks.support.agent_clients import (
    CODEX_CONTEXT_WINDOW,
    DEFAULT_TIMEOUT_S,
    PROMPT,
    AgentRun,
    Mode,
    json_lines,
    run_client,
)
from benchmarks.support.recording_relay import Exchange, RecordingRelay
from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Recorded

#: Start-up of ``toolprune serve`` (its embedder loads before ``/readyz`` answers 200).
PROXY_READY_DEADLINE_S = 120.0
MODEL_PATHS = ("/chat/completions", "/messages", "/responses")
#: The proxy's log events kept in ``decisions.jsonl``.
DECISION_EVENTS = ("pruning_decision", "request")
_SECRET_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "cookie"}


@dataclass
class Session:
    """A finished session: the CLI's runs (one per prompt) and what each hop received."""

    runs: list[AgentRun]
    via_proxy: bool
    client_exchanges: list[Exchange]
    #: What reached the upstream, with the upstream's response bodies.
    upstream_exchanges: list[Exchange]
    proxy_log: list[dict[str, Any]] = field(default_factory=list)
    out_dir: Path = Path()

    @property
    def run(self) -> AgentRun:
        """The last run (the only one of a one-prompt session): its MCP calls are the
        session's, its answer the last."""
        return self.runs[-1]

    @property
    def client_requests(self) -> list[Recorded]:
        """What the CLI sent, in order."""
        return [exchange.request for exchange in self.client_exchanges]

    @property
    def upstream_requests(self) -> list[Recorded]:
        """What reached the upstream, in order."""
        return [exchange.request for exchange in self.upstream_exchanges]

    def decision_of(self, exchange: Exchange) -> dict[str, Any] | None:
        """The proxy's ``pruning_decision`` line of a request the CLI sent (matched by the
        ``X-Request-Id`` of its response), or None."""
        request_id = exchange.header("x-request-id")
        return next((line for line in self.decisions if request_id is not None
                     and line.get("request_id") == request_id), None)

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The proxy's ``pruning_decision`` lines, in order."""
        return [line for line in self.proxy_log if line.get("event") == "pruning_decision"]

    def model_exchanges(self) -> list[Exchange]:
        """The POSTs to the three model APIs that reached the upstream, with its answers."""
        return [exchange for exchange in self.upstream_exchanges
                if exchange.request.method == "POST"
                and exchange.request.path.endswith(MODEL_PATHS)]

    def describe(self) -> str:
        """The run's summary and where its captures are, for assertion messages."""
        return "\n".join([*(run.summary() for run in self.runs), f"captures: {self.out_dir}"])


@contextmanager
def cold_proxy(upstream_base_url: str, log_dir: Path,
               settings: Mapping[str, str] | None = None) -> Iterator[Server]:
    """A fresh ``toolprune serve`` in front of ``upstream_base_url`` (``…/v1``), default
    settings plus ``settings`` (``TOOLPRUNE_*`` names without the prefix), log in
    ``log_dir/proxy.log``; yielded once ``/readyz`` answers 200, stopped on exit."""
    port = free_port()
    env = clean_env()
    env.update({f"TOOLPRUNE_{key.upper()}": value for key, value in (settings or {}).items()})
    argv = [sys.executable, "-m", "proxy.cli.main", "serve", "--port", str(port),
            "--upstream", upstream_base_url]
    server = start_server("proxy", argv, port, log_dir, env)
    try:
        deadline = time.monotonic() + PROXY_READY_DEADLINE_S
        while True:
            try:
                if httpx.get(server.origin + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.process.poll() is not None:
                raise RuntimeError(f"toolprune serve exited:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"toolprune serve not ready:\n{server.log_tail()}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def run_session(
    mode: Mode, upstream_origin: str, out_dir: Path, *, via_proxy: bool, model: str = "test-model",
    timeout_s: float = DEFAULT_TIMEOUT_S, proxy_settings: Mapping[str, str] | None = None,
    client_env: Mapping[str, str] | None = None, prompts: Sequence[str] = (PROMPT,),
    client_dir: Path | None = None, session_timeout_s: float | None = None,
    on_run: Callable[[AgentRun], None] | None = None, context_window: int = CODEX_CONTEXT_WINDOW,
    rewrite: Callable[[str, bytes], bytes] | None = None,
) -> Session:
    """Run ``mode``'s CLI against ``upstream_origin`` (``http://host:port``), through a
    cold proxy when ``via_proxy``, once per prompt of ``prompts`` (the later ones continue
    the session; none after a run that failed, nor once ``session_timeout_s`` seconds have
    passed, each run bounded by what is left); write the captures (module docstring) to
    ``out_dir``. ``client_env`` is added to the CLI's environment; ``client_dir``: the
    CLI's folder (its home and project; default ``out_dir/client``): the same path for
    two sessions makes the paths in their prompts the same; ``on_run`` is called with
    each finished run; ``context_window``: the model's context as Codex's client-search
    mode is told it (tokens); ``rewrite``: without the proxy, a relay in its place
    forwards ``rewrite(path, body)`` of each request instead of its body."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        upstream_relay = RecordingRelay(upstream_origin, keep_bodies=True)
        relayed_upstream = stack.enter_context(serve_in_thread(upstream_relay))
        target = relayed_upstream
        if via_proxy:
            proxy = stack.enter_context(cold_proxy(relayed_upstream + "/v1", out_dir, proxy_settings))
            target = proxy.origin
        elif rewrite is not None:
            target = stack.enter_context(serve_in_thread(RecordingRelay(target, rewrite=rewrite)))
        client_relay = RecordingRelay(target)
        client_origin = stack.enter_context(serve_in_thread(client_relay))
        runs: list[AgentRun] = []
        started = time.monotonic()
        for index, prompt in enumerate(prompts):
            left = (timeout_s if session_timeout_s is None
                    else min(timeout_s, session_timeout_s - (time.monotonic() - started)))
            if left <= 0:
                break
            runs.append(run_client(mode, client_origin, client_dir or out_dir / "client",
                                   model=model, timeout_s=left, prompt=prompt,
                                   env=client_env, follow_up=index > 0,
                                   context_window=context_window))
            if on_run is not None:
                on_run(runs[-1])
            if runs[-1].returncode != 0:
                break
    client_requests = client_relay.requests
    upstream_requests = upstream_relay.requests
    proxy_log = _read_log(out_dir / "proxy.log") if via_proxy else []
    _write_requests(out_dir / "client_requests.jsonl", client_requests)
    _write_requests(out_dir / "upstream_requests.jsonl", upstream_requests)
    if via_proxy:
        with (out_dir / "decisions.jsonl").open("w") as out:
            for line in proxy_log:
                if line.get("event") in DECISION_EVENTS:
                    out.write(json.dumps(line) + "\n")
    return Session(runs, via_proxy, client_relay.exchanges, upstream_relay.exchanges, proxy_log,
                   out_dir)


def _read_log(path: Path) -> list[dict[str, Any]]:
    return json_lines(path.read_text(errors="replace")) if path.exists() else []


def _write_requests(path: Path, records: list[Recorded]) -> None:
    with path.open("w") as out:
        for record in records:
            try:
                body: Any = record.json() if record.body else None
            except ValueError:
                body = record.body.decode("utf-8", "replace")
            headers = [[k, v] for k, v in record.headers if k not in _SECRET_HEADERS]
            out.write(json.dumps({"method": record.method, "path": record.path,
                                  "query": record.query, "headers": headers, "body": body}) + "\n")
