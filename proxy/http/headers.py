"""Header rules for forwarding: hop-by-hop removal, the proxy's own headers, request ids.

Headers are ASGI-style lists of ``(name, value)`` byte pairs with lower-case names.
Hop-by-hop headers follow RFC 9110 §7.6.1: the fixed set below plus every name listed in
``Connection``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

from config.settings import request_top_k
from proxy.http.errors import InvalidHeader

Headers = list[tuple[bytes, bytes]]

HOP_BY_HOP: frozenset[bytes] = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)

#: Headers addressed to the proxy; never forwarded upstream.
PROXY_REQUEST_HEADERS: frozenset[bytes] = frozenset(
    {b"x-tool-pruning", b"x-tool-pruning-top-k", b"x-conversation-id"}
)

REQUEST_ID = b"x-request-id"
TOOLS_HEADER = "x-tool-pruning-tools"
SENSITIVE: frozenset[str] = frozenset(
    {"authorization", "api-key", "x-api-key", "cookie", "set-cookie", "proxy-authorization"}
)


def _connection_listed(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    listed: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            listed.update(token.strip().lower() for token in value.split(b",") if token.strip())
    return listed


def end_to_end(headers: Iterable[tuple[bytes, bytes]], *, drop: Iterable[bytes] = ()) -> Headers:
    """Remove hop-by-hop headers, those named in ``Connection`` and the names in ``drop``."""
    headers = list(headers)
    removed = HOP_BY_HOP | _connection_listed(headers) | set(drop)
    return [(name, value) for name, value in headers if name not in removed]


def upstream_request_headers(client_headers: Headers, request_id: bytes) -> Headers:
    """Headers to send upstream: end-to-end ones, without ``Host`` (the upstream's is
    set), ``Content-Length`` (set from the bytes actually sent), ``Expect`` (the proxy has
    the whole body already: RFC 9110 §10.1.1's 100-continue is between the client and the
    proxy) and the proxy's own headers; ``X-Request-Id`` always present."""
    drop = PROXY_REQUEST_HEADERS | {b"host", b"content-length", b"expect", REQUEST_ID}
    return [*end_to_end(client_headers, drop=drop), (REQUEST_ID, request_id)]


def request_id(client_headers: Headers) -> bytes:
    """The client's ``X-Request-Id``, or a new uuid4 (hex) when it sent none."""
    for name, value in client_headers:
        if name == REQUEST_ID and value:
            return value
    return uuid.uuid4().hex.encode()


def header(headers: Headers, name: bytes) -> bytes | None:
    """First value of ``name`` (lower-case) in ``headers``, or ``None``."""
    for key, value in headers:
        if key == name:
            return value
    return None


def control_header(headers: Headers, name: bytes, label: str) -> bytes | None:
    """The one value of the proxy's control header ``name`` (lower-case; ``label``: as
    written in errors), or ``None``. Raises InvalidHeader when it is sent more than once
    with different values: a singleton field (RFC 9110 §5.3) the proxy must not guess."""
    values = {value for key, value in headers if key == name}
    if len(values) > 1:
        raise InvalidHeader(f"{label} was sent more than once with different values")
    return next(iter(values), None)


PRUNING_MODES = ("on", "off", "dry-run")


def pruning_mode(headers: Headers) -> str:
    """``X-Tool-Pruning`` (case-insensitive; absent = ``on``). Raises InvalidHeader (also
    when sent twice with different values)."""
    raw = control_header(headers, b"x-tool-pruning", "X-Tool-Pruning")
    value = (raw or b"on").decode("latin-1").strip().lower()
    if value not in PRUNING_MODES:
        raise InvalidHeader("X-Tool-Pruning must be one of: on, off, dry-run")
    return value


def top_k_override(headers: Headers) -> int | None:
    """``X-Tool-Pruning-Top-K`` (absent = None). Raises InvalidHeader (also when sent twice
    with different values)."""
    value = control_header(headers, b"x-tool-pruning-top-k", "X-Tool-Pruning-Top-K")
    if value is None:
        return None
    try:
        return request_top_k(value.decode("latin-1"))
    except ValueError as exc:
        raise InvalidHeader(f"X-Tool-Pruning-Top-K {exc}") from None


#: Request headers that carry the client's credential, in the order they are looked for.
CREDENTIAL_HEADERS = (b"authorization", b"api-key", b"x-api-key")


def check_conversation_id(headers: Headers, max_bytes: int) -> None:
    """Raises InvalidHeader when ``X-Conversation-Id`` is longer than ``max_bytes`` or sent
    twice with different values."""
    value = control_header(headers, b"x-conversation-id", "X-Conversation-Id")
    if value is not None and len(value) > max_bytes:
        raise InvalidHeader(f"X-Conversation-Id must be at most {max_bytes} bytes")


def state_key(conversation: str, headers: Headers, *, shared: bool) -> str:
    """The key of a conversation's state: its id, scoped by a hash of the request's
    credential (first of ``CREDENTIAL_HEADERS`` present) unless ``shared``, so a client
    with another key can neither read nor plant loads in it. No credential: the id. A key
    this credential's scope made already (the conversation a Responses
    ``previous_response_id`` names) is kept as it is."""
    if shared:
        return conversation
    credential = next((v for name in CREDENTIAL_HEADERS if (v := header(headers, name))), None)
    if credential is None:
        return conversation
    scope = "c:" + hashlib.sha256(credential).hexdigest()[:24] + ":"
    return conversation if conversation.startswith(scope) else scope + conversation
