"""The FastAPI application factory.

``create_app(settings)`` builds the app and does no work; the lifespan creates the shared
upstream client. The proxy's own routes are ``/healthz``, ``/readyz`` and ``/metrics``;
every other method and path is handled by :class:`ProxyEndpoint`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import Message, Receive, Scope, Send

from config.policy import load_policy
from config.settings import Settings
from proxy.apis.handler import ApiHandler
from proxy.apis.messages import MessagesAdapter
from proxy.apis.responses import ResponsesAdapter
from proxy.chat.handler import ChatHandler
from proxy.components import build_engine, build_state_store, load_embedder
from proxy.http.asgi import (
    ClientDisconnected,
    read_body,
    run_until_disconnect,
    send_body,
    send_error,
)
from proxy.http.errors import ERROR_SHAPE, InternalError, RequestTooLarge, sse_error_event
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.headers import header
from proxy.http.middleware import REQUEST_ID_SCOPE_KEY, ObservabilityMiddleware
from proxy.http.upstream import Upstream, create_client
from proxy.log import configure_logging, get_logger
from proxy.metrics import Metrics
from proxy.usage.writer import UsageLog
from selection.embedders import Embedder

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
logger = get_logger("app")


@dataclass
class Services:
    """What request handling needs, built once per app in the lifespan."""

    settings: Settings
    metrics: Metrics
    upstream: Upstream
    forwarder: Forwarder
    embedder: Embedder
    chat: ChatHandler
    #: Acting handlers of the other APIs, by path (``/v1/responses``, ``/v1/messages``).
    apis: dict[str, ApiHandler]


async def serve_guarded(
    handler: Callable[[ClientRequest, Send], Awaitable[None]], request: ClientRequest, send: Send
) -> None:
    """Run ``handler``; a defect in it becomes an OpenAI-shaped 500 (or, once an event
    stream has started, an SSE error event that ends it) and one JSON log line, instead of
    a dropped connection."""
    started: dict[str, bytes | None] = {}

    async def tracking_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            started["content-type"] = header(message.get("headers", []), b"content-type")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            started["complete"] = b""
        await send(message)

    try:
        await handler(request, tracking_send)
    except Exception:
        logger.exception(
            "internal_error", extra={"fields": {"request_id": request.request_id.decode("latin-1")}}
        )
        error = InternalError("the proxy failed to serve this request")
        if not started:
            await send_error(send, error)
        elif "complete" not in started and (started["content-type"] or b"").startswith(
            b"text/event-stream"
        ):
            await send_body(send, sse_error_event(error), more=False)


class ProxyEndpoint:
    """ASGI endpoint for every path that is not the proxy's own: reads the body (bounded),
    forwards it, and cancels the upstream request when the client disconnects."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        headers = scope["headers"]
        if scope["path"] == MESSAGES_PATH or scope["path"].startswith(MESSAGES_PATH + "/"):
            ERROR_SHAPE.set("anthropic")
        try:
            body = await read_body(receive, headers, services.settings.max_request_bytes)
        except RequestTooLarge as error:
            await send_error(send, error)
            return
        except ClientDisconnected:
            return
        request = ClientRequest(
            method=scope["method"],
            path=scope["path"],
            raw_path=scope.get("raw_path") or scope["path"].encode(),
            query_string=scope.get("query_string", b""),
            headers=headers,
            body=body,
            request_id=scope[REQUEST_ID_SCOPE_KEY],
        )
        if request.method == "POST" and request.path == CHAT_COMPLETIONS_PATH:
            handler = services.chat.handle
        elif request.method == "POST" and request.path in services.apis:
            handler = services.apis[request.path].handle
        else:
            handler = services.forwarder.forward
        await run_until_disconnect(receive, lambda: serve_guarded(handler, request, send))


def create_app(settings: Settings, client: httpx.AsyncClient | None = None) -> FastAPI:
    """Build the proxy app.

    ``client``: an upstream ``httpx.AsyncClient`` to use instead of creating one in the
    lifespan (the caller then owns and closes it).

    Raises: PolicyError when the policy file is invalid.
    """
    metrics = Metrics()
    policy = load_policy(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level)
        upstream_client = client or create_client(settings)
        upstream = Upstream(settings, upstream_client)
        forwarder = Forwarder(upstream, metrics)
        engine = build_engine(settings, upstream_client)
        embedder = engine.embedder
        store = build_state_store(settings)
        usage = (
            UsageLog(
                settings.usage_db,
                store_text=settings.usage_store_text,
                retention_days=settings.usage_retention_days,
                log_interval_s=settings.fallback_log_interval_s,
            )
            if settings.usage_db is not None
            else None
        )
        chat = ChatHandler(
            settings=settings,
            policy=policy,
            engine=engine,
            store=store,
            forwarder=forwarder,
            metrics=metrics,
            usage=usage,
        )
        apis = {
            path: ApiHandler(
                adapter=adapter, settings=settings, planner=chat.planner,
                forwarder=forwarder, metrics=metrics, usage=usage,
            )
            for path, adapter in (
                (RESPONSES_PATH, ResponsesAdapter()), (MESSAGES_PATH, MessagesAdapter())
            )
        }
        app.state.services = Services(settings, metrics, upstream, forwarder, embedder, chat, apis)
        loading = asyncio.create_task(load_embedder(embedder))
        try:
            yield
        finally:
            loading.cancel()
            if usage is not None:  # writes what is queued (bounded wait)
                await asyncio.to_thread(usage.close)
            await engine.aclose()
            await store.aclose()
            if client is None:
                await upstream_client.aclose()

    app = FastAPI(
        title="toolprune",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """Readiness: the upstream answers ``GET {upstream_url}/models`` and the embedder
        is loaded (when pruning is enabled)."""
        services: Services = app.state.services
        checks = {"upstream": await services.upstream.probe(settings.readiness_timeout_s)}
        if settings.enabled:
            checks["embedder"] = services.embedder.ready
        ready = all(checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks},
            status_code=200 if ready else 503,
        )

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        """Prometheus text exposition."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.router.add_route("/{path:path}", ProxyEndpoint(), include_in_schema=False)
    app.add_middleware(ObservabilityMiddleware, metrics=metrics)
    return app
