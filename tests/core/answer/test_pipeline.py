"""The multi-stage answerer end to end: real embedded stores and embedder, a scripted LLM.

Each test scripts exactly the LLM calls its path should make, in order; FakeLLM fails a test
on any call nobody scripted, so "no more calls than it must" is asserted too.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.answer.events import Answer, AnswerEvent, Delta, Final, Retract, Status
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.errors import LLMError
from core.index.pipeline import IndexOptions
from core.models import ChatMessage
from core.retrieve.retriever import RetrievalOptions, Retriever
from tests.fakes.fake_llm import FakeLLM
from tests.indexed_docs import indexed_stores

DOCS = {
    "ports.md": (
        "# Ports\n\nThe Lumen gateway listens on port 8443 for HTTPS traffic. "
        "Prometheus metrics of the gateway are served on port 9090.\n"
    ),
    "rollback.md": (
        "# Rollback runbook\n\n## Rolling back a bad deploy\n"
        "Run `deployctl rollback --to previous` to restore the last good release of the gateway. "
        "The rollback takes about four minutes. Announce it in the #ops channel first.\n"
    ),
    "部署.md": "# 部署指南\n\n每周五下午三点以后禁止向生产环境发布。紧急修复需要值班负责人批准。\n",
}
PORT_QUESTION = "Which port does the Lumen gateway listen on?"
# Two asks: worth a plan (core.reason.needs_plan); PORT_QUESTION is a single lookup.
PLAN_QUESTION = "Which port does the Lumen gateway listen on, and where are its metrics served?"
PLAN = {
    "steps": [
        {
            "id": 1,
            "op": "retrieve",
            "args": {"subject": "Lumen gateway", "predicate": "listens on port", "object": "?p"},
            "question": "Which port does the Lumen gateway listen on?",
        },
        {"id": 2, "op": "output", "args": {"of": "#1"}, "question": ""},
    ]
}
# Two lookups: the executor runs them, and the pre-check reads what their sub-answers read.
PLAN_TWO_LOOKUPS = {
    "steps": [
        PLAN["steps"][0],
        {
            "id": 2,
            "op": "retrieve",
            "args": {"subject": "gateway metrics", "predicate": "served on port", "object": "?m"},
            "question": "On which port are the gateway's metrics served?",
        },
        {"id": 3, "op": "output", "args": {"of": "#1"}, "question": ""},
    ]
}
KEYWORDS = {"high_level": ["network ports"], "low_level": ["Lumen gateway", "port"]}

# One event loop for the module: the indexed stores are built once and shared by every test.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(
    tmp_path_factory: pytest.TempPathFactory, embedder: USEEmbedder
) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore]]:
    root = tmp_path_factory.mktemp("pipeline")
    options = IndexOptions(chunk_size=64)
    async with indexed_stores(root, DOCS, "ops", embedder, options=options, nlp=True) as built:
        assert built.report.documents_indexed == 3 and built.report.entities > 0
        yield built.graph, built.vectors


def make(stores: Any, embedder: USEEmbedder, llm: Any = None, **options: Any) -> MultiStageAnswerer:
    graph, vectors = stores
    retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=llm)
    # These tests script the model's retrieval keywords, its plans and every step's
    # sub-answer: a keywords call on every question, a plan for a question of several asks, a
    # sub-answer for every lookup of a plan (the lean defaults, keywords_call=
    # "across_languages", parts="retrieve" and sub_answers="read", are
    # tests/core/answer/test_lean_paths)
    options = {"keywords_call": "always", "parts": "plan", "sub_answers": "every", **options}
    return MultiStageAnswerer(
        retriever=retriever, embedder=embedder, llm=llm, options=PipelineOptions(**options)
    )


async def collect(events: AsyncIterator[AnswerEvent]) -> tuple[list[AnswerEvent], Answer]:
    seen = [event async for event in events]
    finals = [e for e in seen if isinstance(e, Final)]
    assert len(finals) == 1 and seen[-1] is finals[0], "exactly one Final, at the end"
    return seen, finals[0].answer


def stage_outcomes(answer: Answer) -> dict[str, str]:
    assert answer.trace is not None
    return {s["name"]: s["outcome"] for s in answer.trace["stages"]}


def shown_text(events: list[AnswerEvent]) -> str:
    """What a chat client shows at the end: deltas, restarted at every Retract."""
    text = ""
    for event in events:
        if isinstance(event, Retract):
            text = ""
        elif isinstance(event, Delta):
            text += event.text
    return text


async def test_without_an_llm_dual_level_retrieval_answers_extractively(stores, embedder) -> None:
    events, answer = await collect(make(stores, embedder).ask("ops", PORT_QUESTION))
    assert answer.mode == "extractive" and not answer.refused
    assert "8443" in answer.text
    assert answer.citations and answer.citations[0].source == "docs/ports.md"
    stages = stage_outcomes(answer)
    assert list(stages) == ["coverage", "dual_level", "extractive"]
    assert answer.trace is not None and answer.trace["llm"]["calls"] == 0
    retrieved = answer.trace["retrieved"]
    assert retrieved["chunks"] and all("score" in c for c in retrieved["chunks"])
    assert shown_text(events) == answer.text


async def test_off_topic_question_is_refused_before_any_llm_call(stores, embedder) -> None:
    llm = FakeLLM()  # nothing scripted: any call fails the test
    _, answer = await collect(
        make(stores, embedder, llm).ask("ops", "What's a good recipe for banana bread?")
    )
    assert answer.refused and answer.mode == "refused"
    assert "below the threshold" in answer.reason
    assert llm.calls == []
    assert stage_outcomes(answer) == {"coverage": "rejected"}


def without_keywords(llm: FakeLLM) -> list[str]:
    """The calls in order, less the dual-level keyword call started while the plan is written
    (it runs concurrently, so its place in the order is not fixed)."""
    return [t for t in llm.templates_called if t != "keywords"]


async def test_a_plan_of_several_steps_answers_from_its_sub_answers_without_a_pre_check(
    stores, embedder
) -> None:
    # Issue 33: plan → sub-answers → answer, three calls in sequence before the first token;
    # the plan names the dual-level keywords (no keyword call) and the answer prompt's
    # not-covered marker is the check (no pre-check call before it).
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script(
            "sub_answer",
            {"found": True, "answer": "port 8443", "items": []},
            {"found": True, "answer": "port 9090", "items": []},
        )
        .script("answer", "The gateway listens on port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    events, answer = await collect(make(stores, embedder, llm).ask("ops", PLAN_QUESTION))
    # every step found its part, so no judge reads the answer after it
    assert llm.templates_called == ["logic_form", "sub_answer", "sub_answer", "answer"]
    assert answer.text == "The gateway listens on port 8443 [1]."
    assert answer.reason == "answered (logic form)"
    assert answer.citations[0].source == "docs/ports.md"
    assert "pre_check" not in stage_outcomes(answer)
    answer_prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert "port 8443" in answer_prompt  # the sub-answer history reaches the answer prompt
    trace = answer.trace
    assert trace is not None
    assert [s["op"] for s in trace["plan"]["steps"]] == ["retrieve", "retrieve", "output"]
    assert trace["llm"]["calls_by_prompt"]["answer"] == 1
    assert any(isinstance(e, Status) and e.stage == "planning" for e in events)


async def test_a_single_lookup_is_answered_from_dual_level_without_a_plan(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "The gateway listens on port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    events, answer = await collect(make(stores, embedder, llm).ask("ops", PORT_QUESTION))
    # No plan, no sub-answer, no pre-check: keywords → answer → judge.
    assert llm.templates_called == ["keywords", "answer", "judge"]
    assert llm.pending() == {}
    assert not answer.refused and answer.text == "The gateway listens on port 8443 [1]."
    assert answer.citations[0].source == "docs/ports.md"
    stages = stage_outcomes(answer)
    assert "logic_form" not in stages and "pre_check" not in stages
    assert answer.trace is not None and answer.trace["plan"]["planned"] is False
    assert [e.stage for e in events if isinstance(e, Status)] == ["checking", "answering"]
    assert shown_text(events) == answer.text


async def test_a_plan_of_one_lookup_answers_from_dual_level_on_its_keywords(
    stores, embedder
) -> None:
    llm = (
        FakeLLM()
        .script("logic_form", PLAN)
        .script("answer", "The gateway listens on port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer = await collect(make(stores, embedder, llm).ask("ops", PLAN_QUESTION))
    assert llm.templates_called == ["logic_form", "answer", "judge"]
    assert answer.trace is not None and "answered_by" in answer.trace["plan"]
    dual = next(s for s in answer.trace["stages"] if s["name"] == "dual_level")
    assert dual["outcome"] == "ok"


async def test_an_invalid_plan_falls_through_to_dual_level(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("logic_form", {"steps": [{"id": 1, "op": "teleport", "args": {}}]})
        .script("keywords", KEYWORDS)
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 0.9, "completeness": 0.95})
    )
    _, answer = await collect(make(stores, embedder, llm).ask("ops", PLAN_QUESTION))
    assert sorted(llm.templates_called[:2]) == ["keywords", "logic_form"]
    assert llm.templates_called[2:] == ["answer", "judge"]
    stages = stage_outcomes(answer)
    assert stages["logic_form"] == "failed" and stages["dual_level"] == "ok"
    assert answer.reason == "answered (dual-level)" and answer.text == "Port 8443 [1]."
    assert answer.trace is not None
    assert answer.trace["rounds"][0]["faithfulness"] == 0.9


async def test_a_plan_that_gives_way_hands_its_found_sub_answers_to_dual_level(
    stores, embedder
) -> None:
    # Step 1 finds the port; step 2 finds nothing, so the plan gives way. The dual-level answer
    # is written with step 1's sub-answer and the passage it was read from, and that passage
    # stays citable in a widened round.
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script(
            "sub_answer",
            *[
                by_step(
                    listen={
                        "found": True,
                        "answer": "port 8443 (from the ports page)",
                        "items": [],
                    },
                    metrics={"found": False, "answer": "not in the context", "items": []},
                )
            ]
            * 2,
        )
        .script("answer", "Port 8443 [1]; the metrics port is not covered.", "Port 8443 [1].")
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.5},
            {"faithfulness": 1, "completeness": 0.6},
        )
    )
    _, answer = await collect(
        make_narrow(stores, embedder, llm, feedback_rounds=2).ask("ops", PLAN_QUESTION)
    )
    assert stage_outcomes(answer)["plan_steps"] == "failed"
    assert answer.reason == "answered (dual-level)"
    answers = [c for c in llm.calls if c.template == "answer"]
    assert len(answers) == 2
    for call in answers:  # the first round and the widened one
        prompt = call.last_user
        assert "Sub-questions already answered" in prompt
        assert "port 8443 (from the ports page)" in prompt
        assert "not in the context" not in prompt  # only what was found is handed on
        assert "listens on port 8443" in prompt  # the passage the sub-answer read
    assert answer.trace is not None
    plan_steps = next(s for s in answer.trace["stages"] if s["name"] == "plan_steps")
    assert plan_steps["detail"]["handed_on"] == 1


async def test_a_plan_that_fails_at_its_first_step_hands_nothing_on(stores, embedder) -> None:
    dependent = {
        "steps": [
            PLAN["steps"][0],
            {
                "id": 2,
                "op": "retrieve",
                "args": {"subject": "#1", "predicate": "firewall rule", "object": "?r"},
                "question": "Which firewall rule opens #1?",
            },
            {"id": 3, "op": "output", "args": {"of": "#2"}, "question": ""},
        ]
    }
    llm = (
        FakeLLM()
        .script("logic_form", dependent)
        .script("keywords", KEYWORDS)
        .script("sub_answer", {"found": False, "answer": "no", "items": []})
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer = await collect(make(stores, embedder, llm).ask("ops", PLAN_QUESTION))
    answer_prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert "Sub-questions already answered" not in answer_prompt
    assert answer.reason == "answered (dual-level)"
    assert answer.trace is not None
    plan_steps = next(s for s in answer.trace["stages"] if s["name"] == "plan_steps")
    assert "handed_on" not in plan_steps["detail"]


async def test_a_post_check_reads_the_plans_answer_after_it(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("sub_answer", {"found": True, "answer": "8443"}, {"found": True, "answer": "9090"})
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
        .script("postcheck", "yes")
    )
    events, answer = await collect(
        make(stores, embedder, llm, check="post").ask("ops", PLAN_QUESTION)
    )
    assert llm.templates_called == [
        "logic_form",
        "sub_answer",
        "sub_answer",
        "answer",
        "postcheck",
    ]
    assert answer.text == "Port 8443 [1]." and shown_text(events) == answer.text
    assert stage_outcomes(answer)["post_check"] == "passed"


async def test_feedback_widens_the_context_while_the_judge_scores_improve(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "It listens on a port [1].", "It listens on port 8443 [1].")
        .script(
            "judge",
            {"faithfulness": 0.9, "completeness": 0.4},
            {"faithfulness": 0.95, "completeness": 0.9},
        )
    )
    events, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", PORT_QUESTION)
    )
    # The widened round reuses the keywords: no second keyword call.
    assert llm.templates_called == ["keywords", "answer", "judge", "answer", "judge"]
    assert answer.text == "It listens on port 8443 [1]."
    assert shown_text(events) == answer.text
    assert sum(isinstance(e, Retract) for e in events) == 1
    stages = stage_outcomes(answer)
    assert "widen_1" in stages
    assert answer.trace is not None
    assert [r["completeness"] for r in answer.trace["rounds"]] == [0.4, 0.9]


async def test_feedback_stops_when_scores_stall_and_keeps_the_best_round(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "First: port 8443 [1].", "Second: maybe 9090 [1].")
        .script(
            "judge",
            {"faithfulness": 0.7, "completeness": 0.7},
            {"faithfulness": 0.5, "completeness": 0.7},
        )
    )
    events, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", PORT_QUESTION)
    )
    assert llm.templates_called == ["keywords", "answer", "judge", "answer", "judge"]
    assert answer.text == "First: port 8443 [1]."
    assert shown_text(events) == answer.text  # the better first round is shown again


async def test_feedback_ends_at_the_round_limit(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "one [1]", "two [1]", "three [1]")
        .script(
            "judge",
            {"faithfulness": 0.3, "completeness": 0.3},
            {"faithfulness": 0.5, "completeness": 0.5},
            {"faithfulness": 0.7, "completeness": 0.7},
        )
    )
    _, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level", feedback_rounds=3).ask(
            "ops", PORT_QUESTION
        )
    )
    assert llm.templates_called.count("answer") == 3 and llm.pending() == {}
    assert answer.text == "three [1]"
    assert answer.trace is not None and len(answer.trace["rounds"]) == 3


# Two parts, one of which no document holds (as "…and who approves it?" on the demo KB).
APPROVER_QUESTION = "Which port does the Lumen gateway listen on, and who approves opening it?"


async def test_feedback_stops_when_a_wider_round_still_lacks_the_same_part(
    stores, embedder
) -> None:
    # The judge's weaker score creeps up each round, so the soft stop never fires; before the
    # judge named what the context lacks, this ran every round (4 answers, 4 judges) for an
    # approver no document names. Now the part gets one wider round, and the loop stops there.
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script(
            "answer",
            "Port 8443 [1]; the sources do not name who approves it.",
            "Port 8443 [1]. No source names an approver.",
        )
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.5, "missing": "who approves opening it"},
            {"faithfulness": 1, "completeness": 0.6, "missing": "the approver"},
        )
    )
    events, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", APPROVER_QUESTION)
    )
    assert llm.templates_called == ["keywords", "answer", "judge", "answer", "judge"]
    assert llm.pending() == {}
    assert answer.text == "Port 8443 [1]. No source names an approver."
    assert shown_text(events) == answer.text
    assert answer.trace is not None and answer.trace["llm"]["calls"] == 5
    first, second = answer.trace["rounds"]
    assert first["missing"] == "who approves opening it" and first["next"] == "widen"
    assert second["next"] == "stop" and "still lacks" in second["why"]
    assert "widen_1" in stage_outcomes(answer) and "widen_2" not in stage_outcomes(answer)


async def test_feedback_widens_on_when_the_wider_round_found_the_part_it_lacked(
    stores, embedder
) -> None:
    # Round 2 found the rollback's duration round 1 lacked and lacks another part: a part no
    # earlier round named gets its own wider round, which finds it and is accepted. One chunk
    # a round, so the retrieval for each part the judge names finds something new.
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script(
            "answer",
            "Port 8443 [1].",
            "Port 8443 [1]; a rollback takes four minutes [2].",
            "Port 8443 [1]; a rollback takes four minutes [2]; 值班负责人 approves [3].",
        )
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.4, "missing": "how long a rollback takes"},
            {"faithfulness": 1, "completeness": 0.6, "missing": "who approves an emergency fix"},
            {"faithfulness": 1, "completeness": 0.9, "missing": ""},
        )
    )
    question = (
        "Which port does the Lumen gateway use, how long does a rollback take, and who "
        "approves an emergency fix?"
    )
    _, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", question)
    )
    assert llm.templates_called == ["keywords", *["answer", "judge"] * 3]
    assert answer.text.endswith("approves [3].")
    assert answer.trace is not None
    assert [r["next"] for r in answer.trace["rounds"]] == ["widen", "widen", "accept"]


def make_narrow(stores: Any, embedder: USEEmbedder, llm: Any, **options: Any) -> MultiStageAnswerer:
    """One chunk a round (two when widened once): plain widening of the port question reaches
    the gateway's two passages and never the release rule of 部署.md. A wider round is answered
    only for a passage no round held, so a test of the feedback loop needs one round's passages
    to leave some out (with the default budgets the first round holds every passage here)."""
    graph, vectors = stores
    retriever = Retriever(
        embedder=embedder,
        vectors=vectors,
        graph=graph,
        llm=llm,
        options=RetrievalOptions(chunk_top_k=1),
    )
    options = {"keywords_call": "always", "parts": "plan", "sub_answers": "every", **options}
    return MultiStageAnswerer(
        retriever=retriever, embedder=embedder, llm=llm, options=PipelineOptions(**options)
    )


EMERGENCY_QUESTION = (
    "Which port does the Lumen gateway listen on, and who approves an emergency fix?"
)


async def test_a_wider_round_also_retrieves_for_the_part_the_judge_named_as_lacking(
    stores, embedder
) -> None:
    # KGiRAG's feedback steers the next retrieval: the judge's "missing" is searched too (NLP
    # keywords, no LLM call), and what it finds goes into the wider round's context. Before,
    # the wider round widened around the question's keywords only and held ports.md and
    # rollback.md, never 部署.md, which names who approves an emergency fix.
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script(
            "answer",
            "Port 8443 [1]; the sources do not say who approves an emergency fix.",
            "Port 8443 [1]; the on-call lead approves an emergency fix [2].",
        )
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.5, "missing": "who approves an emergency fix"},
            {"faithfulness": 1, "completeness": 0.9, "missing": ""},
        )
    )
    _, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", EMERGENCY_QUESTION)
    )
    assert llm.templates_called == ["keywords", "answer", "judge", "answer", "judge"]
    first, second = [c.last_user for c in llm.calls if c.template == "answer"]
    assert "值班负责人批准" not in first
    assert "值班负责人批准" in second and "8443" in second  # the port's passage stays
    assert answer.trace is not None
    (widen,) = [s for s in answer.trace["stages"] if s["name"] == "widen_1"]
    assert widen["detail"]["lacking_query"] == "who approves an emergency fix"
    assert widen["detail"]["lacking_chunks"] >= 1
    assert "docs/部署.md" in {c["source"] for c in answer.trace["retrieved"]["chunks"]}


async def test_a_wider_round_without_a_lacking_part_retrieves_for_the_question_only(
    stores, embedder
) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "It listens on a port [1].", "It listens on port 8443 [1].")
        .script(
            "judge",
            {"faithfulness": 0.9, "completeness": 0.4},
            {"faithfulness": 0.95, "completeness": 0.9},
        )
    )
    _, answer = await collect(
        make_narrow(stores, embedder, llm, stages="dual_level").ask("ops", EMERGENCY_QUESTION)
    )
    assert answer.trace is not None
    (widen,) = [s for s in answer.trace["stages"] if s["name"] == "widen_1"]
    assert "lacking_query" not in widen["detail"]
    second = [c.last_user for c in llm.calls if c.template == "answer"][1]
    assert "值班负责人批准" not in second


async def test_a_judge_failure_accepts_the_answer(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("keywords", KEYWORDS)
        .script("answer", "Port 8443 [1].")
        .script("judge", LLMError("judge endpoint down"))
    )
    _, answer = await collect(
        make(stores, embedder, llm, stages="dual_level").ask("ops", PORT_QUESTION)
    )
    assert answer.text == "Port 8443 [1]." and not answer.refused
    assert stage_outcomes(answer)["judge"] == "failed"


async def test_a_stage_that_times_out_degrades_to_the_next(stores, embedder) -> None:
    class SlowPlanner(FakeLLM):
        async def chat_json(self, prompt, schema, *, temperature=0.0):  # type: ignore[override]
            if prompt.template == "logic_form":
                await asyncio.sleep(5)
            return await super().chat_json(prompt, schema, temperature=temperature)

    llm = (
        SlowPlanner()
        .script("keywords", KEYWORDS)
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer = await collect(
        make(stores, embedder, llm, stage_timeout=0.3).ask("ops", PLAN_QUESTION)
    )
    assert stage_outcomes(answer)["logic_form"] == "timeout"
    assert answer.text == "Port 8443 [1]."


async def test_the_logic_form_alone_refuses_when_its_plan_fails(stores, embedder) -> None:
    llm = FakeLLM().script("logic_form", {"steps": []})
    _, answer = await collect(
        make(stores, embedder, llm, stages="logic_form").ask("ops", PORT_QUESTION)
    )
    assert answer.refused and llm.templates_called == ["logic_form"]


async def test_a_follow_up_is_rewritten_before_retrieval(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("rewrite_followup", "Which port serves the gateway's Prometheus metrics?")
        .script("keywords", {"high_level": ["metrics"], "low_level": ["Prometheus metrics"]})
        .script("answer", "Metrics are on port 9090 [1].")
    )
    history = (
        ChatMessage("user", PORT_QUESTION),
        ChatMessage("assistant", "The gateway listens on port 8443 [1]."),
    )
    _, answer = await collect(
        make(
            stores,
            embedder,
            llm,
            stages="dual_level",
            feedback_rounds=1,
            short_reply_max_tokens=777,
        ).ask("ops", "and the metrics?", history=history)
    )
    assert llm.templates_called == ["rewrite_followup", "keywords", "answer"]
    assert llm.calls[0].max_tokens == 777  # `llm.short_reply_max_tokens` reaches the rewrite
    assert "8443" in llm.calls[0].last_user  # the thread reached the rewrite prompt
    assert answer.trace is not None
    assert answer.trace["standalone_question"].startswith("Which port serves")
    assert "Prometheus metrics" in llm.calls[-1].last_user
    assert answer.question == "and the metrics?"


async def test_an_llm_failure_before_any_text_falls_back_to_the_evidence(stores, embedder) -> None:
    llm = FakeLLM().script("keywords", KEYWORDS).script("answer", LLMError("endpoint returned 503"))
    events, answer = await collect(
        make(stores, embedder, llm, stages="dual_level").ask("ops", PORT_QUESTION)
    )
    assert answer.mode == "extractive" and "8443" in answer.text
    assert "LLM unavailable" in answer.reason
    assert any(isinstance(e, Status) and e.stage == "fallback" for e in events)
    assert "503" in str(answer.trace)
    assert llm.templates_called == ["keywords", "answer"]  # no judge of an extract


async def test_a_chinese_question_is_answered_in_chinese(stores, embedder) -> None:
    _, answer = await collect(make(stores, embedder).ask("ops", "周五几点以后禁止发布？"))
    assert answer.language == "zh" and "三点" in answer.text
    assert answer.citations[0].source == "docs/部署.md"


_PASSAGE = re.compile(r"^\[(\d+)\] \(.*?\)\n<document>\n(.+)$", re.M)


def number_holding(prompt_text: str, phrase: str) -> int:
    """The number a prompt gives the first passage holding `phrase`."""
    return next(int(n) for n, text in _PASSAGE.findall(prompt_text) if phrase in text)


def by_step(**replies: Any) -> Any:
    """One sub-answer reply for the two lookups of PLAN_TWO_LOOKUPS, chosen by the sub-question
    the prompt asks (`listen` for step 1, `metrics` for step 2). The steps run at the same time,
    so the order of their calls is not the plan's: a reply scripted by order would be read by
    whichever step's retrieval finished first. Script it once per step."""

    def reply(prompt: Any) -> str:
        asked = prompt.messages[-1].content.strip().splitlines()[-1]
        for key, chosen in replies.items():
            if key in asked:
                return chosen(prompt) if callable(chosen) else json.dumps(chosen)
        raise AssertionError(f"no scripted sub-answer for {asked}")

    return reply


def citing(answer: str, phrase: str, *, inside: bool = False, also: int | None = None) -> Any:
    """A sub-answer reply that names, as its source, the step's passage holding `phrase`: in
    "sources" (with `also` beside it), or as a mark inside "answer" (`inside`)."""

    def reply(prompt: Any) -> str:
        n = number_holding(prompt.messages[-1].content, phrase)
        if inside:
            return json.dumps({"found": True, "answer": f"{answer} [{n}]"})
        sources = [f"[{n}]"] if also is None else [f"[{n}]", also]
        return json.dumps({"found": True, "answer": answer, "sources": sources})

    return reply


async def test_the_answer_prompt_shows_each_sub_answer_with_its_sources_numbers(
    stores, embedder
) -> None:
    # A 7B model shown the sub-answers without numbers had to find their sources again in the
    # renumbered context (relay run): each is shown with the numbers the answer's own context
    # gives the passages it was read from, whatever the step numbered them; a number the step's
    # context did not hold (99) is dropped, a mark inside the answer does not reach the prompt.
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script(
            "sub_answer",
            *[
                by_step(
                    listen=citing("port 8443", "listens on port 8443", also=99),
                    metrics=citing("port 9090", "served on port 9090", inside=True),
                )
            ]
            * 2,
        )
        .script("answer", "The gateway listens on port 8443 [1].")
    )
    await collect(make(stores, embedder, llm, feedback_rounds=1).ask("ops", PLAN_QUESTION))
    answer_prompt = next(c for c in llm.calls if c.template == "answer").last_user
    gateway = number_holding(answer_prompt, "listens on port 8443")
    metrics = number_holding(answer_prompt, "served on port 9090")
    assert f"listen on? → port 8443 [{gateway}]\n" in answer_prompt
    assert f"metrics served? → port 9090 [{metrics}]\n" in answer_prompt
    assert "[99]" not in answer_prompt


async def test_a_sub_answer_that_names_no_source_is_shown_with_the_passage_holding_it(
    stores, embedder
) -> None:
    # Old replies and many 7B ones have no "sources": the passage that holds what the
    # sub-answer found stands in; a sub-answer whose finding no passage holds gets no number.
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script(
            "sub_answer",
            *[
                by_step(
                    listen={
                        "found": True,
                        "answer": "port 8443",
                        "items": [{"name": "gateway", "value": "8443"}],
                    },
                    metrics={"found": True, "answer": "on a port the sources do not name"},
                )
            ]
            * 2,
        )
        .script("answer", "The gateway listens on port 8443 [1].")
    )
    await collect(make(stores, embedder, llm, feedback_rounds=1).ask("ops", PLAN_QUESTION))
    answer_prompt = next(c for c in llm.calls if c.template == "answer").last_user
    gateway = number_holding(answer_prompt, "listens on port 8443")
    assert f"→ port 8443 [{gateway}]\n" in answer_prompt
    assert "→ on a port the sources do not name\n" in answer_prompt


def metrics_port_uncovered_in_two_rounds() -> FakeLLM:
    """A plan of two lookups that gives way: the gateway's port is found, the metrics port is
    not; the answer covers part of the question and the judge asks for one wider round."""
    return (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script(
            "sub_answer",
            *[
                by_step(
                    listen=citing("port 8443", "listens on port 8443"),
                    metrics={"found": False, "answer": "not in the context", "items": []},
                )
            ]
            * 2,
        )
        .script("answer", "Port 8443 [1]; the metrics port is not covered.", "Port 8443 [1].")
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.5},
            {"faithfulness": 1, "completeness": 0.6},
        )
    )


async def test_sub_answers_handed_to_dual_level_carry_each_rounds_numbers(stores, embedder) -> None:
    # A plan that gives way hands its sub-answers on; every round numbers its context anew
    # (a widened round re-cuts it), and each shows the sub-answer with that round's number.
    llm = metrics_port_uncovered_in_two_rounds()
    await collect(make_narrow(stores, embedder, llm, feedback_rounds=2).ask("ops", PLAN_QUESTION))
    answers = [c.last_user for c in llm.calls if c.template == "answer"]
    assert len(answers) == 2
    for prompt in answers:
        assert f"→ port 8443 [{number_holding(prompt, 'listens on port 8443')}]\n" in prompt


# --- the sub-questions the plan looked up and found no answer for ----------------------------

UNANSWERED = "Sub-questions looked up while working this out that the sources did not answer"
METRICS_QUESTION = PLAN_TWO_LOOKUPS["steps"][1]["question"]


def raising(error: BaseException) -> Any:
    def reply(prompt: Any) -> str:
        raise error

    return reply


async def test_a_plan_that_gives_way_lists_the_sub_question_it_found_no_answer_for(
    stores, embedder
) -> None:
    # A 7B model shown only the sub-answers found left the gap for itself to notice (relay
    # run): the sub-question whose step read its context and found no answer is listed apart,
    # in every round, so the answer's "which part is not covered" sentence names it. The judge
    # is not shown it: it judges the answer against what it cites.
    llm = metrics_port_uncovered_in_two_rounds()
    _, answer = await collect(
        make_narrow(stores, embedder, llm, feedback_rounds=2).ask("ops", PLAN_QUESTION)
    )
    assert answer.reason == "answered (dual-level)"
    answers = [c.last_user for c in llm.calls if c.template == "answer"]
    assert len(answers) == 2
    for prompt in answers:
        assert UNANSWERED in prompt.replace("\n", " ")
        assert f"\n- {METRICS_QUESTION}\n" in prompt  # the sub-question alone, no answer
        assert "Sub-questions already answered" in prompt  # the found one still is
    for call in llm.calls:
        if call.template == "judge":
            assert UNANSWERED not in call.last_user.replace("\n", " ")
            assert METRICS_QUESTION not in call.last_user
    assert answer.trace is not None
    plan_steps = next(s for s in answer.trace["stages"] if s["name"] == "plan_steps")
    assert plan_steps["detail"]["unanswered"] == 1


class SlowMetrics(FakeLLM):
    """The metrics step's sub-answer never comes in time (the plan's stage times out)."""

    async def chat_json(self, prompt, schema, *, temperature=0.0):  # type: ignore[override]
        if prompt.template == "sub_answer" and "metrics" in prompt.messages[-1].content[-80:]:
            await asyncio.sleep(30)
        return await super().chat_json(prompt, schema, temperature=temperature)


@pytest.mark.parametrize("failure", ["llm_error", "timeout"])
async def test_a_step_that_failed_for_a_technical_reason_is_not_listed_as_unanswered(
    stores, embedder, failure: str
) -> None:
    # A timeout or an LLM error says nothing of the knowledge base: that step is not named as
    # unanswered; the step beside it that read its context and found nothing is.
    metrics = raising(LLMError("endpoint returned 503")) if failure == "llm_error" else {}
    replies = by_step(
        listen={"found": False, "answer": "not in the context", "items": []}, metrics=metrics
    )
    llm = (
        (SlowMetrics() if failure == "timeout" else FakeLLM())
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script("sub_answer", *[replies] * (2 if failure == "llm_error" else 1))
        .script("answer", "Port 8443 [1].")
    )
    _, answer = await collect(
        make(stores, embedder, llm, feedback_rounds=1, stage_timeout=2.0).ask("ops", PLAN_QUESTION)
    )
    assert stage_outcomes(answer)["plan_steps"] == "failed"
    assert answer.reason == "answered (dual-level)"
    steps = answer.trace["plan"]["execution"]["steps"]  # type: ignore[index]
    assert [s["outcome"] for s in steps][:2] == [
        "failed",
        "failed" if failure == "llm_error" else "timeout",
    ]
    prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert f"\n- {PORT_QUESTION}\n" in prompt
    assert METRICS_QUESTION not in prompt


async def test_a_plan_whose_steps_all_answered_lists_nothing_as_unanswered(
    stores, embedder
) -> None:
    # Every step answered: the answer gets the sub-answers, and no list of unanswered
    # sub-questions.
    llm = (
        FakeLLM()
        .script("logic_form", PLAN_TWO_LOOKUPS)
        .script("keywords", KEYWORDS)
        .script(
            "sub_answer",
            *[
                by_step(
                    listen=citing("port 8443", "listens on port 8443"),
                    metrics=citing("port 9090", "served on port 9090"),
                )
            ]
            * 2,
        )
        .script("answer", "Port 8443 [1].")
    )
    _, answer = await collect(
        make(stores, embedder, llm, feedback_rounds=1).ask("ops", PLAN_QUESTION)
    )
    assert answer.reason == "answered (logic form)"
    prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert "Sub-questions already answered" in prompt
    assert UNANSWERED not in prompt.replace("\n", " ")
