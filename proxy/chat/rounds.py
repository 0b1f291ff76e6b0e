"""Sending one upstream round of an acting request (the rewritten body)."""

from __future__ import annotations

import json


from proxy.chat.turn import Turn, json_bytes
from proxy.http.forwarding import ClientRequest
from proxy.http.headers import upstream_request_headers
from proxy.http.upstream import Upstream, UpstreamResponse
from proxy.metrics import Metrics


async def send_round(
    upstream: Upstream,
    metrics: Metrics,
    request: ClientRequest,
    turn: Turn,
    max_rounds: int,
    *,
    stream_upstream: bool = True,
) -> UpstreamResponse:
    """Send the turn's current body upstream (meta-tools offered while rounds remain) and
    return the response with headers read. The proxy must read intercepted bodies, so it
    asks for them uncompressed. ``stream_upstream=False`` asks a streaming request's answer
    as one JSON body (``stream`` false, ``stream_options`` dropped), for upstreams that
    cannot stream tool calls. Raises the ``proxy.http.errors`` of :meth:`Upstream.send`."""
    headers = [
        (name, value)
        for name, value in upstream_request_headers(request.headers, request.request_id)
        if name != b"accept-encoding"
    ]
    headers.append((b"accept-encoding", b"identity"))
    body = turn.upstream_body(with_meta=turn.offer_meta_now(max_rounds))
    if not stream_upstream and turn.body.get("stream") is True:
        plain = json.loads(body)
        plain["stream"] = False
        plain.pop("stream_options", None)
        body = json_bytes(plain)
    url = upstream.url_for(request.raw_path, request.query_string)
    request.raise_if_client_gone()
    response, waited_s = await upstream.send(request.method, url, headers, body)
    metrics.upstream_latency.labels("chat_completions").observe(waited_s)
    request.log.track(response, metrics, "chat_completions")
    return response
