"""Pre-check, post-check and reading a yes/no verdict (core/reason/verify.py)."""

from __future__ import annotations

import pytest

from core.errors import LLMError
from core.reason.verify import VERDICT_MAX_TOKENS, parse_verdict, postcheck, precheck
from tests.fakes.fake_llm import FakeLLM

YES = [
    "yes",
    "Yes",
    "YES",
    "Yes.",
    "yes!",
    " yes \n",
    "**Yes**",
    "*yes*",
    "`yes`",
    '"Yes"',
    "Yes, the context lists the port.",
    "Answer: yes",
    "**Answer**: Yes",
    "Verdict - yes",
    "Final answer: YES",
    "True",
    "supported",
    "Y",
    "ok",
    "Based on the context, yes.",
    '{"verdict": "yes"}',
    '{"supported": true}',
    "<think>the context says 8443, so yes</think>Yes",
    "是",
    "是的",
    "是。",
    "**是**",
    "答：是",
    "回答：是的，上下文给出了端口。",
    "结论：可以",
    "可以回答",
    "能",
    "支持",
    "有",
    "足够",
    "ＹＥＳ",
]
NO = [
    "no",
    "No",
    "No.",
    "**No**",
    "NO!",
    "No, the context does not mention it.",
    "Answer: no",
    "false",
    "Not enough information.",
    "Cannot answer from this context.",
    "can't tell",
    "insufficient",
    "unsupported",
    "N",
    "The context does not cover it, so no.",
    '{"verdict": "no"}',
    '{"supported": false}',
    "否",
    "否。",
    "答：否",
    "**否**",
    "不能",
    "不能回答",
    "不可以",
    "不支持",
    "不足以回答",
    "无法回答",
    "没有",
    "不",
    "不是",
    "结论：不能",
]
UNCLEAR = [
    "",
    "   ",
    "maybe",
    "I am not sure whether yes or no.",
    "The context mentions ports.",
    "***",
    "可能吧",
    '{"foo": 1}',
    "[]",
]


@pytest.mark.parametrize("text", YES)
def test_yes(text: str) -> None:
    assert parse_verdict(text) is True


@pytest.mark.parametrize("text", NO)
def test_no(text: str) -> None:
    assert parse_verdict(text) is False


@pytest.mark.parametrize("text", UNCLEAR)
def test_neither(text: str) -> None:
    assert parse_verdict(text) is None


async def test_precheck_passes_on_yes_with_one_short_call() -> None:
    llm = FakeLLM().script("precheck", "Yes.")
    verdict = await precheck(llm, "Which port?", "[1] (a.md)\nPort 8443.", "en")
    assert verdict.passed and verdict.raw == "Yes."
    assert [(c.kind, c.template) for c in llm.calls] == [("chat", "precheck")]
    user = llm.calls[0].last_user
    assert "[1] (a.md)\nPort 8443." in user and '"Which port?"' in user
    # Room for a reasoning model to think before its one word (a 32-token cap cut it off).
    assert VERDICT_MAX_TOKENS >= 512


async def test_precheck_shows_a_plans_sub_answers_after_the_context() -> None:
    llm = FakeLLM().script("precheck", "yes")
    steps = [{"question": "Which port?", "answer": "8443", "sources": [1]}]
    await precheck(llm, "Which port and who owns it?", "[1] (a.md)\nPort 8443.", "en", steps=steps)
    user = llm.calls[0].last_user
    assert "[1] (a.md)\nPort 8443.\n\nSub-answers:\n- Which port? → 8443 [1]\n" in user


async def test_precheck_fails_on_no_and_on_an_unclear_reply() -> None:
    llm = FakeLLM().script("precheck", "否", "Well, it depends.")
    assert not (await precheck(llm, "端口？", "ctx", "zh")).passed
    unclear = await precheck(llm, "端口？", "ctx", "zh")
    assert not unclear.passed and unclear.raw == "Well, it depends."
    assert "是 或 否" in llm.calls[0].prompt.messages[0].content  # the Chinese prompt


async def test_postcheck_reads_the_answer_too() -> None:
    llm = FakeLLM().script("postcheck", "**No**", "yes")
    rejected = await postcheck(llm, "Which port?", "Port 8443.", "Port 9090 [1].", "en")
    assert not rejected.passed
    assert '"Port 9090 [1]."' in llm.calls[0].last_user
    assert (await postcheck(llm, "Which port?", "Port 8443.", "Port 8443 [1].", "en")).passed
    assert llm.templates_called == ["postcheck", "postcheck"]


async def test_an_llm_failure_is_raised_for_the_caller_to_record() -> None:
    llm = FakeLLM().script("precheck", LLMError("timeout"))
    with pytest.raises(LLMError):
        await precheck(llm, "q", "ctx", "en")


async def test_a_reasoning_model_gets_room_to_think_before_its_verdict() -> None:
    reply = (
        "<think>\nThe context names the owner in [1] and the port in [2]. Is that enough? "
        "At first I thought no. Wait — yes, both are there.\n</think>\n\nYes"
    )
    llm = FakeLLM().script("precheck", reply, "<think>yes, the owner is named... but the port")
    verdict = await precheck(llm, "Who owns it and on which port?", "ctx", "en", max_tokens=2048)
    assert verdict.passed and llm.calls[0].max_tokens == 2048
    # Cut off inside its thinking: no verdict, whatever the draft said.
    assert not (await precheck(llm, "Who owns it?", "ctx", "en")).passed
    assert llm.calls[1].max_tokens == VERDICT_MAX_TOKENS
