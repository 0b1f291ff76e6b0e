"""Asking the model server about itself: one JSON answer per URL, or nothing.

An answer counts only when it is a 2xx whose body is JSON: a 404, an error, a timeout, a
body that is not JSON and any ``text/html`` answer (a web app's catch-all route answers
every path with 200 and its page: Lemonade with its web app installed) read as "no
answer", never as facts. Each URL is asked once per :class:`Asker` (a probe), within one
deadline for all of them.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from yarl import URL

from config.settings import Settings
from proxy.http.errors import ProxyError, UpstreamUnavailable
from proxy.http.upstream import Upstream, read_decoded


class Asker:
    """Asks ``upstream`` GET and POST requests until ``deadline`` (``time.monotonic()``),
    with ``api_key`` as a bearer token when given; answers are kept by method and URL.
    ``failed``: a request went unanswered (the server unreachable, a timeout, a status of
    500 or more: a server starting or loading its model): what it would have said is not
    known. Once the server is unreachable, nothing more is asked."""

    def __init__(self, upstream: Upstream, deadline: float, api_key: str | None = None) -> None:
        self._upstream = upstream
        self._deadline = deadline
        self._auth = [(b"authorization", f"Bearer {api_key}".encode())] if api_key else []
        self._answers: dict[tuple[str, str, str], Any] = {}
        self.failed = False
        self._unreachable = False

    async def get(self, url: str) -> Any:
        """The JSON answer of ``GET url``, or None."""
        return await self.ask("GET", url)

    async def post(self, url: str, body: Any) -> Any:
        """The JSON answer of ``POST url`` with the JSON ``body``, or None."""
        return await self.ask("POST", url, body)

    async def ask(self, method: str, url: str, body: Any = None) -> Any:
        content = json.dumps(body).encode() if body is not None else b""
        key = (method, url, content.decode())
        if key not in self._answers:
            self._answers[key] = await self._fetch(method, url, content)
        return self._answers[key]

    async def _fetch(self, method: str, url: str, content: bytes) -> Any:
        left = self._deadline - time.monotonic()
        if left <= 0 or self._unreachable:
            self.failed = True
            return None
        headers = [*self._auth, *([(b"content-type", b"application/json")] if content else [])]
        try:
            async with asyncio.timeout(left):
                response, _ = await self._upstream.send(method, url, headers, content)
                try:
                    self.failed = self.failed or response.status_code >= 500
                    kind = (response.header(b"content-type") or b"").lower()
                    if not 200 <= response.status_code < 300 or b"html" in kind:
                        return None
                    raw = await read_decoded(response)
                finally:
                    await response.aclose()
            return json.loads(raw)
        except UpstreamUnavailable:
            self.failed = self._unreachable = True
        except (ProxyError, TimeoutError):
            self.failed = True
        except (ValueError, RecursionError):
            pass
        return None


def urls(base_url: str) -> tuple[str, list[str]]:
    """The base URL as configured, and the roots a server's own endpoints hang from, in
    the order they are tried: the base URL without its trailing ``/v1`` (a server behind
    a path prefix: ``http://gateway/llama/v1`` → ``http://gateway/llama``), then the
    origin (``http://host:port``)."""
    base = base_url.rstrip("/")
    origin = str(URL(base).origin())
    roots = [base.removesuffix("/v1") if base.endswith("/v1") else base, origin]
    return base, list(dict.fromkeys(roots))


def positive_int(value: Any) -> int | None:
    """``value`` when it is an int above 0 (a bool is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def api_key(settings: Settings) -> str | None:
    """``TOOLPRUNE_UPSTREAM_API_KEY``, for the proxy's own requests."""
    key = settings.upstream_api_key
    return key.get_secret_value() if key is not None else None
