"""core/model_output.py: the one reader of model output (the corpus test runs every parser over
real-model replies; these pin the reader's own rules)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from core.model_output import (
    UnreadableReply,
    clean_text_reply,
    is_refusal,
    json_values,
    parse_json_reply,
    read_score,
    read_verdict,
    reasoning_only,
    strip_reasoning,
    without_reasoning,
)


class Scores(BaseModel):
    a: float
    b: float = 0.0


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<think>x</think>answer", "answer"),
        ("<THINK>x</THINK>\n\nanswer", "answer"),
        ("<thinking>x</thinking>a<reasoning>y</reasoning>b", "ab"),
        ("◁think▷x◁/think▷answer", "answer"),
        ("<think>never closed {draft}", ""),
        ("reasoning the template opened</think>answer", "answer"),
        ("a</think>b</think>c", "c"),
        ("no reasoning at all", "no reasoning at all"),
        ("< think >x</ think >answer", "answer"),
    ],
)
def test_strip_reasoning(text: str, visible: str) -> None:
    assert strip_reasoning(text) == visible


def test_reasoning_only_tells_a_cut_reply_from_an_empty_one() -> None:
    assert reasoning_only("<think>cut here")
    assert not reasoning_only("")
    assert not reasoning_only("<think>x</think>yes")


async def _through_filter(parts: list[str]) -> str:
    async def deltas() -> AsyncIterator[str]:
        for part in parts:
            yield part

    return "".join([d async for d in without_reasoning(deltas())])


@pytest.mark.parametrize(
    "text",
    [
        "<think>draft {x}</think>\n\nFinal answer [1].",
        "Plain answer with a < b and <br> tags.",
        "<thinking>a</thinking>中文回答。",
        "Answer first.<think>late block</think> Then more.",
        "<think>never closed",
    ],
)
async def test_the_stream_filter_matches_the_full_text_cleaner_at_every_split(text: str) -> None:
    for cut in range(len(text) + 1):
        assert await _through_filter([text[:cut], text[cut:]]) == strip_reasoning(text), cut
    assert await _through_filter(list(text)) == strip_reasoning(text)


async def test_the_stream_filter_yields_text_before_the_reply_ends() -> None:
    seen: list[str] = []

    async def deltas() -> AsyncIterator[str]:
        for part in ["<think>x</think>", "Hello ", "world"]:
            yield part
            if part == "Hello ":
                assert seen == ["Hello "]  # streamed as it arrives, not buffered

    async for delta in without_reasoning(deltas()):
        seen.append(delta)
    assert "".join(seen) == "Hello world"


def test_the_last_object_that_fits_wins_and_nested_ones_are_not_candidates() -> None:
    text = '{"a": 0.1} then {"a": 0.9, "nested": {"a": 0.5}} and {"x": 1}'
    model, value = parse_json_reply(text, Scores)
    assert model.a == 0.9 and value["nested"] == {"a": 0.5}
    assert json_values(text) == [{"a": 0.1}, {"a": 0.9, "nested": {"a": 0.5}}, {"x": 1}]


def test_unreadable_replies_say_why() -> None:
    with pytest.raises(UnreadableReply, match="empty"):
        parse_json_reply("  ", Scores)
    with pytest.raises(UnreadableReply, match="no JSON object"):
        parse_json_reply("I think a is high.", Scores)
    with pytest.raises(UnreadableReply, match="does not match the schema"):
        parse_json_reply('{"b": 1}', Scores)
    with pytest.raises(UnreadableReply, match="only reasoning"):
        parse_json_reply('<think>{"a": 1}', Scores)


def test_a_truncated_object_is_not_completed_by_guessing() -> None:
    with pytest.raises(UnreadableReply):
        parse_json_reply('{"a": 0.9, "b": 0.', Scores)


def test_full_width_punctuation_inside_strings_is_kept() -> None:
    class Reason(BaseModel):
        reason: str

    model, _ = parse_json_reply("｛“reason”：“有依据，但缺少端口：5432。”｝", Reason)
    assert model.reason == "有依据，但缺少端口：5432。"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("youth", None),
        ("yesterday it was fine", None),
        ("Nothing is missing.", None),
        ("是否", None),
        ("是 或 否", None),
        ("Yes/No", None),
        ("no / yes", None),
        ("是的", True),
        ("否定", False),
    ],
)
def test_verdict_words_need_word_boundaries_and_echoes_say_nothing(
    text: str, verdict: bool | None
) -> None:
    assert read_verdict(text) is verdict


def test_scores_are_read_on_the_named_scale() -> None:
    assert read_score("4", scale=5) == 0.8
    assert read_score(4, scale=10) == 0.4
    assert read_score("7 out of 10") == 0.7
    with pytest.raises(ValueError, match="outside the scale 0 to 1"):
        read_score(4)
    with pytest.raises(ValueError):
        read_score("high")


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("I cannot help with that.", True),
        ("I can't answer that.", True),
        ("I’m sorry, but that is not something I can do.", True),
        ("Sorry, I don't know.", True),
        ("As an AI language model, I cannot", True),
        ("Unfortunately, I am unable to rewrite this.", True),
        ("很抱歉，我不能回答。", True),
        ("我无法回答这个问题。", True),
        ("", True),
        ("<think>only thinking", True),
        ("What is the Redis memory limit?", False),
        ("I/O errors: what does the runbook say?", False),
        ("Cannot connect to Redis: what now?", False),
    ],
)
def test_refusals_and_empty_replies(text: str, refused: bool) -> None:
    assert is_refusal(text) is refused


def test_clean_text_reply_drops_fences_and_reasoning() -> None:
    assert clean_text_reply("<think>x</think>\n```\nWhat is X?\n```") == "What is X?"


def test_prose_braces_and_foreign_objects_never_win() -> None:
    class Reply(BaseModel):  # every field has a default: any object would validate
        found: bool = True
        answer: str = ""

    text = '{"found": true, "answer": "5432"}\nSee {source} and {"source": "[2]"}.'
    model, _ = parse_json_reply(text, Reply)
    assert model.answer == "5432"
    # Braces in prose are not repaired into objects; near-JSON with a quoted key is.
    assert json_values("Use {name} as a placeholder, and [1].") == [[1]]
    assert json_values("{'a': 1,}") == [{"a": 1}]


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        (
            "Sure, here is what could be going on.\nThe spool is full [1].\nLet me know if you "
            "need more help!",
            "The spool is full [1].",
        ),
        (
            "好的，以下是步骤：\n执行 patronictl pause [2]。\n希望对你有帮助。",
            "执行 patronictl pause [2]。",
        ),
        ("Certainly!", "Certainly!"),  # nothing else: the reply stays whole
        ("Surely the spool is full [1].", "Surely the spool is full [1]."),  # a word, not "sure"
        ("The answer [1].\nHope this helps [2].", "The answer [1].\nHope this helps [2]."),
    ],
)
def test_a_models_pleasantries_around_an_answer_are_left_out(reply: str, shown: str) -> None:
    from core.model_output import without_pleasantries

    assert without_pleasantries(reply) == shown
