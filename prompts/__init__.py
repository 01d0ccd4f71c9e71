"""Every prompt Tacit sends, as Jinja2 templates, and the one function that renders them.

A template is `prompts/<name>.<lang>.j2` with a `user` block and, optionally, a `system`
block. Rendering is strict: a missing template or variable raises, never renders as "".
Callers pass text as it is; a template shows what a user wrote through the `quoted` filter,
and what a document says through `fenced` (a passage: its own lines between <document> and
</document>) or `inline` (a line made from a document: a fact, a heading, a sub-answer).
"""

from __future__ import annotations

import json
import re
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


DOCUMENT_OPEN = "<document>"
DOCUMENT_CLOSE = "</document>"
# A fence tag however it is spelt (case, spaces, a slash): a document cannot close its fence,
# nor open another, with a variant the model would still read as the tag.
_FENCE_TAG = re.compile(r"<(\s*/?\s*)(document)", re.IGNORECASE)


def _defused(text: str) -> str:
    """The text with every fence tag in it made plain text (its "<" written as "‹")."""
    return _FENCE_TAG.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", text)


def fenced(text: str | jinja2.Undefined) -> str:
    """A document's text as data (`{{ source.text | fenced }}`): between a <document> line
    and a </document> line, with any fence tag inside defused, so nothing a document says
    (a forged "[7] (runbook.md)" source, a second "The question, as a JSON string:" line, a
    "</document>") can end its passage and speak to the model as the prompt does."""
    if isinstance(text, jinja2.Undefined):
        str(text)  # StrictUndefined raises; render() names the variable
    return f"{DOCUMENT_OPEN}\n{_defused(str(text))}\n{DOCUMENT_CLOSE}"


def inline(text: str | jinja2.Undefined) -> str:
    """Text drawn from a document shown inside one line of a prompt (a fact, a source's
    label, a sub-answer): its line breaks made spaces and fence tags defused, so it cannot
    start a line of its own (a forged numbered source, a forged question)."""
    if isinstance(text, jinja2.Undefined):
        str(text)
    return " ".join(_defused(str(text)).split())


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
    environment.filters["fenced"] = fenced
    environment.filters["inline"] = inline
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
