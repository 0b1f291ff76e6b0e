"""Prometheus metrics of one app instance, in a registry of its own (so several apps can
live in one process, as in tests). Served at ``/metrics`` in the text exposition format.

Latencies are in seconds, as Prometheus conventions require.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1)
_TOKEN_BUCKETS = (0, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
_TOOL_COUNT_BUCKETS = (0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 4096)

#: Route labels (bounded cardinality): known paths by name, the rest by family.
_ROUTES = {
    "/v1/chat/completions": "chat_completions",
    "/v1/responses": "responses",
    "/v1/responses/input_tokens": "responses_input_tokens",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages_count_tokens",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
    "/v1/models": "models",
    "/healthz": "healthz",
    "/readyz": "readyz",
    "/metrics": "metrics",
}


def route_label(path: str) -> str:
    """Bounded route label for a request path."""
    if path in _ROUTES:
        return _ROUTES[path]
    return "v1_other" if path.startswith("/v1/") else "other"


class Metrics:
    """Every metric the proxy exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            "toolprune_http_requests_total", "Requests answered, by route and status.",
            ["route", "status"], registry=r,
        )
        self.http_latency = Histogram(
            "toolprune_http_request_seconds", "Time to answer a request, to the last byte.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.in_flight = Gauge(
            "toolprune_http_in_flight_requests", "Requests being answered.", registry=r
        )
        self.upstream_latency = Histogram(
            "toolprune_upstream_seconds", "Time until the upstream answered with headers, per "
            "upstream request (near zero for streams: see the first- and last-byte histograms; "
            "kept under its name for existing dashboards).",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.upstream_first_byte = Histogram(
            "toolprune_upstream_first_byte_seconds", "Time from sending an upstream request to "
            "the first byte of its answer's body (TTFT of a stream), per upstream round.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.upstream_last_byte = Histogram(
            "toolprune_upstream_last_byte_seconds", "Time from sending an upstream request to "
            "the last byte of its answer's body the proxy read, per upstream round.",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.suspicious_stops = Counter(
            "toolprune_upstream_suspicious_stops_total", "Streamed answers to requests with "
            "tools that ended `stop` with no content and no call (a server that drops streamed "
            "tool calls; see `upstream_stream`), by API.", ["api"], registry=r,
        )
        self.decisions = Counter(
            "toolprune_requests_total",
            "Acting-API requests by pruning decision, pruned path (native, text, both, none) "
            "and API (chat_completions, responses, messages).", ["decision", "path", "api"],
            registry=r,
        )
        self.tools_offered = Histogram(
            "toolprune_tools_offered", "Tools the client sent per acting request.",
            buckets=_TOOL_COUNT_BUCKETS, registry=r,
        )
        self.tools_forwarded = Histogram(
            "toolprune_tools_forwarded", "Client tools forwarded per acting request.",
            buckets=_TOOL_COUNT_BUCKETS, registry=r,
        )
        self.meta_calls = Counter(
            "toolprune_meta_calls_total", "Meta-tool calls handled by the proxy.", ["tool"],
            registry=r,
        )
        self.bridge_repairs = Counter(
            "toolprune_bridge_repairs_total",
            "Bridge (call_tool) calls taken after a repair, by what was repaired "
            "(docs/sessions.md lists the kinds).", ["kind"], registry=r,
        )
        self.bridge_refusals = Counter(
            "toolprune_bridge_refusals_total",
            "Bridge (call_tool) calls refused and answered in a hidden round, by why.",
            ["kind"], registry=r,
        )
        self.upstream_prefill_speed = Gauge(
            "toolprune_upstream_prefill_tokens_per_second",
            "The model server's prompt evaluation speed, learned from its answers "
            "(timings, or their own timing), of the model that answered last.", registry=r,
        )
        self.upstream_decode_speed = Gauge(
            "toolprune_upstream_decode_tokens_per_second",
            "The model server's generation speed, learned from its answers, of the model "
            "that answered last.", registry=r,
        )
        self.upstream_search_call_tokens = Gauge(
            "toolprune_upstream_search_call_tokens",
            "Tokens the model wrote in a round that only searched or loaded tools (mean of "
            "its last 32 such rounds), of the model that answered last.", registry=r,
        )
        self.meta_rounds = Histogram(
            "toolprune_meta_rounds", "Upstream re-issues per client request after meta-calls.",
            buckets=(0, 1, 2, 3, 4, 6, 8), registry=r,
        )
        self.selection_seconds = Histogram(
            "toolprune_selection_seconds", "Selection time, embedding included.",
            buckets=_FAST_BUCKETS, registry=r,
        )
        self.embedding_seconds = Histogram(
            "toolprune_embedding_seconds", "Embedding time per request (query and new tools).",
            buckets=_FAST_BUCKETS, registry=r,
        )
        self.ttft = Histogram(
            "toolprune_time_to_first_token_seconds",
            "From request arrival to the first content or tool-call delta sent to the client.",
            ["decision"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.fallbacks = Counter(
            "toolprune_fallbacks_total", "Requests forwarded with the full catalogue after a "
            "failure, by reason.", ["reason"], registry=r,
        )
        self.late_errors = Counter(
            "toolprune_late_errors_total", "Selection failures after a request was planned "
            "(saving a meta-tool's loads, a tool search), by reason; the request stays pruned.",
            ["reason"], registry=r,
        )
        self.schema_bytes_saved = Counter(
            "toolprune_tool_schema_bytes_saved_total",
            "JSON bytes of tool definitions not sent upstream (estimate of prefill saved).",
            registry=r,
        )
        self.expected_reused_tokens = Histogram(
            "toolprune_expected_cached_prompt_tokens",
            "Prompt tokens per acting request the proxy expects the upstream to reuse from its "
            "prefix (KV) cache (estimated).", buckets=_TOKEN_BUCKETS, registry=r,
        )
        self.expected_evaluated_tokens = Histogram(
            "toolprune_expected_evaluated_prompt_tokens",
            "Prompt tokens per acting request the proxy expects the upstream to evaluate "
            "(prefill; estimated).", buckets=_TOKEN_BUCKETS, registry=r,
        )
        self.cache_breaks = Counter(
            "toolprune_cache_breaks_total",
            "Acting requests whose forwarded tools changed after the conversation started, so "
            "the upstream evaluates its history again: `appended` (tools admitted at the "
            "block's end), `evicted` (a tool also left the block: at a cap), `rewritten` (the "
            "client rewrote its history, which breaks the cached prefix whatever is forwarded, "
            "so the block was chosen afresh where tools are delivered in the conversation).",
            ["reason"], registry=r,
        )
        self.state_errors = Counter(
            "toolprune_state_store_errors_total", "Conversation state store failures.",
            ["operation"], registry=r,
        )


class QueryEmbeddingCounts(Protocol):
    """Running counts of query embedding (:class:`selection.indexes.query_embedding.QueryEmbeddingStats`)."""

    cached: int
    embedded: int
    batches: int
    requests: int


class QueryEmbeddingCollector(Collector):
    """Exports the engine's :class:`QueryEmbeddingCounts` (read at scrape
    time): query texts by source (``cache`` or ``embedder``), and the embedder calls and
    requests of the query batcher (requests / calls = mean coalescing)."""

    def __init__(self, stats: QueryEmbeddingCounts) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily]:
        texts = CounterMetricFamily(
            "toolprune_query_texts", "Query texts embedded or answered from the query cache.",
            labels=["source"],
        )
        texts.add_metric(["cache"], self._stats.cached)
        texts.add_metric(["embedder"], self._stats.embedded)
        yield texts
        yield CounterMetricFamily(
            "toolprune_query_batches", "Embedder calls made for queries (each a batch of "
            "concurrent requests' query texts).", value=self._stats.batches,
        )
        yield CounterMetricFamily(
            "toolprune_query_batched_requests", "Requests whose query texts went to the "
            "embedder, summed over batches.", value=self._stats.requests,
        )
