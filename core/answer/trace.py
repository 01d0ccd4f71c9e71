"""What answering one question did: stages, plan, evidence, judge rounds, LLM use and timings.

`tacit ask --trace` prints it; the bot stores it with the answer. Everything in it is plain
JSON so a trace can be logged, diffed and compared across runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StageRecord:
    name: str  # "follow_up", "coverage", "logic_form", "pre_check", "dual_level", "answer", …
    # "ok" | "failed" | "timeout" | "skipped" | "passed" | "rejected", and "deferred" for a
    # coverage check the gate's deferral to the model carried past (core.answer.pipeline)
    outcome: str = "ok"
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 4),
            **({"detail": self.detail} if self.detail else {}),
        }


@dataclass(slots=True)
class Trace:
    question: str
    standalone_question: str | None = None
    stages: list[StageRecord] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    retrieved: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    llm: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    _started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def stage(self, name: str, **detail: Any) -> Iterator[StageRecord]:
        """Time a stage; the body may set `record.outcome` and add to `record.detail`.

        An exception escaping the body marks the stage failed (and propagates).
        """
        record = StageRecord(name, detail=dict(detail))
        self.stages.append(record)
        started = time.perf_counter()
        try:
            yield record
        except BaseException as exc:
            if record.outcome == "ok":
                record.outcome = "failed"
                record.detail.setdefault("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            record.seconds = time.perf_counter() - started

    def finish(self, llm_usage: dict[str, Any]) -> None:
        self.llm = dict(llm_usage)
        self.seconds = time.perf_counter() - self._started

    @property
    def stages_run(self) -> list[str]:
        return [s.name for s in self.stages]

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "question": self.question,
            "stages": [s.as_dict() for s in self.stages],
            "llm": self.llm,
            "seconds": round(self.seconds, 4),
        }
        if self.standalone_question is not None:
            data["standalone_question"] = self.standalone_question
        if self.plan is not None:
            data["plan"] = self.plan
        if self.retrieved is not None:
            data["retrieved"] = self.retrieved
        if self.rounds:
            data["rounds"] = self.rounds
        return data
