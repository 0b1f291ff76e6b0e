"""The server's and the upstream connection's settings (``TOOLPRUNE_*``, pydantic-settings):
the first group of :class:`config.settings.Settings`, which extends this class. Units are
in the field names; each field's description is its documentation
(``docs/reference/settings.md``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServerSettings(BaseSettings):
    """Where the upstream is, how the proxy listens, and the bounds on clients and on the
    upstream's answers."""

    model_config = SettingsConfigDict(env_prefix="TOOLPRUNE_", extra="ignore")

    # --- forwarding ---------------------------------------------------------------
    upstream_url: str = Field(
        "http://127.0.0.1:8080/v1",
        description="The upstream's OpenAI base URL (llama-server `http://HOST:8080/v1`, "
        "Lemonade `http://HOST:8000/api/v1`).",
    )
    upstream_kind: Literal[
        "auto", "llama-server", "lemonade", "vllm", "lmstudio", "ollama", "other"
    ] = Field(
        "auto",
        description="Which server the upstream is (docs/servers/). `auto`: learned from its "
        "own endpoints (shown by `/readyz`); a kind: only that kind's endpoints are asked; "
        "`other` (a gateway): none, the settings alone apply.",
    )
    upstream_api_key: SecretStr | None = Field(
        None,
        description="Bearer token of the proxy's own requests to the upstream (what it asks "
        "the server about itself, token counts), for a server behind an API key (vLLM "
        "`--api-key`, LEMONADE_API_KEY, LM Studio's tokens). Clients' requests carry their own.",
    )
    host: str = Field("127.0.0.1", description="Address `toolprune serve` binds.")
    port: int = Field(8088, ge=1, le=65535, description="Port `toolprune serve` listens on.")
    connect_timeout_s: float = Field(5.0, gt=0, description="Upstream connect timeout.")
    idle_timeout_s: float = Field(
        600.0,
        gt=0,
        description="Longest wait for the next upstream byte (response headers or the next "
        "stream chunk). No total timeout applies: prefill of a long prompt on a CPU can take "
        "minutes.",
    )
    sse_keepalive_s: float = Field(
        15.0,
        ge=0,
        description="A streaming client the proxy acts for gets an SSE comment (`: keep-alive`) "
        "whenever it has received nothing for this long: while the request is planned, during "
        "a hidden tool-loading round, and while the upstream prefills. Well under the 120 s "
        "some clients wait before they give up and resend (Qwen Code); 0: never. The "
        "upstream's own comments are relayed either way.",
    )
    connect_retries: int = Field(
        2, ge=0, description="Retries of a failed connect (never of a sent request)."
    )
    upstream_connections: int = Field(
        1024,
        ge=1,
        description="Most connections to the upstream open at once (a request waits up to "
        "`connect_timeout_s` for one past that).",
    )
    max_request_bytes: int = Field(
        32 * 1024 * 1024, gt=0, description="Largest request body accepted (413 above)."
    )
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="On shutdown, time in-flight requests and streams get to finish."
    )
    readiness_timeout_s: float = Field(
        2.0, gt=0, description="Timeout of the upstream probe behind `/readyz`."
    )
    max_header_count: int = Field(
        100, ge=1, description="Most request headers accepted (431 above, before forwarding)."
    )
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="Largest total size of request headers (431 above)."
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Request headers must be complete this long after the request's first byte "
        "(else 408 and the connection is closed).",
    )
    body_timeout_s: float = Field(
        20.0, gt=0, description="A request body must be complete this long after its headers, "
        "plus one second per 500 bytes received (else 408 and the connection is closed): "
        "Apache httpd's mod_reqtimeout rule and defaults (`body=20,MinRate=500`), so a body "
        "that trickles is refused within about this long and one sent steadily at 500 B/s or "
        "more is read whatever its size.",
    )
    max_connections: int = Field(
        1000, ge=1, description="Open client connections per process; one more is answered 503 "
        "and closed.",
    )
    max_conversation_id_bytes: int = Field(
        256, ge=1, description="Longest `X-Conversation-Id` accepted (400 above)."
    )
    catalog_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Raw bytes of decoded `tools` arrays kept, keyed by their sha256, so a "
        "catalogue seen before is not decoded nor parsed again (LRU).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level of the proxy's JSON log lines."
    )

    @field_validator("upstream_url")
    @classmethod
    def _strip_trailing_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("upstream_url must start with http:// or https://")
        return value.rstrip("/")
