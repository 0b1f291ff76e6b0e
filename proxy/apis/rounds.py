"""Upstream rounds of an acting Responses or Messages request, and serving its plain
(``stream`` not true) response: meta-calls alone are answered and the request
re-issued (bounded by ``max_meta_rounds``); meta-calls mixed with client calls are
removed and their loads take effect next turn; ``usage`` is summed over rounds."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import Send

from proxy.apis.adapter import ApiAdapter
from proxy.chat.context import TurnServices
from proxy.chat.turn import Turn, add_usage, json_bytes
from proxy.http.asgi import send_complete, send_error
from proxy.http.errors import ProxyError
from proxy.http.forwarding import ClientRequest, response_headers
from proxy.http.headers import Headers, upstream_request_headers
from proxy.http.upstream import UpstreamResponse, read_decoded
from proxy.metrics import route_label


async def send_api_round(
    services: TurnServices, request: ClientRequest, body: bytes
) -> UpstreamResponse:
    """Send ``body`` upstream in place of the client's and return the response with its
    headers read (uncompressed: the proxy reads intercepted bodies). Raises the
    ``proxy.http.errors`` of :meth:`Upstream.send`."""
    headers = [
        (name, value)
        for name, value in upstream_request_headers(request.headers, request.request_id)
        if name != b"accept-encoding"
    ]
    headers.append((b"accept-encoding", b"identity"))
    upstream = services.forwarder.upstream
    url = upstream.url_for(request.raw_path, request.query_string)
    request.raise_if_client_gone()
    response, waited_s = await upstream.send(request.method, url, headers, body)
    services.metrics.upstream_latency.labels(route_label(request.path)).observe(waited_s)
    request.log.track(response, services.metrics, route_label(request.path))
    return response


async def send_turn_round(
    services: TurnServices, adapter: ApiAdapter, turn: Turn, request: ClientRequest
) -> UpstreamResponse:
    """Send ``turn``'s next round: the body ``adapter`` builds for it, meta-tools offered
    while re-issues remain (:meth:`Turn.offer_meta_now`). Raises as :func:`send_api_round`."""
    offered = turn.offer_meta_now(services.max_meta_rounds)
    return await send_api_round(services, request, adapter.upstream_body(turn, offered))


async def serve_plain(
    services: TurnServices, adapter: ApiAdapter, turn: Turn, request: ClientRequest, send: Send,
    extra_headers: Headers, started: float, first: UpstreamResponse,
) -> None:
    """Serve ``turn`` and send one response to the client. ``first``: the first round's
    response (:mod:`proxy.apis.handler` sends that round)."""
    usage: dict[str, Any] | None = None
    response = first
    while True:
        offered = turn.offer_meta_now(services.max_meta_rounds)
        try:
            if response.status_code != 200:
                await services.forwarder.relay(response, send, extra_headers)
                return
            raw = await read_decoded(response)
        except ProxyError as error:
            await send_error(send, error, headers=extra_headers)
            return
        finally:
            await response.aclose()
        headers = [
            (name, value)
            for name, value in response_headers(response)
            if name not in (b"content-length", b"content-encoding")
        ]
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise TypeError("the response is not an object")
            reply = adapter.read_reply(turn, data)
        except (ValueError, KeyError, TypeError):
            await send_complete(send, 200, [*headers, *extra_headers], raw)
            return
        usage = add_usage(usage, data.get("usage"))
        if reply.meta and not reply.real_calls and offered:
            results = await services.run_meta_calls(turn, reply.meta)
            adapter.append_exchange(turn, reply, results)
            turn.rounds += 1
            try:
                response = await send_turn_round(services, adapter, turn, request)
            except ProxyError as error:
                await send_error(send, error, headers=extra_headers)
                return
            continue
        if reply.meta:  # mixed, or rounds exhausted: loads take effect next turn
            await services.run_meta_calls(turn, reply.meta)
        turn.response_calls = reply.real_calls
        adapter.finish_reply(turn, data, usage, only_meta=bool(reply.meta) and not reply.real_calls)
        services.metrics.ttft.labels(turn.decision).observe(time.perf_counter() - started)
        await send_complete(send, 200, [*headers, *extra_headers], json_bytes(data))
        return
