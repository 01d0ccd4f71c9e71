# ruff: noqa: F811 (the shared fixtures are imported, then requested by name)
"""The lean model path (issue 33, items 2 and 4): per path, the model calls, their order, and
which of them come before the first text shown. At most 3 calls in sequence before the first
token on every path; a single lookup in its passages' language answers in 2 calls (answer,
judge); an uncovered question is refused in at most 2 when the model writes the marker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.answer.events import Answer, AnswerEvent, Delta, Final, Retract
from core.answer.pipeline import MAX_PARTS
from core.models import Prompt
from tests.core.answer import test_pipeline
from tests.core.answer.test_pipeline import (
    PLAN_QUESTION,
    PLAN_TWO_LOOKUPS,
    PORT_QUESTION,
    embedder,  # noqa: F401 (fixture)
    stores,  # noqa: F401 (fixture)
)
from tests.fakes.fake_llm import FakeLLM

pytestmark = pytest.mark.asyncio(loop_scope="module")
UNCOVERED = "Which TLS cipher suites does the Lumen gateway accept?"
# Two lookups in two documents (ports.md, rollback.md) that only the output step reads.
TWO_DOCUMENTS_PLAN = {
    "steps": [
        PLAN_TWO_LOOKUPS["steps"][0],
        {
            "id": 2,
            "op": "retrieve",
            "args": {"subject": "rollback", "predicate": "takes how long", "object": "?t"},
            "question": "How long does a rollback of the gateway take?",
        },
        {"id": 3, "op": "output", "args": {"of": ["#1", "#2"]}, "question": ""},
    ]
}


async def run(
    llm: FakeLLM, events: AsyncIterator[AnswerEvent]
) -> tuple[list[AnswerEvent], Answer, list[str]]:
    """The events, the answer, and the templates called before the first text was shown."""
    seen: list[AnswerEvent] = []
    before: list[str] | None = None
    async for event in events:
        if isinstance(event, Delta) and before is None:
            before = list(llm.templates_called)
        seen.append(event)
    final = seen[-1]
    assert isinstance(final, Final)
    return seen, final.answer, before if before is not None else list(llm.templates_called)


# The lean defaults: no keywords call for a question in its passages' language, no plan for a
# question that only asks several things, no sub-answer for a lookup no later step reads.
LEAN = {"keywords_call": "across_languages", "parts": "retrieve", "sub_answers": "read"}


def make(stores, embedder, llm, **options):  # type: ignore[no-untyped-def]
    """The pipeline tests' answerer with the lean defaults (LEAN)."""
    return test_pipeline.make(stores, embedder, llm, **{**LEAN, **options})


def make_narrow(stores, embedder, llm, **options):  # type: ignore[no-untyped-def]
    return test_pipeline.make_narrow(stores, embedder, llm, **{**LEAN, **options})


async def test_a_single_lookup_makes_two_calls_before_its_first_token_three_in_all(
    stores, embedder
) -> None:
    llm = (
        FakeLLM()
        .script("answer", "The gateway listens on port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer, before = await run(llm, make(stores, embedder, llm).ask("ops", PORT_QUESTION))
    assert before == ["answer"]
    assert llm.templates_called == ["answer", "judge"]  # the judge after the text
    assert not answer.refused


async def test_a_two_part_question_makes_one_call_before_its_first_token_and_no_plan(
    stores, embedder
) -> None:
    # It only asks two things: no part needs a value the other finds, so no plan. Each part
    # is retrieved for, and one answer reads them; no call checked the parts, so the judge
    # reads the answer after it.
    llm = (
        FakeLLM()
        .script("answer", "Port 8443 [1], metrics on 9090 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer, before = await run(llm, make(stores, embedder, llm).ask("ops", PLAN_QUESTION))
    assert before == ["answer"]
    assert llm.templates_called == ["answer", "judge"]
    assert answer.reason == "answered (dual-level)"
    assert answer.trace is not None
    assert answer.trace["plan"]["planned"] is False
    assert len(answer.trace["plan"]["parts"]) == 2
    assert "parts" in {s["name"] for s in answer.trace["stages"]}


async def test_each_part_of_a_two_part_question_keeps_its_best_passage_within_the_budget(
    stores, embedder
) -> None:
    # Two parts in two documents: the answer's budget (one token here) keeps the whole
    # question's matched document only; each part's best passage stands first beside it.
    question = "Which port does the gateway use, and how long does a rollback take?"
    prompts = {}
    for parts in ("retrieve", "plan"):
        llm = FakeLLM().script("answer", "Port 8443 [1]; about four minutes [2].")
        llm.script("judge", {"faithfulness": 1, "completeness": 1})
        if parts == "plan":  # the plan of the same two lookups, neither sub-answered
            llm.script("logic_form", TWO_DOCUMENTS_PLAN)
        answerer = make(stores, embedder, llm, answer_chunk_budget=1, parts=parts)
        await run(llm, answerer.ask("ops", question))
        prompt = next(c for c in llm.calls if c.template == "answer").last_user
        prompts[parts] = prompt.split("Knowledge-graph facts")[0]  # a fact names its file too
    for sources in prompts.values():
        assert "(docs/ports.md" in sources and "(docs/rollback.md" in sources


async def test_a_lookup_a_later_step_reads_still_gets_its_sub_answer(stores, embedder) -> None:
    # Step 2 looks up what step 1 found, so step 1's value is needed before step 2 can run:
    # plan → sub-answer → answer, three calls in sequence; step 2, which only the output step
    # reads, is answered by the answer call itself.
    plan = {
        "steps": [
            {
                "id": 1,
                "op": "retrieve",
                "args": {"subject": "Lumen gateway", "predicate": "metrics", "object": "?m"},
                "question": "What serves the Lumen gateway's metrics?",
            },
            {
                "id": 2,
                "op": "retrieve",
                "args": {"subject": "#1", "predicate": "port", "object": "?p"},
                "question": "On which port does #1 serve?",
            },
            {"id": 3, "op": "output", "args": {"of": "#2"}, "question": ""},
        ]
    }
    llm = (
        FakeLLM()
        .script("logic_form", plan)
        .script("sub_answer", {"found": True, "answer": "Prometheus metrics", "sources": [1]})
        .script("answer", "Metrics are served on port 9090 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    answerer = make(stores, embedder, llm, parts="plan")
    _, answer, before = await run(llm, answerer.ask("ops", PLAN_QUESTION))
    assert before == ["logic_form", "sub_answer", "answer"]
    assert llm.templates_called == ["logic_form", "sub_answer", "answer", "judge"]
    assert answer.trace is not None
    steps = answer.trace["plan"]["execution"]["steps"]
    assert [s.get("asked") for s in steps[:2]] == [None, False]
    answer_prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert "Prometheus metrics" in answer_prompt  # step 1's sub-answer is shown


async def test_an_uncovered_question_is_refused_in_two_calls(stores, embedder) -> None:
    llm = FakeLLM().script("answer", "NOT_COVERED")
    events, answer, _ = await run(llm, make(stores, embedder, llm).ask("ops", UNCOVERED))
    assert llm.templates_called == ["answer"]
    assert answer.refused and not any(isinstance(e, Delta) for e in events)


async def test_a_side_answer_the_judge_finds_answers_nothing_is_a_refusal(stores, embedder) -> None:
    # The model wrote a related fact and a disclaimer; the judge finds the whole ask missing,
    # and retrieval for it finds nothing the first round did not hold: a refusal, not an
    # answer with caveats (the streamed text is withdrawn).
    llm = (
        FakeLLM()
        .script("answer", "The gateway listens on port 8443 [1]; its ciphers are not covered.")
        .script("judge", {"faithfulness": 1, "completeness": 0, "missing": "the cipher suites"})
    )
    events, answer, before = await run(llm, make(stores, embedder, llm).ask("ops", UNCOVERED))
    assert before == ["answer"]
    assert llm.templates_called == ["answer", "judge"]
    assert answer.refused and answer.mode == "refused"
    assert isinstance(events[-2], Retract)
    assert answer.trace is not None and "nothing new" in answer.trace["rounds"][0]["why"]


async def test_chatter_the_screening_overturns_costs_one_call(stores, embedder) -> None:
    # The first call (the answer: no keywords call for a question in its passages' language)
    # runs beside the gate's screening; the verdict refuses, and nothing of it is shown.
    verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def overturned_while_answering(prompt: Prompt) -> str:
        # the verdict comes while the answer call is in flight, however long retrieval took
        verdict.set_result(False)
        return "The gateway listens on port 8443 [1]."

    llm = FakeLLM().script("answer", overturned_while_answering)
    events, answer, _ = await run(
        llm, make(stores, embedder, llm).ask("ops", PORT_QUESTION, screening=verdict)
    )
    assert llm.templates_called == ["answer"]
    assert answer.refused and not any(isinstance(e, Delta) for e in events)
    assert "screening" in answer.reason


async def test_a_deferred_message_the_screening_overturns_costs_no_answer_call(
    stores, embedder
) -> None:
    # The gate's rule left it to the model: the doubtful message's answer waits for the
    # screening instead of running beside it, and the screening calls it chatter.
    llm = FakeLLM().script("answer", "The gateway listens on port 8443 [1].")
    verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    # long after retrieval: a call beside the screening would have been made by then
    asyncio.get_running_loop().call_later(1.0, verdict.set_result, False)
    answerer = make(stores, embedder, llm)
    events, answer, _ = await run(
        llm, answerer.ask("ops", PORT_QUESTION, deferred=True, screening=verdict)
    )
    assert llm.templates_called == []
    assert answer.refused and not any(isinstance(e, Delta) for e in events)


async def test_a_deferred_message_the_screening_lets_through_is_answered_after_it(
    stores, embedder
) -> None:
    order: list[str] = []
    verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def answered(prompt: Prompt) -> str:
        order.append("answer" if verdict.done() else "answer before the verdict")
        return "Port 8443 [1]."

    llm = (
        FakeLLM().script("answer", answered).script("judge", {"faithfulness": 1, "completeness": 1})
    )
    asyncio.get_running_loop().call_later(1.0, verdict.set_result, True)  # after retrieval
    answerer = make(stores, embedder, llm)
    _, answer, _ = await run(
        llm, answerer.ask("ops", PORT_QUESTION, deferred=True, screening=verdict)
    )
    assert order == ["answer"] and not answer.refused


async def test_screened_through_the_answer_goes_on_with_no_call_more(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.05, verdict.set_result, True)
    _, answer, before = await run(
        llm, make(stores, embedder, llm).ask("ops", PORT_QUESTION, screening=verdict)
    )
    assert before == ["answer"] and not answer.refused


async def test_a_judge_that_widens_answers_again_when_the_missing_part_is_found(
    stores, embedder
) -> None:
    llm = (
        FakeLLM()
        .script("answer", "Port 8443 [1].", "Port 8443 [1]; a rollback takes four minutes [2].")
        .script(
            "judge",
            {"faithfulness": 1, "completeness": 0.5, "missing": "how long a rollback takes"},
            {"faithfulness": 1, "completeness": 1},
        )
    )
    question = "Which port does the Lumen gateway listen on when a rollback runs?"
    _, answer, before = await run(llm, make_narrow(stores, embedder, llm).ask("ops", question))
    assert before == ["answer"]
    assert llm.templates_called == ["answer", "judge", "answer", "judge"]
    assert answer.text.endswith("four minutes [2].")
    assert answer.trace is not None
    assert [r["next"] for r in answer.trace["rounds"]] == ["widen", "accept"]


async def test_a_judge_whose_missing_part_finds_nothing_new_stops_at_once(stores, embedder) -> None:
    # Part of the question is answered; retrieval for the part the judge names finds only
    # passages the first round held: the answer stands, with no second answer call.
    llm = (
        FakeLLM()
        .script("answer", "Port 8443 [1]; the sources do not give the metrics port.")
        .script("judge", {"faithfulness": 1, "completeness": 0.5, "missing": "the metrics port"})
    )
    question = "Which ports does the Lumen gateway use for traffic and for its metrics?"
    _, answer, before = await run(
        llm, make(stores, embedder, llm, stages="dual_level").ask("ops", question)
    )
    assert before == ["answer"]
    assert llm.templates_called == ["answer", "judge"]
    assert not answer.refused and answer.text.startswith("Port 8443 [1]")
    assert answer.trace is not None
    assert "nothing new" in answer.trace["rounds"][0]["why"]


async def answer_prompt(stores, embedder, budget: int) -> tuple[str, Answer]:
    llm = (
        FakeLLM()
        .script("answer", "The gateway listens on port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    answerer = make(stores, embedder, llm, answer_chunk_budget=budget)
    _, answer, _ = await run(llm, answerer.ask("ops", PORT_QUESTION))
    return next(c for c in llm.calls if c.template == "answer").last_user, answer


async def test_a_single_lookups_answer_reads_the_matched_document_not_every_passage(
    stores, embedder
) -> None:
    # issue 33, item 3: the answer prompt held every passage of a 12k-token budget; it reads
    # the matched document first and others only as they fit its smaller budget
    # (core.retrieve.focus). A budget of one token leaves the best-ranked passage alone.
    wide, _ = await answer_prompt(stores, embedder, 100_000)
    narrow, answer = await answer_prompt(stores, embedder, 1)
    assert "rollback.md" in wide  # the retrieval found a sibling passage
    assert "ports.md" in narrow and "rollback.md" not in narrow and "部署.md" not in narrow
    assert not answer.refused


async def test_a_question_in_another_language_than_its_passages_asks_for_their_keywords(
    stores, embedder
) -> None:
    # issue 33, item 3: a Chinese question over English passages searched with Chinese words
    # only. Its own words find English passages: one keywords call, asked for English keywords
    # too, and the retrieval runs again on both.
    llm = (
        FakeLLM()
        .script("keywords", {"high_level": ["network ports"], "low_level": ["Lumen gateway"]})
        .script("answer", "Lumen 网关监听 8443 端口 [1]。")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    _, answer, before = await run(
        llm, make(stores, embedder, llm).ask("ops", "Lumen gateway 监听哪个端口？")
    )
    assert before == ["keywords", "answer"]
    keywords_prompt = llm.calls[0].prompt.messages[0].content
    assert "知识库是用英文写的" in keywords_prompt
    assert answer.trace is not None
    assert answer.trace["retrieved"]["keywords"]["low"][0] == "Lumen gateway"
    assert not answer.refused


async def test_a_planned_answer_reads_its_steps_sources_and_the_matched_document_only(
    stores, embedder
) -> None:
    # The planned path merged every passage of the steps' and the dual-level retrievals (47k
    # characters on a Patroni question in the relay run); the sub-answers' sources stay, the
    # rest is cut to the answer's budget like a single lookup's.
    def llm() -> FakeLLM:
        return (
            FakeLLM()
            .script("logic_form", PLAN_TWO_LOOKUPS)
            .script(
                "sub_answer",
                {"found": True, "answer": "8443", "sources": [1]},
                {"found": True, "answer": "9090", "sources": [1]},
            )
            .script("answer", "Port 8443 [1], metrics on 9090 [1].")
            .script("judge", {"faithfulness": 1, "completeness": 1})
        )

    prompts = []
    for budget in (100_000, 1):
        fake = llm()
        # every lookup sub-answered, so that the sources the sub-answers name are what stays
        answerer = make(
            stores, embedder, fake, answer_chunk_budget=budget, parts="plan", sub_answers="every"
        )
        await run(fake, answerer.ask("ops", PLAN_QUESTION))
        prompts.append(next(c for c in fake.calls if c.template == "answer").last_user)
    wide, narrow = prompts
    assert "rollback.md" in wide
    assert "ports.md" in narrow and "rollback.md" not in narrow


@pytest.mark.parametrize("named", [True, False])
async def test_keywords_the_screening_named_spare_the_keywords_call(
    stores, embedder, named: bool
) -> None:
    # The gate's screening named the English keywords of a Chinese question over English
    # passages: the answer retrieves on them, one call fewer before its first token. When it
    # named none, the keywords call stands in.
    llm = FakeLLM()
    if not named:
        llm.script("keywords", {"high_level": ["network ports"], "low_level": ["Lumen gateway"]})
    llm.script("answer", "Lumen 网关监听 8443 端口 [1]。")
    llm.script("judge", {"faithfulness": 1, "completeness": 1})
    keywords: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    keywords.set_result((("network ports",), ("Lumen gateway",)) if named else None)
    asked = make(stores, embedder, llm).ask(
        "ops", "Lumen gateway 监听哪个端口？", screened_keywords=keywords
    )
    _, answer, before = await run(llm, asked)
    assert before == (["answer"] if named else ["keywords", "answer"])
    assert answer.trace is not None
    assert answer.trace["retrieved"]["keywords"]["low"][0] == "Lumen gateway"
    stage = next(s for s in answer.trace["stages"] if s["name"] == "keywords")
    assert ("screening" in stage["detail"].get("from", "")) is named
    assert not answer.refused


async def test_a_message_of_many_asks_retrieves_for_a_few_of_them(stores, embedder) -> None:
    llm = (
        FakeLLM()
        .script("answer", "Port 8443 [1].")
        .script("judge", {"faithfulness": 1, "completeness": 1})
    )
    question = " ".join(f"Which port does service {i} use?" for i in range(60))
    _, answer, _ = await run(llm, make(stores, embedder, llm).ask("ops", question))
    assert answer.trace is not None
    assert len(answer.trace["plan"]["parts"]) == MAX_PARTS
    stage = next(s for s in answer.trace["stages"] if s["name"] == "parts")
    assert stage["detail"]["parts"] == MAX_PARTS


async def test_a_question_across_languages_the_screening_refuses_costs_no_answer_call(
    stores, embedder
) -> None:
    # The answer waited for the screening's keywords; the screening refused the message, so
    # neither the keywords call nor the answer is made.
    llm = FakeLLM()  # unscripted: any call fails the test
    loop = asyncio.get_running_loop()
    verdict: asyncio.Future[bool] = loop.create_future()
    keywords: asyncio.Future[object] = loop.create_future()
    loop.call_later(0.05, verdict.set_result, False)
    loop.call_later(0.05, keywords.set_result, None)
    events, answer, _ = await run(
        llm,
        make(stores, embedder, llm).ask(
            "ops", "Lumen gateway 监听哪个端口？", screening=verdict, screened_keywords=keywords
        ),
    )
    assert llm.calls == []
    assert answer.refused and "screening" in answer.reason
    assert not any(isinstance(e, Delta) for e in events)


@pytest.mark.parametrize("named", [True, False])
async def test_keywords_the_screening_named_retrieve_a_question_in_the_kbs_own_language(
    stores, embedder, named: bool
) -> None:
    # A question in its passages' language that describes a task without the command that does
    # it: its own words find the gateway's ports first. The screening names the documents'
    # words for it, and the answer, which waits for them, reads the runbook that answers.
    # With a budget of one token the answer reads the best-ranked passage alone.
    question = "gateway broke after friday's push. how to revert?"
    llm = FakeLLM()
    llm.script("answer", "Run `deployctl rollback --to previous` [1].")
    llm.script("judge", {"faithfulness": 1, "completeness": 1})
    keywords: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    keywords.set_result((("rollback",), ("deployctl rollback",)) if named else None)
    asked = make(stores, embedder, llm, answer_chunk_budget=1).ask(
        "ops", question, screened_keywords=keywords
    )
    _, answer, before = await run(llm, asked)
    assert before == ["answer"]  # no keywords call of its own, named or not
    prompt = next(c for c in llm.calls if c.template == "answer").last_user
    assert ("rollback.md" in prompt) is named
    assert answer.trace is not None
    low = answer.trace["retrieved"]["keywords"]["low"]
    assert ("deployctl rollback" in low) is named


async def test_a_question_in_its_passages_language_need_not_wait_for_the_screening(
    stores, embedder
) -> None:
    # screened_keywords_own_language off ([gate] screening_keywords = "across_languages"): the
    # answer starts on the question's own words, whatever the screening still has to say.
    llm = FakeLLM()
    llm.script("answer", "Port 8443 [1].")
    llm.script("judge", {"faithfulness": 1, "completeness": 1})
    never: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    asked = make(stores, embedder, llm, screened_keywords_own_language=False).ask(
        "ops", PORT_QUESTION, screened_keywords=never
    )
    _, answer, before = await asyncio.wait_for(run(llm, asked), timeout=30)
    assert before == ["answer"] and not answer.refused
    assert answer.trace is not None
    assert not any(s["name"] == "keywords" for s in answer.trace["stages"])
