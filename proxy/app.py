"""The ASGI application factory (Starlette).

``create_app(settings)`` builds the app and does no work; the lifespan creates the shared
upstream client. The proxy's own routes are ``/healthz``, ``/readyz`` and ``/metrics``;
every other method and path is handled by :class:`ProxyEndpoint`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from config.policy import load_policy
from config.selector import build_embedder, build_selector
from config.settings import Settings
from proxy.apis.chat.adapter import ChatApi
from proxy.apis.messages.adapter import MessagesApi
from proxy.apis.responses.adapter import ResponsesApi
from proxy.components import build_state_store, limit_blas_threads, load_embedder, warm_catalogs
from proxy.http.asgi import (
    BODY_MIN_RATE,
    ClientDisconnected,
    TrackedSend,
    check_headers,
    read_body,
    run_until_disconnect,
    send_error,
)
from proxy.http.errors import (
    ERROR_SHAPE,
    BodyTimeout,
    InternalError,
    InvalidPath,
    RequestHeadersTooLarge,
    RequestTooLarge,
    ShuttingDown,
)
from proxy.http.forwarding import ClientRequest, Forwarder
from proxy.http.middleware import REQUEST_ID_SCOPE_KEY, ObservabilityMiddleware
from proxy.http.request_log import RequestLog
from proxy.http.server import CLIENT_GONE_SCOPE_KEY, configure
from proxy.http.upstream import Upstream, create_session, is_normalised
from proxy.log import configure_logging, get_logger
from proxy.metrics import Metrics, QueryEmbeddingCollector, route_label
from proxy.servers.probe import ServerProbe
from proxy.state.speeds import SharedSpeeds
from proxy.turn.decision_log import late_error_reporter
from proxy.turn.handler import TurnHandler
from proxy.turn.planner import Planner
from proxy.usage.learning_schedule import start_learning
from proxy.usage.learning_share import SharedStates
from proxy.usage.writer import UsageLog
from selection.types import CatalogCache, Embedder

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
#: How long the closing error of a request cut by shutdown may take to send, seconds.
SHUTDOWN_NOTICE_TIMEOUT_S = 1.0
logger = get_logger("app")


@dataclass
class Services:
    """What request handling needs, built once per app in the lifespan."""

    settings: Settings
    metrics: Metrics
    upstream: Upstream
    forwarder: Forwarder
    embedder: Embedder
    #: The acting handlers, by path (``/v1/chat/completions``, ``/v1/responses``,
    #: ``/v1/messages``): one turn core, one adapter each.
    apis: dict[str, TurnHandler]
    #: What the upstream is (``/readyz`` shows it).
    server: ServerProbe
    #: Tasks serving proxied requests: at shutdown, those the server cancelled get a
    #: moment to tell their clients before the process exits.
    in_flight: set[asyncio.Task[Any] | None] = field(default_factory=set)


async def serve_guarded(
    handler: Callable[[ClientRequest, Send], Awaitable[None]], request: ClientRequest, send: Send
) -> None:
    """Run ``handler``; a defect in it becomes an OpenAI-shaped 500 (or, once an event
    stream has started, an SSE error event that ends it) and one JSON log line, instead of
    a dropped connection."""
    tracked = send if isinstance(send, TrackedSend) else TrackedSend(send)
    try:
        await handler(request, tracked)
    except Exception:
        logger.exception(
            "internal_error", extra={"fields": {"request_id": request.request_id.decode("latin-1")}}
        )
        await tracked.end_with(InternalError("the proxy failed to serve this request"))


class ProxyEndpoint:
    """ASGI endpoint for every path that is not the proxy's own: checks the headers,
    reads the body (bounded in size and time), forwards it, and cancels the upstream
    request when the client disconnects.

    When the server cancels the request (shutdown past ``shutdown_grace_s``), the client
    gets an OpenAI-shaped 503, or an SSE error event on a stream already started, instead
    of a cut connection."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        if scope["path"] == MESSAGES_PATH or scope["path"].startswith(MESSAGES_PATH + "/"):
            ERROR_SHAPE.set("anthropic")
        tracked = TrackedSend(send)
        log = RequestLog()
        try:
            await self._serve(services, scope, receive, tracked, log)
        finally:
            log.emit(request_id=scope[REQUEST_ID_SCOPE_KEY], method=scope["method"],
                     route=route_label(scope["path"]), status=tracked.status,
                     complete=tracked.complete)

    async def _serve(
        self, services: Services, scope: Scope, receive: Receive, tracked: TrackedSend,
        log: RequestLog,
    ) -> None:
        settings = services.settings
        headers = scope["headers"]
        try:
            check_headers(headers, settings.max_header_count, settings.max_header_bytes)
            raw_path = scope.get("raw_path") or scope["path"].encode()
            if not is_normalised(raw_path):
                raise InvalidPath("the request path is not a normalised absolute path")
            body = await read_body(
                receive, headers, settings.max_request_bytes, settings.body_timeout_s,
                BODY_MIN_RATE,
            )
        except (RequestHeadersTooLarge, RequestTooLarge, BodyTimeout, InvalidPath) as error:
            await send_error(tracked, error, close=isinstance(error, BodyTimeout | RequestTooLarge))
            return
        except ClientDisconnected:
            return
        request = ClientRequest(
            method=scope["method"],
            path=scope["path"],
            raw_path=raw_path,
            query_string=scope.get("query_string", b""),
            headers=headers,
            body=body,
            request_id=scope[REQUEST_ID_SCOPE_KEY],
            log=log,
            client_gone=scope.get(CLIENT_GONE_SCOPE_KEY),
        )
        if request.method == "POST" and request.path in services.apis:
            handler = services.apis[request.path].handle
        else:
            handler = services.forwarder.forward
        task = asyncio.current_task()
        services.in_flight.add(task)
        try:
            await run_until_disconnect(receive, lambda: serve_guarded(handler, request, tracked))
        except asyncio.CancelledError:
            await self._cut_by_shutdown(request, tracked)
        finally:
            services.in_flight.discard(task)

    @staticmethod
    async def _cut_by_shutdown(request: ClientRequest, tracked: TrackedSend) -> None:
        """The server cancelled this request (a client disconnect never gets here: it
        cancels only the handler's scope). Say so to the client, then let the task end."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        logger.warning(
            "request_cut_by_shutdown",
            extra={"fields": {"request_id": request.request_id.decode("latin-1")}},
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_NOTICE_TIMEOUT_S):
            await tracked.end_with(ShuttingDown("the proxy is shutting down"))


def create_app_from_env() -> Starlette:
    """The app with settings from the ``TOOLPRUNE_*`` environment: the factory uvicorn
    imports in each worker process of ``toolprune serve --workers N``."""
    settings = Settings()
    configure(settings)
    return create_app(settings)


def create_app(settings: Settings) -> Starlette:
    """Build the proxy app (the upstream session is created in its lifespan).

    Raises: PolicyError when the policy file is invalid.
    """
    metrics = Metrics()
    policy = load_policy(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        configure_logging(settings.log_level)
        limit_blas_threads()
        session = create_session(settings)
        upstream = Upstream(settings, session)
        forwarder = Forwarder(upstream, metrics)
        selector = build_selector(settings, build_embedder(settings), policy=policy)
        embedder = selector.embedder
        query_metrics = QueryEmbeddingCollector(selector.query_stats)
        metrics.registry.register(query_metrics)
        store = build_state_store(settings)
        learning = settings.learn and settings.usage_db is not None
        usage = (
            UsageLog(
                settings.usage_db,
                store_text=settings.usage_store_text,
                retention_days=settings.usage_retention_days,
                log_interval_s=settings.fallback_log_interval_s,
                embedder=embedder.id if learning else None,
            )
            if settings.usage_db is not None
            else None
        )
        learner: list[asyncio.Task[None]] = []
        shared = None
        if learning:
            assert settings.usage_db is not None
            if settings.state_url:
                shared = SharedStates(
                    settings.state_url, embedder=embedder.id,
                    key_prefix=settings.state_key_prefix, timeout_s=settings.redis_timeout_s,
                )
            learner = start_learning(
                settings.usage_db, settings.learn_interval_s, selector,
                shared=shared, refresh_s=settings.learn_refresh_s,
            )
        speed_share = SharedSpeeds(
            settings.state_url, key_prefix=settings.state_key_prefix,
            timeout_s=settings.redis_timeout_s,
        ) if settings.state_url else None
        server = ServerProbe(settings, upstream, speed_share=speed_share)
        await server.identify()  # the upstream_server line (bounded wait)
        planner = Planner(
            settings=settings, selector=selector, store=store, metrics=metrics,
            on_late_error=late_error_reporter(metrics, settings.fallback_log_interval_s),
            upstream=server,
        )
        catalogs = CatalogCache(
            settings.catalog_cache_bytes, max_tool_bytes=settings.max_tool_definition_bytes
        )
        adapters = (
            (CHAT_COMPLETIONS_PATH, ChatApi(catalogs), server),
            (RESPONSES_PATH, ResponsesApi(), None),
            (MESSAGES_PATH, MessagesApi(), None),
        )
        apis = {
            path: TurnHandler(
                api=api, settings=settings, planner=planner, forwarder=forwarder,
                metrics=metrics, usage=usage, server=server, streaming=api_streaming,
            )
            for path, api, api_streaming in adapters
        }
        app.state.services = Services(settings, metrics, upstream, forwarder, embedder, apis, server)
        loading = asyncio.create_task(load_embedder(embedder))
        warming = asyncio.create_task(warm_catalogs(settings.warm_files, selector))
        app.state.warming = warming
        try:
            yield
        finally:
            # uvicorn cancels requests still running past the grace period, then shuts the
            # app down and exits at once: let the cancelled ones send their closing error.
            cut = {task for task in app.state.services.in_flight if task is not None}
            if cut:
                await asyncio.wait(cut, timeout=SHUTDOWN_NOTICE_TIMEOUT_S)
            loading.cancel()
            warming.cancel()
            for task in learner:
                task.cancel()
            if shared is not None:
                await shared.aclose()
            if usage is not None:  # writes what is queued (bounded wait)
                await asyncio.to_thread(usage.close)
            await server.aclose()
            if speed_share is not None:
                await speed_share.aclose()
            await selector.aclose()
            metrics.registry.unregister(query_metrics)
            await store.aclose()
            await session.close()

    async def healthz(request: Request) -> JSONResponse:
        """Liveness: the process answers."""
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        """Readiness: the upstream answers ``GET {upstream_url}/models``, the embedder
        is loaded and the ``warm_files`` catalogues are indexed (when pruning is enabled).
        ``server``: what the upstream is and reports, with where each fact came from
        (:meth:`proxy.servers.probe.ServerProbe.shown`; asked again when due)."""
        services: Services = request.app.state.services
        reachable, _ = await asyncio.gather(  # both bounded by readiness_timeout_s
            services.upstream.probe(settings.readiness_timeout_s), services.server.facts())
        checks = {"upstream": reachable}
        if settings.enabled:
            checks["embedder"] = services.embedder.ready
            if settings.warm_files:
                checks["warm_catalogs"] = request.app.state.warming.done()
        ready = all(checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks,
             "server": services.server.shown()},
            status_code=200 if ready else 503,
        )

    async def metrics_endpoint(request: Request) -> Response:
        """Prometheus text exposition."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/{path:path}", ProxyEndpoint()),
        ],
        middleware=[Middleware(ObservabilityMiddleware, metrics=metrics)],
        lifespan=lifespan,
    )
