"""Every error the proxy itself answers with, in the shape of the API being served.

OpenAI's shape, per its API reference ("Error codes"):
``{"error": {"message": str, "type": str, "param": str | None, "code": str | None}}``;
on Anthropic's ``/v1/messages`` routes (:data:`ERROR_SHAPE` set to ``"anthropic"``),
Anthropic's, per its "Errors" reference: ``{"type": "error", "error": {"type", "message"}}``.
Upstream errors pass through unchanged, but for one: a context overflow, in whatever shape
the server wraps it (:mod:`proxy.servers.overflow`), reaches the client as its API's own
(:class:`ContextOverflow`).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from http import HTTPStatus

#: The error shape of the request being served: ``"openai"`` or ``"anthropic"``. Set
#: per request by the app from the path; every task the request starts inherits it.
ERROR_SHAPE: ContextVar[str] = ContextVar("toolprune_error_shape", default="openai")
#: Anthropic error types by HTTP status (other 4xx: ``invalid_request_error``, 5xx:
#: ``api_error``).
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
}


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
        """The JSON error body (UTF-8) in the shape :data:`ERROR_SHAPE` names."""
        if ERROR_SHAPE.get() == "anthropic":
            return anthropic_error_body(self.message, self.status_code)
        return error_body(self.message, self.error_type, self.code)

    @property
    def reason(self) -> str:
        """The status line's reason phrase (RFC 9110 §15)."""
        return HTTPStatus(self.status_code).phrase


class UpstreamError(ProxyError):
    """The upstream failed or answered what the proxy cannot use: HTTP 502 unless said."""

    status_code, error_type = 502, "upstream_error"


class UpstreamUnavailable(UpstreamError):
    """The upstream could not be reached (connection refused, DNS, reset): HTTP 502."""

    code = "upstream_unavailable"


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect or answer in time: HTTP 504."""

    status_code, code = 504, "upstream_timeout"


class UpstreamStreamBroken(UpstreamError):
    """The upstream stream ended before its end (after the response had started)."""

    code = "upstream_stream_broken"


class UpstreamResponseInvalid(UpstreamError):
    """The upstream answered an intercepted request with a body the proxy cannot read."""

    code = "upstream_invalid_response"


class InvalidRequest(ProxyError):
    """The client's request cannot be served as sent: HTTP 400 unless said."""

    status_code, error_type = 400, "invalid_request_error"


class RequestTooLarge(InvalidRequest):
    """The request body exceeds ``max_request_bytes``: HTTP 413."""

    status_code, code = 413, "request_too_large"


class RequestHeadersTooLarge(InvalidRequest):
    """More request headers, or more header bytes, than the proxy accepts: HTTP 431
    (RFC 6585 §5)."""

    status_code, code = 431, "request_headers_too_large"


class RequestTimeout(InvalidRequest):
    """The request did not arrive in time: HTTP 408."""

    status_code, code = 408, "request_timeout"


class HeaderTimeout(RequestTimeout):
    """The request's headers did not arrive within ``header_timeout_s``: HTTP 408."""


class BodyTimeout(RequestTimeout):
    """The request's body did not arrive within ``body_timeout_s``: HTTP 408."""


class RequestTooDeep(InvalidRequest):
    """The request body nests JSON deeper than the proxy's decoder, selection or encoder
    follow (Python's recursion limit: about 900 levels; real requests nest a few dozen):
    HTTP 400. Never forwarded, since the proxy cannot read what it would forward."""

    code = "request_too_deeply_nested"


class InvalidPath(InvalidRequest):
    """The request path is not a normalised absolute path (``.`` or ``..`` segments,
    empty segments such as ``//``, backslashes, percent-encoded or not): HTTP 400."""

    code = "invalid_path"


class InvalidHeader(InvalidRequest):
    """A toolprune request header has a value the proxy does not understand: HTTP 400."""

    code = "invalid_toolprune_header"


class ContextOverflow(InvalidRequest):
    """The upstream refused the request as longer than the model's context: HTTP 400 in
    the client's API's own words, the counts the server gave kept. OpenAI's (its
    ``context_length_exceeded`` error: "This model's maximum context length is M tokens.
    However, your messages resulted in N tokens…", ``param`` ``messages``), with
    llama-server's ``n_prompt_tokens`` and ``n_ctx`` beside; Anthropic's on Messages
    ("prompt is too long: N tokens > M maximum", what Claude Code compacts on). The
    server's own message follows, with its kind."""

    code = "context_length_exceeded"

    def __init__(self, server_message: str, prompt_tokens: int | None,
                 context_tokens: int | None, server: str) -> None:
        where = f"(upstream {server}: {server_message})"
        if prompt_tokens is not None and context_tokens is not None:
            openai = (f"This model's maximum context length is {context_tokens} tokens. However, "
                      f"your messages resulted in {prompt_tokens} tokens. Please reduce the "
                      f"length of the messages. {where}")
            anthropic = f"prompt is too long: {prompt_tokens} tokens > {context_tokens} maximum {where}"
        else:
            openai = f"The request exceeds the model's maximum context length {where}"
            anthropic = f"prompt is too long {where}"
        super().__init__(openai)
        self.anthropic_message = anthropic
        self.prompt_tokens, self.context_tokens = prompt_tokens, context_tokens

    def body(self) -> bytes:
        if ERROR_SHAPE.get() == "anthropic":
            return anthropic_error_body(self.anthropic_message, self.status_code)
        counts = {"n_prompt_tokens": self.prompt_tokens, "n_ctx": self.context_tokens}
        error = {"message": self.message, "type": self.error_type, "param": "messages",
                 "code": self.code, **{k: v for k, v in counts.items() if v is not None}}
        return json.dumps({"error": error}).encode()


class ConnectionLimit(ProxyError):
    """The process already holds ``max_connections`` connections: HTTP 503."""

    status_code, code = 503, "too_many_connections"


class ShuttingDown(ProxyError):
    """The proxy stopped before this request was served (shutdown grace period over):
    HTTP 503, or an SSE error event on a stream already started."""

    status_code, code = 503, "proxy_shutting_down"


class InternalError(ProxyError):
    """The proxy failed while serving a request (a defect): HTTP 500."""

    code = "proxy_internal_error"


def error_body(message: str, error_type: str, code: str | None, param: str | None = None) -> bytes:
    """Serialise one OpenAI-style error object to JSON bytes."""
    payload = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return json.dumps(payload).encode()


def anthropic_error_body(message: str, status: int) -> bytes:
    """Serialise one Anthropic-style error object to JSON bytes."""
    default = "invalid_request_error" if status < 500 else "api_error"
    kind = ANTHROPIC_ERROR_TYPES.get(status, default)
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def sse_error_event(error: ProxyError) -> bytes:
    """An SSE ``error`` event that ends a broken stream (never followed by ``[DONE]``).

    The ``openai`` SDKs raise ``APIError`` on an ``event: error`` whose data has
    ``error``; the ``anthropic`` SDKs raise on any ``event: error``.
    """
    return b"event: error\ndata: " + error.body() + b"\n\n"
