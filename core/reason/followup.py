"""Follow-ups: a question asked in a thread, rewritten to stand alone before retrieval.

"What about its memory limit?" retrieves nothing useful; "What is the Redis cache's memory
limit?" does. With an LLM, one chat call (prompt "rewrite_followup") over the thread's latest
turns. Without one — or when the call fails or replies with nothing usable — a heuristic: a
question that is short and opens with a pronoun or a "what about" gets the key terms of the
thread's previous user question prepended ("Redis cache: what about its memory limit?"); any
other question is left as it is, since guessing context into a self-contained question only
adds noise. An empty history changes nothing and costs no call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import prompts
from core.errors import LLMError
from core.language.phrases import chinese_terms, english_terms
from core.language.text import Language, detect_language
from core.model_output import clean_text_reply, is_refusal
from core.ports import LLM

MAX_TURNS = 6  # the thread's latest turns the rewrite sees
MAX_TURN_CHARS = 600  # a long answer in the thread is cut: its start says what it was about
# A rewrite is one sentence, but a reasoning model thinks first: room for its <think> block
# (the callers pass the `llm.short_reply_max_tokens` setting).
REWRITE_MAX_TOKENS = 1024
KEY_TERMS = 4

# "Short": a follow-up that leans on the thread is a few words, rarely a sentence.
_SHORT_EN_WORDS = 10
_SHORT_ZH_CHARS = 20
_EN_LEADS = re.compile(
    r"^(?:it|its|it's|this|that|these|those|they|them|their|he|she|his|her|"
    r"what about|how about|and|also|same|the same|then|so|which one|what else)\b",
    re.IGNORECASE,
)
_ZH_LEADS = (
    "它",
    "这",
    "那",
    "他",
    "她",
    "其",
    "该",
    "还有",
    "另外",
    "如果",
    "那么",
    "同样",
    "此",
)
_ANSWER_LABEL = re.compile(
    r"^(?:(?:the\s+)?(?:standalone|rewritten)\s+question|question|rewritten|rewrite|"
    r"独立问题|改写后的问题|改写后|问题|改写)\s*[:：]\s*",
    re.I,
)
_QUESTION_END = ("?", "？")


async def standalone_question(
    llm: LLM | None,
    question: str,
    history: Sequence[tuple[str, str]],
    language: Language,
    *,
    max_tokens: int = REWRITE_MAX_TOKENS,
) -> str:
    """`question` rewritten to stand alone, given `history` as (role, text), oldest first."""
    turns = [(role, text.strip()) for role, text in history if text and text.strip()]
    if not turns:
        return question
    if llm is not None:
        try:
            rewritten = await _rewrite(llm, question, turns[-MAX_TURNS:], language, max_tokens)
        except LLMError:
            rewritten = ""
        if rewritten:
            return rewritten
    return heuristic_standalone(question, turns)


async def _rewrite(
    llm: LLM, question: str, turns: list[tuple[str, str]], language: Language, max_tokens: int
) -> str:
    prompt = prompts.render(
        "rewrite_followup",
        language,
        # The template quotes each turn as one JSON string literal: a turn cannot forge another
        # turn's line ("\nassistant: …") or close the thread block, whatever it contains.
        turns=[{"role": role, "text": _cut(text)} for role, text in turns],
        question=question,
    )
    reply = await llm.chat(prompt, max_tokens=max_tokens)
    return read_rewrite(reply.text, question)


def read_rewrite(reply: str, question: str) -> str:
    """The standalone question in a rewrite reply, or "" when it holds none.

    Past reasoning blocks and fences; the last labelled line ("Standalone question: …") or,
    in a reply of several lines, the last one that is a question ("Sure! Here it is:\n…?").
    A refusal ("I cannot help with that.") or an empty reply is no rewrite: the caller falls
    back to the heuristic rather than retrieving for the refusal's words.
    """
    visible = clean_text_reply(reply)
    if is_refusal(visible):
        return ""
    lines = [line.replace("**", "").strip() for line in visible.splitlines() if line.strip()]
    labelled = [_ANSWER_LABEL.sub("", line) for line in lines if _ANSWER_LABEL.match(line)]
    if labelled:
        text = labelled[-1]
    elif len(lines) > 1:
        asked = [line for line in lines if line.rstrip("\"'“”「」").endswith(_QUESTION_END)]
        text = asked[-1] if asked else visible
    else:
        text = visible
    text = text.strip().strip("\"'“”「」`").strip()
    # A reply much longer than a question is an answer or an essay, not a rewrite.
    if not text or is_refusal(text) or len(text) > 4 * len(question) + 200:
        return ""
    return text


def heuristic_standalone(question: str, turns: Sequence[tuple[str, str]]) -> str:
    """Without a model: prepend the previous user question's key terms to a short,
    pronoun-led follow-up; leave anything else unchanged."""
    text = question.strip()
    previous = next((t for role, t in reversed(turns) if role == "user" and t != text), None)
    if previous is None or not _leans_on_thread(text):
        return question
    terms = key_terms(previous)
    if not terms:
        return question
    separator = "：" if detect_language(text) == "zh" else ": "
    return f"{' '.join(terms)}{separator}{text}"


def key_terms(text: str) -> list[str]:
    """The indexer's own term extraction, so the terms match how documents were indexed."""
    if detect_language(text) == "zh":
        return chinese_terms(text, KEY_TERMS)
    return english_terms([text], KEY_TERMS)


def _leans_on_thread(text: str) -> bool:
    if detect_language(text) == "zh":
        return len(text) <= _SHORT_ZH_CHARS and text.startswith(_ZH_LEADS)
    return len(text.split()) <= _SHORT_EN_WORDS and bool(_EN_LEADS.match(text))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TURN_CHARS else text[: MAX_TURN_CHARS - 1] + "…"


__all__ = ["heuristic_standalone", "key_terms", "read_rewrite", "standalone_question"]
