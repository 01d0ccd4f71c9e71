from __future__ import annotations

import pytest

import prompts
from prompts import PromptError, render


def test_renders_system_and_user_messages() -> None:
    prompt = render(
        "answer",
        "en",
        sources=[{"n": 1, "label": "a.md", "text": "Port 8443."}],
        question='"Which port?"',
        not_covered="NOT_COVERED",
    )
    assert prompt.template == "answer"
    assert [m.role for m in prompt.messages] == ["system", "user"]
    assert "[1] (a.md)" in prompt.messages[1].content
    assert prompt.messages[1].content.endswith('The question, as a JSON string:\n"Which port?"')


def test_a_missing_variable_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(PromptError, match=r"not_covered|question"):
        render("answer", "en", sources=[])


def test_a_missing_template_is_an_error() -> None:
    with pytest.raises(PromptError, match="no_such_prompt"):
        render("no_such_prompt", "en")


def test_an_unknown_language_is_an_error() -> None:
    with pytest.raises(PromptError, match="language"):
        render("ping", "fr")


def test_no_autoescape() -> None:
    prompt = render("answer", "en", sources=[], question="is <b>x</b> & y?", not_covered="-")
    assert "<b>x</b> & y?" in prompt.messages[-1].content


def test_every_prompt_exists_in_both_languages() -> None:
    names = {name.split(".")[0] for name in prompts.available()}
    for name in names:
        for lang in prompts.LANGUAGES:
            assert f"{name}.{lang}.j2" in prompts.available(), f"{name} lacks {lang}"


def test_continued_conversation_keeps_history_and_names_the_new_template() -> None:
    first = render("ping", "en")
    follow = render("json_repair", "en", error="not JSON", schema="{}")
    combined = first.continued("pong?", follow)
    assert combined.template == "json_repair"
    assert [m.role for m in combined.messages] == ["user", "assistant", "user"]
    assert combined.messages[1].content == "pong?"
