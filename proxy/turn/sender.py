"""Sending one upstream round of an acting request, for every API: the body its adapter
wrote for the round, in place of the client's."""

from __future__ import annotations

import json

from proxy.http.forwarding import ClientRequest
from proxy.http.headers import upstream_request_headers
from proxy.http.upstream import Upstream, UpstreamResponse
from proxy.metrics import Metrics, route_label
from proxy.turn.turn import json_bytes


def plain_body(body: bytes) -> bytes:
    """A streaming request's body asking for one JSON answer instead (``stream`` false,
    ``stream_options`` dropped), for upstreams that cannot stream tool calls
    (:class:`proxy.turn.upstream_kind.StreamingSupport`)."""
    plain = json.loads(body)
    plain["stream"] = False
    plain.pop("stream_options", None)
    return json_bytes(plain)


async def send_round(
    upstream: Upstream, metrics: Metrics, request: ClientRequest, body: bytes
) -> UpstreamResponse:
    """Send ``body`` upstream for ``request`` (its method, path, query and headers) and
    return the response with its headers read. The proxy must read intercepted bodies, so
    it asks for them uncompressed. The round is counted in the request's log line and in
    ``toolprune_upstream_seconds`` (by route). A client that has left starts no round
    (:meth:`ClientRequest.raise_if_client_gone`). Raises the ``proxy.http.errors`` of
    :meth:`Upstream.send`."""
    headers = [
        (name, value)
        for name, value in upstream_request_headers(request.headers, request.request_id)
        if name != b"accept-encoding"
    ]
    headers.append((b"accept-encoding", b"identity"))
    url = upstream.url_for(request.raw_path, request.query_string)
    request.raise_if_client_gone()
    response, waited_s = await upstream.send(request.method, url, headers, body)
    route = route_label(request.path)
    metrics.upstream_latency.labels(route).observe(waited_s)
    request.log.track(response, metrics, route)
    return response
