"""Sending one upstream round of an acting request, for every API: the body its adapter
wrote for the round, in place of the client's."""

from __future__ import annotations

import json

from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import upstream_request_headers
from proxy.http.upstream import UpstreamResponse
from proxy.turn.turn import json_bytes


def plain_body(body: bytes) -> bytes:
    """A streaming request's body asking for one JSON answer instead (``stream`` false,
    ``stream_options`` dropped), for upstreams that cannot stream tool calls
    (:meth:`proxy.servers.probe.ServerProbe.streams_tool_calls`)."""
    plain = json.loads(body)
    plain["stream"] = False
    plain.pop("stream_options", None)
    return json_bytes(plain)


async def send_round(forwarder: Forwarder, request: ClientRequest, body: bytes) -> UpstreamResponse:
    """Send ``body`` upstream for ``request`` through :meth:`Forwarder.open` (counted,
    and no round for a client that has left). The proxy must read intercepted bodies, so
    it asks for them uncompressed. Raises the ``proxy.http.errors`` of
    :meth:`Upstream.send`."""
    headers = [
        (name, value)
        for name, value in upstream_request_headers(request.headers, request.request_id)
        if name != b"accept-encoding"
    ]
    headers.append((b"accept-encoding", b"identity"))
    return await forwarder.open(request, body, headers)
