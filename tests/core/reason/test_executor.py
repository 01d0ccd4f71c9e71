"""Executing logic-form plans (core/reason/executor.py) against a fake context source."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.errors import LLMError
from core.models import ChunkRecord, Entity, Relation
from core.reason.executor import ENTRY_CHUNKS, PlanOutcome, execute_plan, history_lines
from core.reason.plan import parse_plan
from core.reason.sub_answer import Support
from core.retrieve.context import (
    Keywords,
    RetrievedContext,
    ScoredChunk,
    ScoredEntity,
    ScoredRelation,
)
from tests.fakes.fake_llm import FakeLLM


def context_about(*texts: str, source: str = "doc.md") -> RetrievedContext:
    chunks = tuple(
        ScoredChunk(ChunkRecord(f"{source}#{n}", source, n, text), 0.9 - n / 10, ("dense",))
        for n, text in enumerate(texts)
    )
    entity = Entity("orion", "Orion", "cluster", ("A GPU cluster",), (chunks[0].chunk.id,), 2)
    relation = Relation("orion", "vega", "sibling", ("both clusters",), (chunks[0].chunk.id,))
    return RetrievedContext(
        entities=(ScoredEntity(entity, 0.8),),
        relations=(ScoredRelation(relation, 0.7),),
        chunks=chunks,
    )


@dataclass
class FakeSource:
    """Answers retrieve calls from a function of the query; records every call."""

    answer: Callable[[str], RetrievedContext]
    delay: float = 0.0
    calls: list[tuple[str, Keywords | None, int]] = field(default_factory=list)
    found_entries: tuple[ScoredChunk, ...] = ()  # what every entries call returns
    entry_calls: list[tuple[list[str], list[str], int]] = field(default_factory=list)

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext:
        assert kb == "kb"
        self.calls.append((question, keywords, widen))
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.answer(question)

    async def entries(
        self, kb: str, names: Sequence[str], about: Sequence[str], *, limit: int
    ) -> tuple[ScoredChunk, ...]:
        assert kb == "kb"
        self.entry_calls.append((list(names), list(about), limit))
        return self.found_entries


def always(context: RetrievedContext) -> FakeSource:
    return FakeSource(lambda _query: context)


def sub_answer(answer: str, *items: tuple[str, str] | str, found: bool = True) -> dict[str, Any]:
    listed = [{"name": i} if isinstance(i, str) else {"name": i[0], "value": i[1]} for i in items]
    return {"found": found, "answer": answer, "items": listed}


def plan_of(*steps: dict[str, Any]) -> Any:
    numbered = [{"id": n, **s} for n, s in enumerate(steps, start=1)]
    return parse_plan({"steps": numbered})


def retrieve(s: str | None, p: str | None, o: str | None, q: str = "") -> dict[str, Any]:
    return {"op": "retrieve", "args": {"subject": s, "predicate": p, "object": o}, "question": q}


def output(ref: str | list[str]) -> dict[str, Any]:
    return {"op": "output", "args": {"of": ref}}


async def run(plan: Any, llm: FakeLLM, source: FakeSource, **kwargs: Any) -> PlanOutcome:
    outcome = await execute_plan(
        plan, kb="kb", source=source, llm=llm, language=kwargs.pop("language", "en"), **kwargs
    )
    json.dumps(outcome.trace)  # the trace is JSON-safe whatever happened
    return outcome


async def test_retrieve_then_output() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("Orion has 64 GPUs.", ("Orion", "64 GPUs")))
    source = always(context_about("The Orion cluster has 64 GPUs."))
    plan = plan_of(
        retrieve("Orion cluster", "number of GPUs", "?n", "How many GPUs?"), output("#1")
    )

    outcome = await run(plan, llm, source)

    assert outcome.ok and outcome.failure is None
    assert outcome.answer == "Orion has 64 GPUs."
    assert outcome.history == (("How many GPUs?", "Orion has 64 GPUs."),)
    # The pattern is the query and the dual-level split: no keyword call needed.
    query, keywords, widen = source.calls[0]
    assert query == "Orion cluster number of GPUs"
    assert keywords == Keywords(high=("number of GPUs",), low=("Orion cluster",), source="llm")
    assert widen == 0
    assert [(c.kind, c.template) for c in llm.calls] == [("json", "sub_answer")]
    assert "The Orion cluster has 64 GPUs." in llm.calls[0].last_user
    assert '"How many GPUs?"' in llm.calls[0].last_user
    assert outcome.context.chunks[0].via == ("dense", "plan")
    steps = outcome.trace["steps"]
    assert [s["outcome"] for s in steps] == ["ok", "ok"]
    assert steps[0]["retrieved"] == {"entities": 1, "relations": 1, "chunks": 1}
    assert all(s["ms"] >= 0 for s in steps)
    assert outcome.trace["llm_calls"] == 1


async def test_references_carry_items_into_later_patterns_and_questions() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("The payments team owns ledger and gateway.", "ledger", "gateway"),
        sub_answer("ledger 8 GB, gateway 2 GB", ("ledger", "8 GB"), ("gateway", "2 GB")),
    )
    source = always(context_about("ledger uses 8 GB; gateway uses 2 GB"))
    plan = plan_of(
        retrieve("payments team", "owns", "?s", "Which services?"),
        retrieve("#1", "memory limit", "?m", "Memory limit of #1?"),
        output("#2"),
    )

    outcome = await run(plan, llm, source)

    assert outcome.ok
    assert source.calls[1][0] == "ledger, gateway memory limit"
    assert source.calls[1][1] == Keywords(
        high=("memory limit",), low=("ledger", "gateway"), source="llm"
    )
    assert '"Memory limit of ledger, gateway?"' in llm.calls[1].last_user
    # the second sub-answer sees the first in its history
    assert "Which services? → The payments team owns ledger and gateway." in llm.calls[1].last_user
    assert outcome.history[1] == ("Memory limit of ledger, gateway?", "ledger 8 GB, gateway 2 GB")


async def _with_items(*steps: dict[str, Any], language: str = "en") -> PlanOutcome:
    """A retrieve step that finds four services with memory limits, then `steps`."""
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer(
            "four services",
            ("ledger", "8 GB"),
            ("gateway", "2 GB"),
            ("search", "16 GB"),
            ("auth", "1,200 MB"),
        ),
    )
    plan = plan_of(retrieve("payments team", "memory limit", "?m", "Limits?"), *steps)
    outcome = await run(plan, llm, always(context_about("limits")), language=language)
    assert llm.templates_called == ["sub_answer"]  # computing steps never call the LLM
    return outcome


async def test_filter_numeric_and_text() -> None:
    outcome = await _with_items(
        {"op": "filter", "args": {"of": "#1", "condition": ">", "value": "4 GB"}},
        output("#2"),
    )
    assert outcome.answer == "ledger: 8 GB; search: 16 GB"
    outcome = await _with_items(
        {
            "op": "filter",
            "args": {"of": "#1", "field": "name", "condition": "contains", "value": "A"},
        },
        output("#2"),
    )
    assert outcome.answer == "gateway: 2 GB; search: 16 GB; auth: 1,200 MB"
    outcome = await _with_items(
        {"op": "filter", "args": {"of": "#1", "condition": "<", "value": "1500 MB"}},
        output("#2"),
    )
    assert outcome.answer == "auth: 1,200 MB"  # 1,200 MB < 1.5 GB < 2 GB: units convert


async def test_filter_against_a_number_without_a_unit_is_ambiguous_and_fails() -> None:
    outcome = await _with_items(
        {"op": "filter", "args": {"of": "#1", "condition": ">", "value": 100}}, output("#2")
    )
    assert not outcome.ok
    assert "mixed with values without a unit" in (outcome.failure or "")


async def test_filter_with_nothing_left_is_an_answer_not_a_failure() -> None:
    outcome = await _with_items(
        {"op": "filter", "args": {"of": "#1", "condition": ">", "value": "1 TB"}},
        {"op": "count", "args": {"of": "#2"}},
        output("#3"),
    )
    assert outcome.ok and outcome.answer == "0"
    assert outcome.history[1][1] == "(none)"


async def test_looking_up_an_empty_list_fails_before_retrieving() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("two", ("ledger", "8 GB"), ("auth", "2 GB")))
    source = always(context_about("limits"))
    plan = plan_of(
        retrieve("team", "memory limit", "?m"),
        {"op": "filter", "args": {"of": "#1", "condition": ">", "value": "1 TB"}},
        retrieve("#2", "owner", "?o"),
        output("#3"),
    )
    outcome = await run(plan, llm, source)
    assert outcome.failure == "step 3 (retrieve): #2 found nothing to look up"
    assert len(source.calls) == 1


async def test_sort_by_value_and_by_name() -> None:
    outcome = await _with_items(
        {"op": "sort", "args": {"of": "#1", "by": "value", "order": "desc", "limit": 2}},
        output("#2"),
    )
    assert outcome.answer == "search: 16 GB; ledger: 8 GB"  # 1,200 MB is 1.2 GB
    outcome = await _with_items(
        {"op": "sort", "args": {"of": "#1", "by": "name", "order": "asc"}}, output("#2")
    )
    assert outcome.answer == "auth: 1,200 MB; gateway: 2 GB; ledger: 8 GB; search: 16 GB"


async def test_count_and_sum() -> None:
    outcome = await _with_items(
        {"op": "count", "args": {"of": ["#1"]}, "question": "How many services?"}, output("#2")
    )
    assert outcome.answer == "4"
    assert outcome.history[1] == ("How many services?", "4")
    outcome = await _with_items({"op": "sum", "args": {"of": ["#1"]}}, output("#2"))
    assert outcome.answer == "27.2 GB"  # 8 + 2 + 16 + 1.2 (1,200 MB)
    assert outcome.history[1][0] == "sum of #1"  # no question: the step described


async def test_compare_difference_and_verdicts() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("Orion has 64 GPUs.", ("Orion", "64")),
        sub_answer("Vega has 48 GPUs."),  # no items: the one number in the text
    )
    plan = plan_of(
        retrieve("Orion", "GPUs", "?n"),
        retrieve("Vega", "GPUs", "?m"),
        {"op": "compare", "args": {"left": "#1", "right": "#2", "relation": "difference"}},
        {"op": "compare", "args": {"left": "#3", "right": 20, "relation": "greater"}},
        {"op": "compare", "args": {"left": "#1", "right": "48.0", "relation": "less_or_equal"}},
        output("#3"),
    )
    outcome = await run(plan, llm, always(context_about("GPUs")))
    assert outcome.ok
    assert outcome.answer == "16"
    assert [a for _, a in outcome.history[2:]] == ["16", "no (16 > 20)", "no (64 ≤ 48)"]
    assert outcome.trace["steps"][2]["operands"] == [[64.0, ""], [48.0, ""]]


async def test_compare_answers_in_chinese() -> None:
    outcome = await _with_items(
        {"op": "count", "args": {"of": "#1"}},
        {"op": "compare", "args": {"left": "#2", "right": 3, "relation": "greater"}},
        output("#3"),
        language="zh",
    )
    assert outcome.answer == "是 (4 > 3)"


async def test_deduce_reads_what_was_gathered_and_the_history() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("Orion runs training jobs.", "training"),
        sub_answer("Because training needs GPUs.", found=True),
    )
    plan = plan_of(
        retrieve("Orion", "runs", "?job", "What runs on Orion?"),
        {"op": "deduce", "args": {}, "question": "Why does #1 need Orion?"},
        output("#2"),
    )
    outcome = await run(plan, llm, always(context_about("Orion runs the training jobs.")))
    assert outcome.ok and outcome.answer == "Because training needs GPUs."
    assert len(outcome.context.chunks) == 1  # deduce retrieves nothing new
    deduce_prompt = llm.calls[1].last_user
    assert "Orion runs the training jobs." in deduce_prompt
    assert "What runs on Orion? → Orion runs training jobs." in deduce_prompt
    assert '"Why does training need Orion?"' in deduce_prompt


async def test_deduce_with_nothing_gathered_fails_without_a_call() -> None:
    llm = FakeLLM()
    plan = plan_of({"op": "deduce", "args": {}, "question": "Why?"}, output("#1"))
    outcome = await run(plan, llm, always(context_about("x")))
    assert not outcome.ok and "nothing has been gathered" in (outcome.failure or "")
    assert llm.calls == []


async def test_a_retrieve_that_finds_nothing_fails_the_plan_before_any_llm_call() -> None:
    llm = FakeLLM()
    source = always(RetrievedContext())
    plan = plan_of(retrieve("Atlantis", "GPUs", "?n"), output("#1"))
    outcome = await run(plan, llm, source)
    assert not outcome.ok
    assert outcome.failure == "step 1 (retrieve): nothing was retrieved for 'Atlantis GPUs'"
    assert outcome.answer is None and outcome.history == ()
    assert llm.calls == []
    # the output step, which needs step 1, never ran
    assert [s["outcome"] for s in outcome.trace["steps"]] == ["failed", "skipped"]


async def test_a_context_that_does_not_answer_fails_the_plan() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("", found=False))
    outcome = await run(
        plan_of(retrieve("Orion", "owner", "?o"), output("#1")),
        llm,
        always(context_about("Orion has GPUs.")),
    )
    assert not outcome.ok and "does not answer" in (outcome.failure or "")
    assert not outcome.context.is_empty()  # what was retrieved is still reported


async def test_an_llm_failure_in_a_step_fails_the_plan() -> None:
    llm = FakeLLM().script("sub_answer", LLMError("endpoint down"))
    outcome = await run(
        plan_of(retrieve("Orion", "owner", "?o"), output("#1")), llm, always(context_about("x"))
    )
    assert not outcome.ok
    assert outcome.failure == "step 1 (retrieve): the LLM failed: endpoint down"


async def test_a_step_over_the_time_left_fails_the_plan() -> None:
    llm = FakeLLM()
    source = always(context_about("slow"))
    source.delay = 5.0
    plan = plan_of(retrieve("Orion", "owner", "?o"), output("#1"))
    outcome = await run(plan, llm, source, timeout=0.05)
    assert not outcome.ok
    assert outcome.failure == "step 1 (retrieve) timed out"
    assert outcome.trace["steps"][0]["outcome"] == "timeout"
    assert outcome.trace["steps"][0]["ms"] < 1000


async def test_the_timeout_bounds_the_whole_plan_not_each_step() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("a", "x"), sub_answer("b", "y"))
    source = always(context_about("t"))
    source.delay = 0.06
    # Step 2 looks up what step 1 found, so it waits for it: 0.06 + 0.06 > 0.1.
    plan = plan_of(retrieve("A", "p", "?x"), retrieve("#1", "p", "?y"), output("#2"))
    outcome = await run(plan, llm, source, timeout=0.1)
    assert outcome.failure == "step 2 (retrieve) timed out"
    assert [s["outcome"] for s in outcome.trace["steps"]] == ["ok", "timeout"]


async def test_independent_steps_run_at_the_same_time() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("Mei Lin owns it.", "Mei Lin"),
        sub_answer("It listens on 5432.", ("lumen_ledger", "5432")),
    )
    source = always(context_about("Mei Lin owns lumen_ledger, which listens on 5432."))
    # wide margins: a loaded machine delays every step, but not by a whole second
    source.delay = 1.0
    plan = plan_of(
        retrieve("ledger database", "owner", "?o", "Who owns the ledger database?"),
        retrieve("ledger database", "port", "?p", "On which port does it listen?"),
        {"op": "output", "args": {"of": ["#1", "#2"]}},
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await run(plan, llm, source, timeout=1.8)  # 1.0 + 1.0 in sequence would not fit
    assert outcome.ok, outcome.failure
    assert loop.time() - started < 1.8
    # Two-part question, no empty deduce: the output names both results, in plan order.
    assert outcome.answer == "Mei Lin owns it.; It listens on 5432."
    assert [q for q, _ in outcome.history] == [
        "Who owns the ledger database?",
        "On which port does it listen?",
    ]
    # Neither lookup depends on the other, so neither reads the other's sub-answer.
    assert all("Sub-answers so far" not in call.last_user for call in llm.calls)


@pytest.mark.parametrize(
    ("steps", "failure"),
    [
        (
            [{"op": "compare", "args": {"left": "#1", "right": 3, "relation": "greater"}}],
            "#1 is not a single number",
        ),
        ([{"op": "sum", "args": {"of": "#1"}}], "no number in 'ledger'"),
        ([{"op": "average", "args": {"of": "#1"}}], "no number in 'ledger'"),
        ([{"op": "ratio", "args": {"left": "#1", "right": 2}}], "#1 is not a single number"),
    ],
)
async def test_computing_steps_without_numbers_fail(
    steps: list[dict[str, Any]], failure: str
) -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("two", ("ledger", "big"), ("auth", "3")))
    plan = plan_of(retrieve("team", "services", "?s"), *steps, output("#2"))
    outcome = await run(plan, llm, always(context_about("x")))
    assert not outcome.ok
    assert failure in (outcome.failure or "")
    assert (outcome.failure or "").startswith("step 2 (")


async def test_count_needs_listed_items() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("The team owns 12 services."))
    plan = plan_of(
        retrieve("team", "services", "?s"), {"op": "count", "args": {"of": "#1"}}, output("#2")
    )
    outcome = await run(plan, llm, always(context_about("x")))
    assert not outcome.ok and "nothing to count" in (outcome.failure or "")


async def test_a_plan_of_literal_numbers_runs_without_retrieval() -> None:
    plan = plan_of(
        {"op": "compare", "args": {"left": 3, "right": "2", "relation": "difference"}},
        output("#1"),
    )
    outcome = await run(plan, FakeLLM(), always(context_about("x")))
    assert outcome.ok and outcome.answer == "1"
    assert outcome.context.is_empty()  # nothing to answer from: the pipeline falls through


async def test_sub_answers_may_list_bare_names_and_numbers() -> None:
    llm = FakeLLM().script("sub_answer", {"answer": 3, "items": ["a", 7, {"name": " b  c "}]})
    plan = plan_of(retrieve("x", "y", "?z"), {"op": "count", "args": {"of": "#1"}}, output("#2"))
    outcome = await run(plan, llm, always(context_about("x")))
    assert outcome.ok and outcome.answer == "3"
    assert outcome.trace["steps"][0]["result"]["items"][2] == {"name": "b c", "value": ""}


async def test_a_reference_stands_for_the_values_found_not_their_labels() -> None:
    # The issue's deduce read "Given at most notification attempts, a first delay of first
    # backoff delay": the labels, not the values. #k is what step k found.
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("At most 6 attempts.", ("notification attempts", "6")),
        sub_answer("The first delay is 30 s.", ("first backoff delay", "30 s")),
        sub_answer("The total is 31.5 min.", ("total backoff", "31.5 min")),
    )
    plan = plan_of(
        retrieve("notifications", "maximum attempts", "?n", "How many attempts at most?"),
        retrieve("notifications", "first backoff delay", "?d", "What is the first delay?"),
        {
            "op": "deduce",
            "args": {},
            "question": "Given at most #1 attempts and a first delay of #2, what is the total?",
        },
        output("#3"),
    )
    outcome = await run(plan, llm, always(context_about("Backoff doubles from 30 s.")))
    assert outcome.ok, outcome.failure
    assert '"Given at most 6 attempts and a first delay of 30 s, what is the total?"' in (
        llm.calls[2].last_user
    )


async def test_a_lookup_of_a_reference_uses_what_was_found_not_the_echoed_subject() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        # The model put the sub-question's subject in "name" and the answer in "value".
        sub_answer("It uses lumen_ledger.", ("ledger service", "lumen_ledger")),
        sub_answer("lumen_ledger listens on 5432.", ("lumen_ledger", "5432")),
    )
    source = always(context_about("The ledger service stores data in lumen_ledger (port 5432)."))
    plan = plan_of(
        retrieve(
            "ledger service", "database", "?db", "Which database does the ledger service use?"
        ),
        retrieve("#1", "port", "?p", "On which port does #1 listen?"),
        output("#2"),
    )
    outcome = await run(plan, llm, source)
    assert outcome.ok, outcome.failure
    assert source.calls[1][0] == "lumen_ledger port"
    assert '"On which port does lumen_ledger listen?"' in llm.calls[1].last_user


async def test_computed_results_carry_their_units_into_later_text() -> None:
    outcome = await _with_items(
        {"op": "sum", "args": {"of": "#1"}},
        {"op": "compare", "args": {"left": "#2", "right": "20 GB", "relation": "greater"}},
        {"op": "output", "args": {"of": ["#2", "#3"]}},
    )
    assert outcome.ok, outcome.failure
    assert outcome.answer == "27.2 GB; yes (27.2 GB > 20 GB)"


async def test_ratio_average_and_percent_are_arithmetic_in_python() -> None:
    outcome = await _with_items(
        {"op": "sort", "args": {"of": "#1", "by": "value", "order": "desc", "limit": 1}},
        {"op": "average", "args": {"of": "#1"}},
        {"op": "ratio", "args": {"left": "#2", "right": "#3"}},
        {"op": "percent", "args": {"left": "#3", "right": "#2"}},
        {"op": "output", "args": {"of": ["#3", "#4", "#5"]}},
    )
    assert outcome.ok, outcome.failure
    # (8 + 2 + 16 + 1.2) / 4 = 6.8 GB; 16 / 6.8; 6.8 / 16
    assert outcome.answer == "6.8 GB; 2.352941; 42.5%"
    assert outcome.trace["steps"][3]["result"]["number"] == pytest.approx(16 / 6.8)


async def test_ratio_by_zero_fails_the_step() -> None:
    plan = plan_of(
        {"op": "ratio", "args": {"left": 3, "right": "0"}},
        output("#1"),
    )
    outcome = await run(plan, FakeLLM(), always(context_about("x")))
    assert not outcome.ok and "divide by zero" in (outcome.failure or "")


async def test_a_filter_threshold_may_be_an_earlier_result() -> None:
    outcome = await _with_items(
        {"op": "average", "args": {"of": "#1"}},
        {"op": "filter", "args": {"of": "#1", "condition": ">", "value": "#2"}},
        {"op": "output", "args": {"of": "#3"}},
    )
    assert outcome.ok, outcome.failure
    assert outcome.answer == "ledger: 8 GB; search: 16 GB"  # above the 6.8 GB average


async def test_an_unexpected_error_reaches_the_caller_as_itself() -> None:
    class StoreDown(Exception):
        pass

    def broken(_query: str) -> RetrievedContext:
        raise StoreDown("graph store unreachable")

    plan = plan_of(retrieve("A", "p", "?x"), retrieve("B", "p", "?y"), output("#2"))
    with pytest.raises(StoreDown, match="unreachable"):
        await run(plan, FakeLLM(), FakeSource(broken))


# A demo-like knowledge base (bot/demo_kb/glossary.md): the retriever ranks the page that says
# what "owner" means and passages that only mention lumen-dispatcher above the table that names
# its owner, which comes ninth; a step reads six.
OWNERS_TABLE = (
    "| Component | What it is | Owner |\n"
    "|---|---|---|\n"
    "| lumen-gateway | HTTPS ingest API on port 8443 | Priya Natarajan |\n"
    "| lumen-dispatcher | Kafka consumer that delivers notifications; includes the spool "
    "| Tomás Ferreira |\n"
    "| lumen-ledger | PostgreSQL 15 database `lumen_ledger` | Mei Lin |"
)
RANKED_ABOVE_THE_TABLE = (
    '"Owner" means the person who reviews changes. Lumen as a whole is owned by the Payments '
    "Platform team.",
    "Each lumen-dispatcher pod writes to a spool volume.",
    "Use this runbook when lumen-dispatcher logs show consumer paused.",
    "If slots are idle but lag grows, check the lumen-dispatcher dependencies.",
    "When all delivery slots of lumen-dispatcher are busy, look at the slowest merchant.",
    "Install lumenctl from the internal package mirror.",
    "With 6 lumen-dispatcher replicas Lumen delivers 2000 notifications a second.",
    "Lumen 故障处理总览：所有分区一起积压时查看投递槽位使用率。",
)


def ranked(*texts: str) -> RetrievedContext:
    """Chunks in this order, each from its own document, scores falling."""
    return RetrievedContext(
        chunks=tuple(
            ScoredChunk(ChunkRecord(f"d{n}.md#0", f"d{n}.md", 0, t), 0.07 - n / 1000, ("dense",))
            for n, t in enumerate(texts)
        )
    )


async def test_a_step_reads_the_table_row_that_holds_its_subject_and_predicate() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("Tomás Ferreira.", "Tomás Ferreira"))
    context = ranked(*RANKED_ABOVE_THE_TABLE, OWNERS_TABLE, "Kafka brokers listen on 9093.")
    plan = plan_of(
        retrieve("lumen-dispatcher", "owner", "?owner", "Who owns lumen-dispatcher?"),
        output("#1"),
    )

    outcome = await run(plan, llm, always(context))

    assert outcome.ok, outcome.failure
    read = llm.calls[0].last_user
    # The header's "Owner" and the row's "lumen-dispatcher" are one row: that chunk is read,
    # right after the retriever's best, which is never pushed out.
    assert "Tomás Ferreira" in read
    assert read.index(RANKED_ABOVE_THE_TABLE[0]) < read.index("Tomás Ferreira")
    assert read.index("Tomás Ferreira") < read.index(RANKED_ABOVE_THE_TABLE[1])
    assert all(text in read for text in RANKED_ABOVE_THE_TABLE[:5])
    assert RANKED_ABOVE_THE_TABLE[5] not in read  # still six: the sixth passage made room
    # What the plan hands on starts with the row the sub-answer came from (the passage that
    # holds what it found: the reply names no source), then the rest of what the step read, in
    # its order, so the budgets of the pre-check and the answer keep that row; then the rest.
    handed_on = [c.chunk.text for c in outcome.context.chunks]
    read_first = [OWNERS_TABLE, RANKED_ABOVE_THE_TABLE[0], *RANKED_ABOVE_THE_TABLE[1:5]]
    assert handed_on[:6] == read_first
    assert handed_on[6:] == [
        t for t in (c.chunk.text for c in context.chunks) if t not in read_first
    ]
    # and what a check of the sub-answers reads is exactly what the step read, in its order
    step_read = [RANKED_ABOVE_THE_TABLE[0], OWNERS_TABLE, *RANKED_ABOVE_THE_TABLE[1:5]]
    assert [c.chunk.text for c in outcome.read.chunks] == step_read


async def test_a_step_keeps_the_retrievers_order_when_no_row_holds_both() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("Priya Natarajan.", "Priya Natarajan"))
    context = ranked(*RANKED_ABOVE_THE_TABLE, OWNERS_TABLE)
    plan = plan_of(
        retrieve("lumen-mailer", "owner", "?owner", "Who owns lumen-mailer?"), output("#1")
    )

    outcome = await run(plan, llm, always(context))

    assert outcome.ok, outcome.failure
    read = llm.calls[0].last_user
    first_six = RANKED_ABOVE_THE_TABLE[:6]
    assert all(text in read for text in first_six)
    assert [read.index(text) for text in first_six] == sorted(read.index(t) for t in first_six)
    assert RANKED_ABOVE_THE_TABLE[6] not in read and "Tomás Ferreira" not in read


async def test_a_chinese_predicate_reads_a_chinese_table_and_leaves_an_english_one_alone() -> None:
    chinese_table = (
        "| 组件 | 说明 | 负责人 |\n|---|---|---|\n| lumen-dispatcher | 投递通知的消费者 | 费雷拉 |"
    )
    plan = plan_of(
        retrieve("lumen-dispatcher", "负责人", "?owner", "lumen-dispatcher 由谁负责？"),
        output("#1"),
    )

    english = FakeLLM().script("sub_answer", sub_answer("未找到", found=False))
    await run(plan, english, always(ranked(*RANKED_ABOVE_THE_TABLE, OWNERS_TABLE)), language="zh")
    assert "Tomás Ferreira" not in english.calls[0].last_user  # "负责人" is not "Owner"

    chinese = FakeLLM().script("sub_answer", sub_answer("费雷拉。", "费雷拉"))
    outcome = await run(
        plan, chinese, always(ranked(*RANKED_ABOVE_THE_TABLE, chinese_table)), language="zh"
    )
    assert outcome.ok, outcome.failure
    assert "费雷拉" in chinese.calls[0].last_user


async def test_a_step_reads_its_subjects_entries_that_the_query_did_not_rank() -> None:
    # "lumen-gateway / 负责人" against an English owners table: the query's ranking does not
    # bring the table (no word in common); the subject's entries do, and they are read after
    # the retriever's best and before the rest.
    table = ScoredChunk(
        ChunkRecord("glossary.md#2", "glossary.md", 2, OWNERS_TABLE), 0.57, ("entry",)
    )
    source = always(ranked(*RANKED_ABOVE_THE_TABLE))
    source.found_entries = (table,)
    llm = FakeLLM().script("sub_answer", sub_answer("Priya Natarajan。", "Priya Natarajan"))
    plan = plan_of(
        retrieve("lumen-gateway", "负责人", "?owner", "lumen-gateway 的负责人是谁？"), output("#1")
    )

    outcome = await run(plan, llm, source, language="zh")

    assert outcome.ok, outcome.failure
    assert source.entry_calls == [(["lumen-gateway"], ["负责人"], ENTRY_CHUNKS)]
    read = llm.calls[0].last_user
    assert read.index(RANKED_ABOVE_THE_TABLE[0]) < read.index("Priya Natarajan")
    assert read.index("Priya Natarajan") < read.index(RANKED_ABOVE_THE_TABLE[1])
    assert RANKED_ABOVE_THE_TABLE[5] not in read  # still six passages read
    assert [c.chunk.id for c in outcome.read.chunks][1] == "glossary.md#2"
    assert "glossary.md#2" in [c.chunk.id for c in outcome.context.chunks]
    assert outcome.trace["steps"][0]["entries"] == ["glossary.md#2"]


async def test_entries_come_after_the_rows_that_hold_both_and_need_a_predicate() -> None:
    held = "| Component | Owner |\n|---|---|\n| lumen-gateway | Priya Natarajan |"
    entry = ScoredChunk(ChunkRecord("e.md#0", "e.md", 0, "lumen-gateway — ingest API."), 0.5)
    source = always(ranked(*RANKED_ABOVE_THE_TABLE[:3], held))
    source.found_entries = (entry,)
    llm = FakeLLM().script("sub_answer", sub_answer("Priya.", "Priya"))
    plan = plan_of(retrieve("lumen-gateway", "owner", "?o", "Who owns it?"), output("#1"))
    outcome = await run(plan, llm, source)
    texts = [c.chunk.text for c in outcome.read.chunks]
    assert texts[:3] == [RANKED_ABOVE_THE_TABLE[0], held, "lumen-gateway — ingest API."]

    # A step with no predicate names no row to look for: no entries are asked for.
    bare = always(context_about("Orion has 64 GPUs."))
    llm = FakeLLM().script("sub_answer", sub_answer("Orion.", "Orion"))
    await run(plan_of(retrieve("Orion", None, "?x", "Orion?"), output("#1")), llm, bare)
    assert bare.entry_calls == []


async def test_a_failing_step_ends_the_steps_that_need_it_not_those_beside_it() -> None:
    # "Who owns Orion, and who approves its budget?" with no approver in the KB: the owner is
    # still found, and reaches the dual-level answer through the outcome's history.
    llm = FakeLLM().script(
        "sub_answer", sub_answer("", found=False), sub_answer("Mei Lin owns Orion.", "Mei Lin")
    )
    plan = plan_of(
        retrieve("Orion", "budget approver", "?a", "Who approves Orion's budget?"),
        retrieve("Orion", "owner", "?o", "Who owns Orion?"),
        output(["#1", "#2"]),
    )
    outcome = await run(plan, llm, always(context_about("Orion is owned by Mei Lin.")))
    assert not outcome.ok and (outcome.failure or "").startswith("step 1 (retrieve)")
    assert outcome.history == (("Who owns Orion?", "Mei Lin owns Orion."),)
    assert [s["outcome"] for s in outcome.trace["steps"]] == ["failed", "ok", "skipped"]
    assert "Mei Lin" in "".join(c.chunk.text for c in outcome.read.chunks)


# --- what each sub-answer was read from, shown as the final context's numbers ----------------


def cites(reply: dict[str, Any], *sources: Any) -> dict[str, Any]:
    return {**reply, "sources": list(sources)}


def citing_passage(reply: dict[str, Any], text: str) -> Callable[[Any], str]:
    """The reply, naming as its source the number the step's prompt gives the passage `text`."""

    def answer(prompt: Any) -> str:
        shown = re.findall(
            r"^\[(\d+)\] \(.*?\)\n<document>\n(.+)$", prompt.messages[-1].content, re.M
        )
        n = next(n for n, passage in shown if passage == text)
        return json.dumps(cites(reply, f"[{n}]"))

    return answer


async def test_a_sub_answers_sources_are_shown_as_the_final_contexts_numbers() -> None:
    # Each step numbers the passages it reads; the final context merges two steps and numbers
    # them anew: the sub-answer is shown with the final number of the passage it named.
    owners = context_about("Intro to the ledger.", "Noise.", "The ledger is owned by Mei Lin.")
    ports = context_about("The ledger listens on 5432.", source="ports.md")
    llm = FakeLLM().script(
        "sub_answer",
        citing_passage(sub_answer("Mei Lin.", "Mei Lin"), "The ledger is owned by Mei Lin."),
        cites(sub_answer("5432.", ("ledger", "5432")), 1),
    )
    source = FakeSource(lambda q: owners if "owner" in q else ports)
    plan = plan_of(
        retrieve("ledger", "owner", "?o", "Who owns the ledger?"),
        retrieve("ledger", "port", "?p", "Which port?"),
        output(["#1", "#2"]),
    )

    outcome = await run(plan, llm, source)

    assert outcome.ok, outcome.failure
    lines = history_lines(outcome.history, outcome.support, outcome.context)
    numbered = {n: c.chunk.text for n, c in enumerate(outcome.context.chunks, start=1)}
    [owner_n] = lines[0]["sources"]
    [port_n] = lines[1]["sources"]
    assert numbered[owner_n] == "The ledger is owned by Mei Lin."
    assert numbered[port_n] == "The ledger listens on 5432."
    # the named passages lead the context, so a context cut to the budgets keeps them
    assert {owner_n, port_n} == {1, 2}
    assert outcome.trace["steps"][0]["support"]["chunks"] == ["doc.md#2"]


async def test_a_number_the_steps_context_does_not_hold_is_dropped_never_invented() -> None:
    context = context_about("Orion has 64 GPUs.")
    llm = FakeLLM().script(
        "sub_answer", cites(sub_answer("It is big.", found=True), 0, -1, 7, 999, "x", True)
    )
    plan = plan_of(retrieve("Orion", "size", "?s", "How big is Orion?"), output("#1"))
    outcome = await run(plan, llm, always(context))
    assert outcome.support == (Support(),)
    assert history_lines(outcome.history, outcome.support, outcome.context)[0]["sources"] == []


async def test_a_graph_fact_named_as_a_source_is_shown_as_the_final_facts_number() -> None:
    # Fact numbers follow the chunks: the step's [2] is Orion's entity line; in a final
    # context of three chunks, the same fact is [4].
    step = context_about("Vega is small.")
    llm = FakeLLM().script("sub_answer", cites(sub_answer("A GPU cluster.", "Orion"), 2))
    plan = plan_of(retrieve("Orion", "kind", "?k", "What is Orion?"), output("#1"))
    outcome = await run(plan, llm, always(step))
    final = context_about("Vega is small.", "a", "b", source="other.md").merged(outcome.context)
    final = RetrievedContext(final.entities, final.relations, final.chunks[:3])
    lines = history_lines(outcome.history, outcome.support, final)
    assert lines[0]["sources"] == [4]


async def test_without_named_sources_the_passage_holding_the_finding_stands_in() -> None:
    # Not the step's best passage (a mention of the subject): the one holding "Mei Lin", and
    # "64" is not found inside "640".
    context = context_about("Orion is a cluster.", "Orion has 640 cores.", "Mei Lin owns Orion.")
    llm = FakeLLM().script(
        "sub_answer",
        sub_answer("Mei Lin.", "Mei Lin"),
        sub_answer("64.", ("Orion", "64")),
        sub_answer("No item, no finding."),
    )
    plan = plan_of(
        retrieve("Orion", "owner", "?o", "Who owns Orion?"),
        retrieve("Orion", "GPUs", "?g", "How many GPUs?"),
        retrieve("Orion", "purpose", "?p", "What for?"),
        output(["#1", "#2", "#3"]),
    )
    outcome = await run(plan, llm, always(context))
    assert outcome.ok, outcome.failure
    assert [s.chunks for s in outcome.support] == [("doc.md#2",), (), ()]


async def test_computed_and_deduced_results_stand_on_what_they_were_computed_from() -> None:
    context = context_about("ledger 8 GB.", "gateway 2 GB.")
    llm = FakeLLM().script(
        "sub_answer",
        cites(sub_answer("two", ("ledger", "8 GB"), ("gateway", "2 GB")), 1, 2),
        sub_answer("Memory is ample."),  # a deduction that names no source
    )
    plan = plan_of(
        retrieve("services", "memory", "?m", "Memory of each service?"),
        {"op": "sum", "args": {"of": ["#1"]}, "question": "Total memory?"},
        {"op": "deduce", "args": {}, "question": "Is #2 enough?"},
        output(["#2", "#3"]),
    )
    outcome = await run(plan, llm, always(context))
    assert outcome.ok, outcome.failure
    both = ("doc.md#0", "doc.md#1")
    assert [s.chunks for s in outcome.support] == [both, both, both]


# --- the sub-questions the knowledge base was asked and did not answer ------------------------


def by_question(**replies: Any) -> Callable[[Any], str]:
    """A sub-answer reply chosen by the sub-question the prompt asks, not by the order of the
    calls: independent steps run at the same time. A reply may be an exception to raise."""

    def reply(prompt: Any) -> str:
        asked = prompt.messages[-1].content.strip().splitlines()[-1]
        for key, chosen in replies.items():
            if key in asked:
                if isinstance(chosen, BaseException):
                    raise chosen
                return json.dumps(chosen)
        raise AssertionError(f"no scripted sub-answer for {asked}")

    return reply


async def test_a_step_whose_context_does_not_answer_is_named_as_unanswered() -> None:
    # "How do I raise it, who approves it, and when was it last raised?" with no approver in
    # the KB and an endpoint that fails on the third lookup: only the step that read its
    # context and found no answer says anything of the KB; the one whose LLM failed and the
    # one skipped after it do not.
    reply = by_question(
        approves=sub_answer("not in the context", found=False),
        safely=sub_answer("Raise it in steps of 8.", "steps of 8"),
        When=LLMError("endpoint returned 503"),
    )
    llm = FakeLLM().script("sub_answer", reply, reply, reply)
    plan = plan_of(
        retrieve("Orion", "raise safely", "?h", "How is Orion's limit raised safely?"),
        retrieve("Orion", "approver", "?a", "Who approves raising Orion's limit?"),
        retrieve("Orion", "last raised", "?w", "When was Orion's limit last raised?"),
        retrieve("#3", "ticket", "?t", "Which ticket raised it?"),
        output(["#1", "#2", "#4"]),
    )
    outcome = await run(plan, llm, always(context_about("Orion's limit is raised in steps.")))
    assert not outcome.ok
    assert outcome.unanswered == ("Who approves raising Orion's limit?",)
    assert [s["outcome"] for s in outcome.trace["steps"]] == [
        "ok",
        "failed",
        "failed",
        "skipped",
        "skipped",
    ]
    assert outcome.trace["steps"][1]["found"] is False
    assert "found" not in outcome.trace["steps"][2]


async def test_a_step_cut_off_by_the_timeout_is_not_named_as_unanswered() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("", found=False))
    source = FakeSource(lambda q: context_about("t"))
    slow = FakeSource(lambda q: context_about("t"), delay=5.0)

    class Split:  # the approver lookup answers at once, the owner lookup never in time
        async def retrieve(self, kb: str, question: str, **kw: Any) -> RetrievedContext:
            return await (slow if "owner" in question else source).retrieve(kb, question, **kw)

        async def entries(self, *args: Any, **kw: Any) -> tuple[ScoredChunk, ...]:
            return ()

    plan = plan_of(
        retrieve("Orion", "approver", "?a", "Who approves it?"),
        retrieve("Orion", "owner", "?o", "Who owns it?"),
        output(["#1", "#2"]),
    )
    outcome = await run(plan, llm, Split(), timeout=0.5)  # type: ignore[arg-type]
    assert (outcome.failure or "").endswith("timed out")
    assert [s["outcome"] for s in outcome.trace["steps"]][:2] == ["failed", "timeout"]
    assert outcome.unanswered == ("Who approves it?",)


async def test_a_plan_whose_steps_all_answered_names_nothing_unanswered() -> None:
    llm = FakeLLM().script("sub_answer", sub_answer("Mei Lin owns Orion.", "Mei Lin"))
    plan = plan_of(retrieve("Orion", "owner", "?o", "Who owns Orion?"), output("#1"))
    outcome = await run(plan, llm, always(context_about("Orion is owned by Mei Lin.")))
    assert outcome.ok and outcome.unanswered == ()


# Two services on the same kind of database: "#1" must say which one a later question means.
TWO_DATABASES = (
    "| Service | Database | Port |\n"
    "|---|---|---|\n"
    "| lumen-ledger | PostgreSQL 15 | 5432 |\n"
    "| lumen-audit | PostgreSQL 15 | 6432 |"
)


async def test_a_reference_in_a_question_names_the_subject_beside_what_was_found() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        {
            **sub_answer("The ledger service uses PostgreSQL 15.", "PostgreSQL 15"),
            "subject": "the database the ledger service uses",
        },
        sub_answer("It listens on 5432.", ("PostgreSQL 15", "5432")),
    )
    plan = plan_of(
        retrieve("lumen-ledger", "database", "?db", "Which database does the ledger service use?"),
        {
            "op": "retrieve",
            "args": {"subject": "#1", "predicate": "port", "object": "?port"},
            "question": "On which port does #1 listen?",
        },
        output("#2"),
    )

    source = always(context_about(TWO_DATABASES))
    outcome = await run(plan, llm, source)

    assert outcome.ok, outcome.failure
    # the second lookup's query says which PostgreSQL 15 (its keywords stay the value)
    query, keywords, _ = source.calls[1]
    assert "the database the ledger service uses" in query and "PostgreSQL 15" in query
    assert keywords is not None and keywords.low == ("PostgreSQL 15",)
    asked = llm.calls[1].last_user
    # not "On which port does PostgreSQL 15 listen?", which both services' databases answer
    assert "PostgreSQL 15 (the database the ledger service uses)" in asked
    assert outcome.trace["steps"][0]["result"]["subject"] == "the database the ledger service uses"


async def test_a_reference_in_arithmetic_is_the_value_alone() -> None:
    llm = FakeLLM().script(
        "sub_answer",
        {**sub_answer("64 GPUs.", ("Orion", "64 GPUs")), "subject": "the GPUs of Orion"},
        {**sub_answer("32 GPUs.", ("Vega", "32 GPUs")), "subject": "the GPUs of Vega"},
    )
    plan = plan_of(
        retrieve("Orion", "GPUs", "?a", "How many GPUs does Orion have?"),
        retrieve("Vega", "GPUs", "?b", "How many GPUs does Vega have?"),
        {"op": "sum", "args": {"of": ["#1", "#2"]}},
        output("#3"),
    )
    outcome = await run(plan, llm, always(context_about("Orion has 64 GPUs. Vega has 32.")))
    assert outcome.ok, outcome.failure
    assert "96" in outcome.answer
