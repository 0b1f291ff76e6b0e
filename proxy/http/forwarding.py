"""Pass-through forwarding of one request to the upstream, response relayed as it
arrives (chunk by chunk, with the server's back-pressure)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from starlette.types import Send

from proxy.http.asgi import send_body, send_complete, send_error, start_response
from proxy.http.errors import ProxyError, UpstreamResponseInvalid, sse_error_event
from proxy.http.headers import Headers, end_to_end, upstream_request_headers
from proxy.http.request_log import RequestLog
from proxy.http.upstream import Upstream, UpstreamResponse, decoded, raw_chunks
from proxy.log import get_logger
from proxy.metrics import Metrics, route_label

logger = get_logger("forwarding")

#: Reads an upstream error answer (status, decoded body) as an error of the proxy's own
#: (None: relayed as sent).
ErrorReader = Callable[[int, bytes], ProxyError | None]


class ResponseTap(Protocol):
    """Sees a relayed answer's bytes as they pass, never changing them
    (:class:`proxy.servers.answer_tail.AnswerTail`): each chunk once it is sent, then
    ``ended`` once the answer was relayed whole (not after a broken one)."""

    def seen(self, chunk: bytes) -> None: ...

    def ended(self, response: UpstreamResponse) -> None: ...


@dataclass(frozen=True)
class ClientRequest:
    """One client request, its body read in full; ``log``: what its log line will say;
    ``client_gone``: whether its client has closed the connection
    (:meth:`proxy.http.server.GuardedHttpProtocol.client_gone`; None under another server
    protocol)."""

    method: str
    path: str
    raw_path: bytes
    query_string: bytes
    headers: Headers
    body: bytes
    request_id: bytes
    log: RequestLog = field(default_factory=RequestLog, compare=False)
    client_gone: Callable[[], bool] | None = field(default=None, compare=False, repr=False)

    def raise_if_client_gone(self) -> None:
        """Called before each upstream round. Raises CancelledError when the client has
        closed its connection, including a close the event loop has not read yet: the
        cancellation the disconnect watcher would bring a moment later
        (:func:`proxy.http.asgi.run_until_disconnect`), before the round is sent."""
        if self.client_gone is not None and self.client_gone():
            raise asyncio.CancelledError("the client has left")


def response_headers(response: UpstreamResponse) -> Headers:
    """The upstream response's end-to-end headers, names lower-cased."""
    return end_to_end(response.headers)


def is_event_stream(response: UpstreamResponse) -> bool:
    return (response.header(b"content-type") or b"").startswith(b"text/event-stream")


class Forwarder:
    """Forwards requests unchanged (or with a replacement body) and relays responses."""

    def __init__(self, upstream: Upstream, metrics: Metrics) -> None:
        self.upstream = upstream
        self.metrics = metrics

    async def forward(
        self,
        request: ClientRequest,
        send: Send,
        *,
        body: bytes | None = None,
        extra_response_headers: Headers = (),
        errors: ErrorReader | None = None,
        tap: ResponseTap | None = None,
    ) -> None:
        """Send ``request`` upstream (with ``body`` instead of the client's, if given) and
        relay the response (``errors``, ``tap``: see :meth:`relay`) with
        ``extra_response_headers``.
        Proxy errors become OpenAI-shaped error responses, with those headers too; a stream that breaks after the response started
        ends with an SSE error event (never ``[DONE]``), or, for other bodies, with the
        connection closed."""
        try:
            response = await self.open(request, body)
        except ProxyError as error:
            await send_error(send, error, headers=extra_response_headers)
            return
        try:
            await self.relay(response, send, extra_response_headers, errors, tap)
        finally:
            await response.aclose()

    async def open(
        self, request: ClientRequest, body: bytes | None = None, headers: Headers | None = None
    ) -> UpstreamResponse:
        """Send ``request`` upstream (its method, path and query; ``body`` instead of the
        client's and ``headers`` instead of :func:`upstream_request_headers`' if given)
        and return the response with its headers read. The round is counted in the
        request's log line and in ``toolprune_upstream_seconds`` (by route). A client that
        has left starts no round (:meth:`ClientRequest.raise_if_client_gone`). Raises the
        ``proxy.http.errors`` of :meth:`Upstream.send`."""
        url = self.upstream.url_for(request.raw_path, request.query_string)
        if headers is None:
            headers = upstream_request_headers(request.headers, request.request_id)
        request.raise_if_client_gone()
        response, waited_s = await self.upstream.send(
            request.method, url, headers, request.body if body is None else body
        )
        route = route_label(request.path)
        self.metrics.upstream_latency.labels(route).observe(waited_s)
        request.log.track(response, self.metrics, route)
        return response

    async def relay(
        self, response: UpstreamResponse, send: Send, extra_headers: Headers = (),
        errors: ErrorReader | None = None, tap: ResponseTap | None = None,
    ) -> None:
        """Relay an open upstream response to the client, chunk by chunk. An error answer
        (status 400 or more) that ``errors`` reads as one of the proxy's is answered as
        that error instead (a context overflow, in the client's API's shape). ``tap``
        sees each chunk after it is sent, and the end of an answer relayed whole."""
        if errors is not None and response.status_code >= 400:
            await self._relay_error(response, send, extra_headers, errors)
            return
        await start_response(
            send, response.status_code, [*response_headers(response), *extra_headers]
        )
        try:
            async for chunk in raw_chunks(response):
                await send_body(send, chunk)
                if tap is not None:
                    tap.seen(chunk)
        except ProxyError as error:
            logger.warning(
                "upstream_body_broken",
                extra={"fields": {"code": error.code, "status": response.status_code}},
            )
            if is_event_stream(response):
                await send_body(send, sse_error_event(error), more=False)
            return  # other bodies: returning unfinished makes the server close the connection
        await send_body(send, b"", more=False)
        if tap is not None:
            tap.ended(response)

    @staticmethod
    async def _relay_error(
        response: UpstreamResponse, send: Send, extra_headers: Headers, errors: ErrorReader
    ) -> None:
        """An error answer read whole: ``errors``' error for it, else the answer as sent
        (also when its ``Content-Encoding`` is one the proxy does not decode: it is not
        one of the proxy's errors, and the client may read it)."""
        try:
            raw = b"".join([chunk async for chunk in raw_chunks(response)])
        except ProxyError as broken:
            await send_error(send, broken, headers=extra_headers)
            return
        try:
            error = errors(response.status_code, decoded(raw, response.header(b"content-encoding")))
        except UpstreamResponseInvalid:
            error = None
        if error is not None:
            await send_error(send, error, headers=extra_headers)
            return
        headers = [(name, value) for name, value in response_headers(response)
                   if name not in (b"content-length", b"transfer-encoding")]
        await send_complete(send, response.status_code, [*headers, *extra_headers], raw)
