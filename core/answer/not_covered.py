"""Recognising an answer in which the model says the knowledge base does not cover the question.

The answer prompt asks for an explicit marker (NOT_COVERED_MARKER, alone) when the sources do
not hold the answer; models often write a sentence instead ("The knowledge base doesn't cover
nginx rate limiting…", "上下文中没有提到…"), so phrases are recognised too. Such an answer is a
refusal, not an answer: publishing it would make the bot speak where it should stay silent,
and widening the context for it only repeats the same reply.

An answer that cites a source is an answer, whatever it says about gaps ("The runbook does not
give a default; set it to 30 s [2]"): only uncited replies, or a short one whose uncited first
sentence says so, count as "not covered".

StreamHold decides as early as it can while the answer streams: it holds back the first
characters until they can no longer be the marker or the start of such a sentence, so a
refusal never reaches the chat, and an ordinary answer is released after a few tokens.
"""

from __future__ import annotations

import re

from core.model_output import opens_politely, strip_reasoning, without_preamble

NOT_COVERED_MARKER = "NOT_COVERED"

_CITATION = re.compile(r"\[\d{1,3}\]")
# Markdown and quotes around a reply (not "_": the marker has one; not "'": "doesn't").
_DECORATION = re.compile(r"[*`#>\"“”「」【】]")


def _plain(text: str) -> str:
    return _DECORATION.sub("", visible(text).replace("’", "'").replace("‘", "'"))


# How a reply that says "not covered" starts (checked on the first characters of the stream).
_OPENING = re.compile(
    r"^(?:not[_ ]covered|sorry|i'm sorry|i am sorry|unfortunately|apologies|"
    r"i (?:cannot|can't|can not|could not|couldn't|don't|do not|am unable|'m unable)|"
    r"the (?:knowledge base|provided|given|sources?|context|documents?|information|data)|"
    r"(?:there is|there's|there are) no|no (?:information|relevant|source|mention|details)|"
    r"none of the|based on the (?:provided |given )?(?:sources|context|documents)|"
    r"抱歉|对不起|很遗憾|知识库|上下文|资料|所给|提供的|给出的|根据(?:提供的|所给的?)?(?:资料|上下文)|"
    r"没有|无法|未找到|找不到|目前没有|并没有|不好意思)",
    re.IGNORECASE,
)
# Anywhere in the reply: a statement that the material does not hold the answer.
_SAYS_NOT_COVERED = re.compile(
    r"(?:does not|doesn't|do not|don't|did not|didn't|cannot|can't|can not|not)\s+"
    r"(?:\w+\s+)?(?:cover|contain|mention|include|provide|say|specify|state|address|"
    r"describe|discuss|answer|hold|have (?:any|the|information|details))|"
    r"\bnot (?:covered|mentioned|found|available|provided|specified|included|addressed)\b|"
    r"\bno (?:information|mention|details|data|relevant)\b|"
    r"(?:cannot|can't|unable to|not able to) (?:answer|find|determine)|"
    r"\bnot_covered\b|"
    r"没有(?:提到|提及|涉及|覆盖|相关|关于|包含|找到|说明|给出|答案|信息|记载|描述)|"
    r"未(?:提及|提到|涉及|覆盖|找到|包含|说明|给出|记载|描述)|"
    r"无法(?:回答|确定|找到|从|得知|判断)|不包含|不涉及|没有覆盖|找不到",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
# Text a reply needs before StreamHold can tell an answer from the marker or a refusal.
HOLD_CHARS = 24
# An acknowledging first line is held at most this long (the longest one left out).
PREAMBLE_HOLD_CHARS = 200
# A reply whose first (uncited) sentence says "not covered" and that is no longer than this is
# a refusal even if it cites something later (a passing mention is no answer).
SHORT_REPLY_CHARS = 300


def visible(text: str) -> str:
    """The reply without reasoning blocks (closed, or never closed: core.model_output)."""
    return strip_reasoning(text)


def says_not_covered(text: str) -> bool:
    """Whether a complete answer says that the sources do not hold the answer."""
    shown = _plain(text).strip()
    if not shown or is_refusal(shown):
        return False
    if shown.upper().rstrip(".!。") == NOT_COVERED_MARKER:
        return True
    cited = bool(_CITATION.search(shown))
    if NOT_COVERED_MARKER in shown.upper().replace(" ", "_") and not cited:
        return True
    if not cited:
        return bool(_SAYS_NOT_COVERED.search(shown))
    first = _SENTENCE_END.split(shown, maxsplit=1)[0]
    return (
        len(shown) <= SHORT_REPLY_CHARS
        and not _CITATION.search(first)
        and bool(_SAYS_NOT_COVERED.search(first))
    )


class StreamHold:
    """Holds a streamed answer's beginning until it is clearly not a "not covered" reply.

    feed() returns the text to show now ("" while holding); after the stream, finish() returns
    what is still held, or None when the whole reply says "not covered" (show nothing).
    """

    def __init__(self) -> None:
        self._held: list[str] = []
        self._released = False
        self._to_end = False  # it opened like a refusal: decide on the whole reply

    @property
    def released(self) -> bool:
        return self._released

    def feed(self, delta: str) -> str:
        if self._released:
            return delta
        self._held.append(delta)
        if self._to_end:
            return ""
        text = "".join(self._held)
        shown = _plain(text).lstrip()
        if opens_politely(shown):
            # an acknowledging first line ("Sure, here is what could be going on.") is held
            # to its end and left out, so a chat never shows it before the answer's text
            if "\n" not in shown and len(shown) < PREAMBLE_HOLD_CHARS:
                return ""
            text = without_preamble(text)
            self._held = [text]
            shown = _plain(text).lstrip()
            if len(shown) < HOLD_CHARS and not _CITATION.search(shown):
                return ""
        if _CITATION.search(shown):
            return self._release(text)
        if len(shown) < HOLD_CHARS:
            return ""
        if _OPENING.match(shown) or NOT_COVERED_MARKER.startswith(shown.upper()[:11]):
            self._to_end = True
            return ""
        return self._release(text)

    def finish(self) -> str | None:
        if self._released:
            return ""
        text = "".join(self._held)
        if says_not_covered(text):
            return None
        return self._release(text)

    def _release(self, text: str) -> str:
        self._released = True
        self._held = []
        # Reasoning blocks are gone by now (the pipeline streams through
        # core.model_output.without_reasoning); only the leading space goes, never a trailing one.
        return text.lstrip()


# A model declining the task itself (not a statement about the sources): no answer at all.
_REFUSAL = re.compile(
    r"^(?:i'm sorry,? but |sorry,? but |i am sorry,? but |抱歉，?)?"
    r"(?:i (?:cannot|can't|can not|won't|will not|am unable to|'m unable to|am not able to) "
    r"(?:help|assist|comply|do that|provide)|as an ai\b|"
    r"我无法(?:帮助|协助|提供)|我不能(?:帮助|协助|回答))",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """Whether the reply declines the task ("I cannot help with that.") rather than answers."""
    return bool(_REFUSAL.match(_plain(text).strip()))
