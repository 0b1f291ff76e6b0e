"""Every error the proxy itself answers with, in OpenAI's error shape.

Body shape, per OpenAI's API reference ("Error codes"):
``{"error": {"message": str, "type": str, "param": str | None, "code": str | None}}``.
Upstream errors are never wrapped: their status and body pass through unchanged.
"""

from __future__ import annotations

import json


class ProxyError(Exception):
    """An error answered by the proxy, not by the upstream.

    Attributes: ``status_code`` (HTTP status), ``error_type`` and ``code`` (OpenAI error
    fields), and the message given to the constructor.
    """

    status_code: int = 500
    error_type: str = "server_error"
    code: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> bytes:
        """The OpenAI-shaped JSON error body, UTF-8 bytes."""
        return error_body(self.message, self.error_type, self.code)


class UpstreamUnavailable(ProxyError):
    """The upstream could not be reached (connection refused, DNS, reset): HTTP 502."""

    status_code = 502
    error_type = "upstream_error"
    code = "upstream_unavailable"


class UpstreamTimeout(ProxyError):
    """The upstream did not connect or answer in time: HTTP 504."""

    status_code = 504
    error_type = "upstream_error"
    code = "upstream_timeout"


class UpstreamStreamBroken(ProxyError):
    """The upstream stream ended before its end (after the response had started)."""

    status_code = 502
    error_type = "upstream_error"
    code = "upstream_stream_broken"


class RequestTooLarge(ProxyError):
    """The request body exceeds ``max_request_bytes``: HTTP 413."""

    status_code = 413
    error_type = "invalid_request_error"
    code = "request_too_large"


class UpstreamResponseInvalid(ProxyError):
    """The upstream answered an intercepted request with a body the proxy cannot read."""

    status_code = 502
    error_type = "upstream_error"
    code = "upstream_invalid_response"


class InvalidHeader(ProxyError):
    """A toolprune request header has a value the proxy does not understand: HTTP 400."""

    status_code = 400
    error_type = "invalid_request_error"
    code = "invalid_toolprune_header"


class InternalError(ProxyError):
    """The proxy failed while serving a request (a defect): HTTP 500."""

    status_code = 500
    error_type = "server_error"
    code = "proxy_internal_error"


def error_body(message: str, error_type: str, code: str | None, param: str | None = None) -> bytes:
    """Serialise one OpenAI-style error object to JSON bytes."""
    payload = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return json.dumps(payload).encode()


def sse_error_event(error: ProxyError) -> bytes:
    """An SSE ``error`` event that ends a broken stream (never followed by ``[DONE]``).

    The ``openai`` SDKs raise ``APIError`` on an ``event: error`` whose data has ``error``.
    """
    return b"event: error\ndata: " + error.body() + b"\n\n"
