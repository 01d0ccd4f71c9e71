"""Every prompt Tacit sends, as Jinja2 templates, and the one function that renders them.

A template is `prompts/<name>.<lang>.j2` with a `user` block and, optionally, a `system`
block. Rendering is strict: a missing template or variable raises, never renders as "".
Callers pass text as it is; a template shows what a user wrote through the `quoted` filter.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from prompts.messages import ChatMessage, Prompt

TEMPLATE_DIR = Path(__file__).parent
LANGUAGES = ("en", "zh")


class PromptError(LookupError):
    """A prompt template is missing or was rendered without a variable it needs."""


def quoted(text: str | jinja2.Undefined) -> str:
    """`text` as one JSON string literal (`{{ question | quoted }}`): its quotes, newlines and
    backslashes escaped, so nothing in what a user wrote can end the quoted data and go on
    talking to the model as the prompt. Non-ASCII text stays as written."""
    if isinstance(text, jinja2.Undefined):
        str(text)  # a variable the caller did not pass: StrictUndefined raises, render() names it
    return json.dumps(text, ensure_ascii=False)


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["quoted"] = quoted
    return environment


def render(name: str, lang: str = "en", /, **variables: Any) -> Prompt:
    """Render prompt `name` in `lang` ("en" or "zh") into chat messages."""
    if lang not in LANGUAGES:
        raise PromptError(f"prompt language must be one of {LANGUAGES}, not {lang!r}")
    filename = f"{name}.{lang}.j2"
    env = _environment()
    try:
        template = env.get_template(filename)
    except jinja2.TemplateNotFound as exc:
        raise PromptError(f"no prompt template {filename!r} in {TEMPLATE_DIR}") from exc
    if "user" not in template.blocks:
        raise PromptError(f"prompt template {filename!r} has no 'user' block")
    context = template.new_context(dict(variables))
    messages: list[ChatMessage] = []
    try:
        for role in ("system", "user"):
            block = template.blocks.get(role)
            if block is None:
                continue
            text = "".join(block(context)).strip()
            if text:
                messages.append(ChatMessage(role, text))
    except jinja2.UndefinedError as exc:
        raise PromptError(f"prompt {filename!r}: {exc.message}") from exc
    return Prompt(template=name, messages=tuple(messages))


def available() -> list[str]:
    """Names of the prompt templates, each with its languages (for `tacit doctor`). A file
    whose name starts with "_" holds macros the prompts import, not a prompt."""
    return sorted(p.name for p in TEMPLATE_DIR.glob("*.j2") if not p.name.startswith("_"))
