"""Prometheus metrics of one process (served on /metrics). One registry per app, so tests and
several apps in one process do not collide in the global registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.events_queued = Counter(
            "tacit_events_queued",
            "Chat events stored in the durable queue (then acknowledged to the platform)",
            ["platform"],
            registry=self.registry,
        )
        self.ack_seconds = Histogram(
            "tacit_ack_seconds",
            "Time from receiving an event to acknowledging it (queued durably)",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.handled = Counter(
            "tacit_messages_handled",
            "Messages the assistant finished, by how they ended",
            ["outcome"],
            registry=self.registry,
        )
        self.handle_seconds = Histogram(
            "tacit_handle_seconds",
            "Time to handle one message, delivery included",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.worker_failures = Counter(
            "tacit_worker_failures",
            "Queue entries whose handling failed (left pending to be retried)",
            registry=self.registry,
        )
        self.dead_letters = Counter(
            "tacit_dead_letters",
            "Queue entries given up on after too many deliveries",
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "tacit_answers_in_flight", "Messages being handled now", registry=self.registry
        )
        self.asks = Counter(
            "tacit_http_asks",
            "POST /v1/ask requests, by outcome: answer, refusal, duplicate (a repeated "
            "Idempotency-Key), error, or disconnected (the client left before the end)",
            ["outcome"],
            registry=self.registry,
        )
