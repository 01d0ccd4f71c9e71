"""What the decision log holds and how it is read, whatever stores it: the console's filter,
a page of decisions, the day counters' answer-time histogram. The store is core.ports.DecisionLog
(adapters/state/redis_decision_log.py keeps it in Redis)."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.decision import is_deferred

# Upper bounds (ms) of the answer-time histogram buckets; p50/p95 are read from these.
LATENCY_BUCKETS_MS = (
    *(25, 50, 100, 200, 300, 500, 750),
    *(1000, 1500, 2000, 3000, 5000, 7500, 10_000, 15_000, 20_000, 30_000, 60_000, 120_000),
)

# DecisionFilter.judged_by's one value: left by the gate's word rule to the answering model.
JUDGED_BY_MODEL = "model"


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """What the console filters the log by; empty fields do not filter."""

    channel: str = ""  # platform:workspace:channel
    kb: str = ""
    outcome: str = ""
    stage: str = ""
    feedback: str = ""  # "up" or "down"
    # "model": the decisions the gate's word rule did not cover and left to the answering
    # model (core.decision.is_deferred). A log indexes this as it records: decisions
    # recorded before it did are not found by it (no guess is made for them).
    judged_by: str = ""
    since: float | None = None  # epoch seconds
    until: float | None = None


@dataclass(frozen=True, slots=True)
class DecisionPage:
    decisions: list[dict[str, Any]]
    next_cursor: str  # pass as `before` for the next (older) page; "" when there is none
    scanned: int


def left_to_model(decision: Mapping[str, Any]) -> bool:
    """Whether a logged decision is one the gate left to the answering model (its scores say
    so); a decision without readable scores was not."""
    scores = decision.get("scores")
    return isinstance(scores, Mapping) and is_deferred(scores)


def text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def day_of(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(at))


def latency_bucket(ms: float) -> int:
    for bound in LATENCY_BUCKETS_MS:
        if ms <= bound:
            return bound
    return LATENCY_BUCKETS_MS[-1] * 2


def percentile_of_histogram(histogram: Mapping[int, int], q: float) -> float | None:
    """The bucket bound under which a fraction `q` of the counted answers fall (None: none)."""
    total = sum(histogram.values())
    if total == 0:
        return None
    wanted = math.ceil(q * total)
    seen = 0
    for bound in sorted(histogram):
        seen += histogram[bound]
        if seen >= wanted:
            return float(bound)
    return float(max(histogram))
