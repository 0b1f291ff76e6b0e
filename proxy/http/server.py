"""The HTTP server's connection guards: a deadline for request headers and a bound on open
connections, on top of uvicorn's ``httptools`` protocol.

uvicorn has no timeout for receiving a request (its keep-alive timer restarts on every byte
received), so a client that trickles a header line every few seconds holds a connection,
and its memory, forever; nor a bound on connections (``limit_concurrency`` answers 503 only
once a request's headers are complete). :class:`GuardedHttpProtocol` adds both:

* headers must be complete within ``header_timeout_s`` of the request's first byte (or of
  the connection's opening): past it the client gets ``408 Request Timeout`` (OpenAI-shaped
  JSON) and the connection is closed; the body has its own deadline in the app
  (:func:`proxy.http.asgi.read_body`);
* a connection beyond ``max_connections`` is answered ``503`` and closed at once;
* a connection closed while its request's body is still arriving (an early answer: 413,
  408, …) is closed lingering (RFC 9112 §9.6): the answer sent, the write side shut, what
  the client still sends read and discarded for :data:`LINGER_S` seconds or
  :data:`LINGER_BYTES` bytes, then the connection closed. An immediate close with
  unread bytes is a reset, which discards the answer before a client that writes its whole
  body first gets to read it.

It also tells the app whether a request's client has closed its connection before the
event loop has read the close (:meth:`GuardedHttpProtocol.client_gone`, in the scope under
:data:`CLIENT_GONE_SCOPE_KEY`): a close that arrives while the loop is busy planning is
read only once the request's task yields, which is after its upstream round was sent.

Protocol per RFC 9110 §15.5.9 (408) and §15.6.4 (503).
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from config.settings import Settings
from proxy.http.errors import ConnectionLimit, HeaderTimeout, ProxyError

#: How long a connection closed lingering stays open (read side only), s, and the most
#: bytes it reads and discards meanwhile.
LINGER_S = 1.0
LINGER_BYTES = 64 * 1024 * 1024
#: Scope key of the request's ``client_gone()`` (:meth:`GuardedHttpProtocol.client_gone`).
CLIENT_GONE_SCOPE_KEY = "toolprune.client_gone"


@dataclass(frozen=True)
class ConnectionLimits:
    """``header_timeout_s`` (seconds), ``max_connections`` (per process)."""

    header_timeout_s: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(settings.header_timeout_s, settings.max_connections)


def error_response(error: ProxyError) -> bytes:
    """A whole HTTP/1.1 response for ``error`` that closes the connection."""
    body = error.body()
    head = (
        f"HTTP/1.1 {error.status_code} {error.reason}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guards of the module docstring.

    ``limits`` is set by :func:`configure` in the process that serves; a worker process
    started by uvicorn (spawned, so it imports this module afresh) reads them from its
    environment (``TOOLPRUNE_*``) on its first connection.
    """

    limits: ConnectionLimits | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._rejected = False
        self._discarded = 0
        limits = self._limits()
        if len(self.connections) > limits.max_connections:
            self._reject(ConnectionLimit(
                f"the proxy holds {limits.max_connections} connections; try again later"
            ))
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._rejected:  # answered already; what the client still sends is dropped
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES:
                self.transport.close()
            return
        if self._header_deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # a new request begins on a kept-alive connection
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[CLIENT_GONE_SCOPE_KEY] = self.client_gone  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = _CycleTransport(self)  # type: ignore[assignment]

    def close_after_response(self) -> None:
        """Close the connection once a response was sent: lingering while the request's
        body is still arriving (see the module docstring), else at once."""
        if self.cycle is not None and self.cycle.more_body and not self.transport.is_closing():
            self._linger()
        else:
            self.transport.close()

    def client_gone(self) -> bool:
        """Whether the client has closed (or reset) its connection, also when the event
        loop has not read the close yet: the socket is peeked (``MSG_PEEK``), one
        non-blocking ``recv`` of a duplicate descriptor, nothing consumed. A half-close
        counts as gone, as uvicorn takes it (it ends the connection at end of file)."""
        if self.transport.is_closing():
            return True
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            with sock.dup() as probe:
                return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False  # nothing to read: the connection is open
        except OSError:
            return True  # reset

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _limits(self) -> ConnectionLimits:
        if GuardedHttpProtocol.limits is None:
            GuardedHttpProtocol.limits = ConnectionLimits.from_settings(Settings())
        return GuardedHttpProtocol.limits

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(
            self._limits().header_timeout_s, self._headers_late
        )

    def _disarm(self) -> None:
        deadline = getattr(self, "_header_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being served (its headers were complete)
        self._reject(HeaderTimeout(
            f"request headers not received within {self._limits().header_timeout_s} s"
        ))

    def _reject(self, error: ProxyError) -> None:
        """Answer ``error`` and close lingering, so that a request the client already sent
        does not turn the close into a reset that discards the answer."""
        if not self.transport.is_closing():
            self.transport.write(error_response(error))
        self._linger()

    def _linger(self) -> None:
        """Shut the write side, read and drop what still comes (:meth:`data_received`),
        close after :data:`LINGER_S` seconds or :data:`LINGER_BYTES` bytes (RFC 9112 §9.6)."""
        self._disarm()
        self._rejected = True
        if self.transport.is_closing():
            return
        self.transport.resume_reading()  # uvicorn pauses a body the app does not read
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)


class _CycleTransport:
    """The connection's transport as uvicorn's request cycle sees it: ``close`` goes
    through :meth:`GuardedHttpProtocol.close_after_response`, the rest to the transport."""

    def __init__(self, protocol: GuardedHttpProtocol) -> None:
        self._protocol = protocol

    def close(self) -> None:
        self._protocol.close_after_response()

    def __getattr__(self, name: str) -> object:
        return getattr(self._protocol.transport, name)


def configure(settings: Settings) -> type[GuardedHttpProtocol]:
    """Set the guards' limits for this process; returns the protocol class to give
    uvicorn (``uvicorn.Config(http=...)``)."""
    GuardedHttpProtocol.limits = ConnectionLimits.from_settings(settings)
    return GuardedHttpProtocol
