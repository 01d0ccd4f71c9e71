"""The reasoning prompts exist in both languages and render with their callers' variables."""

from __future__ import annotations

from typing import Any

import pytest

import prompts

VARIABLES: dict[str, dict[str, Any]] = {
    "logic_form": {"question": "Q?", "max_steps": 12},
    "sub_answer": {
        "question": "Q?",
        "context": "[1] (a.md)\nText.",
        "steps": [{"question": "q1", "answer": "a1"}],
    },
    "precheck": {"question": "Q?", "context": "[1] (a.md)\nText.", "steps": []},
    "postcheck": {"question": "Q?", "context": "[1] (a.md)\nText.", "answer": "A."},
    "judge": {"question": "Q?", "context": "[1] (a.md)\nText.", "answer": "A."},
    "rewrite_followup": {
        "question": "and it?",
        "turns": [{"role": "user", "text": "How big is Orion?"}],
    },
}


@pytest.mark.parametrize("language", prompts.LANGUAGES)
@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_reasoning_prompt_renders(name: str, language: str) -> None:
    assert f"{name}.{language}.j2" in prompts.available()
    prompt = prompts.render(name, language, **VARIABLES[name])
    assert prompt.template == name
    assert [m.role for m in prompt.messages] == ["system", "user"]
    # the question as the template quotes it: one JSON string literal
    assert '"Q?"' in prompt.messages[1].content or '"and it?"' in prompt.messages[1].content


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_reasoning_prompt_needs_its_variables(name: str) -> None:
    with pytest.raises(prompts.PromptError):
        prompts.render(name, "en")


def test_sub_answer_lists_the_history_only_when_there_is_one() -> None:
    with_steps = prompts.render("sub_answer", "en", **VARIABLES["sub_answer"])
    assert "- q1 → a1" in with_steps.messages[1].content
    without = prompts.render("sub_answer", "en", **{**VARIABLES["sub_answer"], "steps": []})
    assert "Sub-answers so far" not in without.messages[1].content
