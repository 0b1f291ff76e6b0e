"""The load generator of ``benchmarks/load.py``: one window's raw requests (every query
distinct, so none is answered from the proxy's query cache) and the streaming clients, raw
asyncio connections parsed with ``httptools`` (the C parser uvicorn uses), so the load
generator costs little CPU next to the servers it measures."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httptools

CHAT = "/v1/chat/completions"

QUERIES = [
    "List the open pull requests in octocat/hello-world and show me the failing checks.",
    "Create an issue in acme/api titled 'Login fails on Safari' and label it bug.",
    "What changed in the last three commits on the main branch of acme/web?",
    "Search the code of acme/api for uses of the deprecated fetch_user function.",
    "Re-run the failed jobs of the latest workflow run in acme/infra.",
    "Who reviewed pull request 42 in acme/web, and were there requested changes?",
    "Get the contents of README.md on the develop branch of acme/docs.",
    "Show the Dependabot alerts for acme/api sorted by severity.",
]


class Requests:
    """The raw requests of one window: every request's query is distinct (one of
    ``QUERIES`` with the window, client and request number in its one sentence), so the
    proxy's query cache answers none of them and every request's query is embedded."""

    PLACEHOLDER = "\u0000query\u0000"

    def __init__(self, catalog: Path | None, host: str, port: int, window: int) -> None:
        """``catalog``: the tools JSON array every request sends; None: no ``tools`` (the
        proxy passes such a request through unchanged)."""
        body = json.dumps({
            "model": "load",
            "stream": True,
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": self.PLACEHOLDER},
            ],
            **({"tools": json.loads(catalog.read_text())} if catalog is not None else {}),
        })
        self._before, self._after = body.split(json.dumps(self.PLACEHOLDER), 1)
        self._host, self._port, self._window = host, port, window

    def query(self, client: int, i: int) -> str:
        return f"For ticket {self._window}-{client}-{i}: {QUERIES[(client + i) % len(QUERIES)]}"

    def body(self, client: int, i: int) -> bytes:
        return (self._before + json.dumps(self.query(client, i)) + self._after).encode()

    def request(self, client: int, i: int) -> bytes:
        body = self.body(client, i)
        head = (
            f"POST {CHAT} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: application/json\r\nX-Conversation-Id: load-{client}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


# --- one streaming client ----------------------------------------------------------------
class _Response:
    """httptools callbacks for one response: status, first body byte, end, [DONE] seen."""

    def __init__(self) -> None:
        self.status = 0
        self.first: float | None = None
        self.complete = False
        self.tail = b""
        self.keep_alive = True

    def on_status(self, status: bytes) -> None:
        pass

    def on_body(self, body: bytes) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.tail = (self.tail + body)[-64:]

    def on_message_complete(self) -> None:
        self.complete = True


@dataclass
class Samples:
    """Latencies (seconds) of the streams sent in a measured interval."""

    first: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


async def client_loop(
    host: str, port: int, requests: Requests, client: int, start: float,
    measure_from: float, deadline: float, samples: Samples,
) -> None:
    """From ``start`` to ``deadline`` (perf_counter), send streaming requests one after
    another; the latencies of those sent from ``measure_from`` on are kept."""
    await asyncio.sleep(max(0.0, start - time.perf_counter()))
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    i = 0
    while time.perf_counter() < deadline:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
            assert reader is not None
            response = _Response()
            parser = httptools.HttpResponseParser(response)
            started = time.perf_counter()
            writer.write(requests.request(client, i))
            i += 1
            while not response.complete:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("closed mid-response")
                parser.feed_data(data)
            end = time.perf_counter()
            status = parser.get_status_code()
            if status != 200:
                samples.fail(f"http {status}")
            elif b"[DONE]" not in response.tail or response.first is None:
                samples.fail("no [DONE]")
            elif measure_from <= started:
                samples.first.append(response.first - started)
                samples.total.append(end - started)
            if not parser.should_keep_alive():
                writer.close()
                writer = None
        except (OSError, ConnectionError, httptools.HttpParserError) as error:
            samples.fail(type(error).__name__)
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()
