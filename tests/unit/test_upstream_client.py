"""Tests for proxy.http.upstream's reading of response bodies: ``raw_chunks`` relays the
bytes as sent (``Content-Encoding`` kept), ``read_decoded`` decodes gzip and deflate and
refuses what it cannot decode. The upstream is a raw asyncio server on loopback that
answers one canned response per connection."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator

import pytest

from config.settings import Settings
from proxy.http.errors import UpstreamResponseInvalid
from proxy.http.upstream import (
    Upstream,
    UpstreamResponse,
    connect_retry_delay,
    create_session,
    raw_chunks,
    read_decoded,
)

BODY = b'{"object": "list", "data": []}' * 50


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


class CannedUpstream:
    """Answers every request with ``body`` and ``Content-Encoding: encoding``."""

    def __init__(self, body: bytes, encoding: bytes | None) -> None:
        self.body, self.encoding = body, encoding
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        if self.encoding is not None:
            head += b"content-encoding: " + self.encoding + b"\r\n"
        head += b"content-length: %d\r\nconnection: close\r\n\r\n" % len(self.body)
        writer.write(head + self.body)
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def fetch(base_url: str) -> AsyncIterator[UpstreamResponse]:
    settings = Settings(upstream_url=base_url)
    session = create_session(settings)
    try:
        upstream = Upstream(settings, session)
        response, _ = await upstream.send("GET", upstream.url_for(b"/v1/models"), [], b"")
        try:
            yield response
        finally:
            await response.aclose()
    finally:
        await session.close()


@pytest.mark.parametrize(
    ("encoding", "encoded"),
    [
        (None, BODY),
        (b"identity", BODY),
        (b"gzip", gzip.compress(BODY)),
        (b"x-gzip", gzip.compress(BODY)),
        (b"deflate", zlib.compress(BODY)),  # RFC 9110's deflate: zlib-wrapped
        (b"deflate", raw_deflate(BODY)),  # raw, as some servers send it
    ],
)
async def test_read_decoded_decodes_the_content_encoding(
    encoding: bytes | None, encoded: bytes
) -> None:
    async with CannedUpstream(encoded, encoding) as base_url:
        async for response in fetch(base_url):
            assert await read_decoded(response) == BODY


async def test_raw_chunks_relay_the_encoded_bytes_and_keep_the_header() -> None:
    encoded = gzip.compress(BODY)
    async with CannedUpstream(encoded, b"gzip") as base_url:
        async for response in fetch(base_url):
            assert response.header(b"content-encoding") == b"gzip"
            assert b"".join([chunk async for chunk in raw_chunks(response)]) == encoded


@pytest.mark.parametrize(("encoding", "body"), [(b"br", b"\x0b\x02\x80"), (b"gzip", b"not gzip")])
async def test_a_body_that_cannot_be_decoded_is_an_invalid_response(
    encoding: bytes, body: bytes
) -> None:
    async with CannedUpstream(body, encoding) as base_url:
        async for response in fetch(base_url):
            with pytest.raises(UpstreamResponseInvalid):
                await read_decoded(response)


def test_connect_retries_start_at_once_then_back_off_to_a_cap() -> None:
    assert [connect_retry_delay(n) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0]
