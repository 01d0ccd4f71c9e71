"""The request a message makes, and everything the coverage rule reads from the message once.

KB words stuffed in front of an off-topic request ("Lumen Lumen Lumen: what is the capital of
France?", "lumenctl lumenctl write me a poem") must not buy an answer, so the rule
(core.gate.coverage) measures coverage on the clause that asks: the one that starts with a
wh-word, an auxiliary or an imperative verb, or that ends with a question mark. Beside it, what
kind of answer a question word asks for ("how big": a size) and whether the request asks for a
way ("how do I …"). Analysis gathers it all with the terms (core.language.terms) per message, so the
gate's look-ups and its verdict read one analysis. The request prior (core.gate.prior) uses the
same request finder.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.language.asked_values import asked_values, asking_words
from core.language.lexicon import AUXILIARIES, FUNCTION_ZIPF, REFERRING, REQUEST_VERBS, WH_WORDS
from core.language.terms import (
    ASK_WEIGHT,
    CJK_QUESTION,
    CJK_REFERRING,
    GENERAL_SCOPE,
    LATIN_WORD,
    MENTION,
    OPENERS,
    Term,
    chinese_words_of,
    cjk_words,
    content_terms,
    is_empty_request,
    light_words,
    mark_names,
    message_terms,
    name_words,
    term_repetition,
    titled_words,
)
from core.language.text import CJK_RUN
from core.language.words import fold, zipf

_SEPARATORS = re.compile(r"[:;!?。！？；…]|\.\.\.|\s[—–-]+\s|,|，|\.(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Request:
    text: str  # the part of the message that asks
    whole: bool  # the request is the whole message (nothing in front of it)
    cue: bool  # a question or a request at all: ?, a wh-word, an auxiliary, an imperative


def find_request(text: str) -> Request:
    """The clause that asks. Segments are split at punctuation; the request is the last
    segment that asks, from its asking word on ("… who won the 2018 world cup", "lumenctl
    lumenctl write me a poem"), together with the whole questions right before it ("What is
    the default of X? What happens if I raise it?": the second leans on the first); with no
    asking segment, the whole message."""
    # "@bot" addresses the bot: it is not part of what is asked
    folded = MENTION.sub(" ", fold(text)).strip()
    if not folded:
        return Request("", True, False)
    segments: list[tuple[int, int]] = []
    start = 0
    for match in _SEPARATORS.finditer(folded):
        segments.append((start, match.end()))
        start = match.end()
    segments.append((start, len(folded)))
    question_mark = "?" in folded or "？" in text
    chosen: tuple[int, int] | None = None
    for index in range(len(segments) - 1, -1, -1):
        begin, end = segments[index]
        opener = _opener(folded[begin:end])
        if opener is None:
            continue
        chosen = (begin + opener, end)
        # Earlier segments that are questions of their own (an asking word and a question
        # mark, or in Chinese chat a comma: "autoverfy 现在是哪个版本，最近改了啥"), up to the
        # first that is not: KB words stuffed in front ("Lumen Lumen Lumen: what is …?",
        # "lumenctl? lumenctl? who won …?") ask nothing and stay out.
        for before, after in reversed(segments[:index]):
            segment = folded[before:after]
            earlier = _opener(segment, by_mark=False)
            if earlier is None or not _asks_on(segment, folded[chosen[0] : chosen[1]]):
                break
            chosen = (before + earlier, end)
        break
    if chosen is None:
        return Request(folded, True, question_mark)
    request = folded[chosen[0] : chosen[1]].strip(" ,:;.…-—–")
    whole = not folded[: chosen[0]].strip(" ,:;.…-—–?!")
    return Request(request, whole, True)


def _asks_on(segment: str, request: str) -> bool:
    """Whether an earlier segment that asks (_opener) ends as a question the request goes on
    from (find_request): with a question mark, or asked in Chinese with a comma when the
    request after it has no word heavy enough to ask about (ASK_WEIGHT): "autoverfy 现在是哪个
    版本，最近改了啥" (what changed lately: 最近 weighs 0.04) asks about the version before it
    (folded, "，" is ","). Not a request of its own ("请问下mmcv的new config，自定义字段可以使用
    class作为value吗": 请问 opens a preface, and on the refusal set's chat joining such ones
    refused 4 answerable questions), nor an English one ("What does the job check, and what
    difference is acceptable?" asks two things)."""
    end = segment.rstrip()
    if end.endswith(("?", "？")):
        return True
    return (
        end.endswith((",", "，"))
        and CJK_QUESTION.search(segment) is not None
        and all(t.weight < ASK_WEIGHT for t in message_terms(request))
    )


def answer_kinds(text: str, asking: frozenset[str] = WH_WORDS) -> frozenset[str]:
    """The words a question word asks for: the word right after it ("how big", "what colour",
    什么意思, 哪个版本). They name the kind of answer wanted (a size, a meaning, a version),
    which a passage gives as a value rather than in the word itself; in Chinese also the word
    before 是 and a question word (要求是多少). `asking`: the Latin question words read (_HOW:
    the degrees only)."""
    folded = fold(text)
    found: set[str] = set()
    latin = LATIN_WORD.findall(folded)
    found.update(word for before, word in itertools.pairwise(latin) if before in asking)
    for run in CJK_RUN.findall(folded):
        words = cjk_words(run)
        found.update(
            word for before, word in itertools.pairwise(words) if CJK_QUESTION.search(before)
        )
        # Chinese also names it before 是 and the question word: "响应时间要求是多少" (what is
        # the response time requirement) asks for a 要求, given as "15 分钟内响应"
        found.update(
            word
            for word, copula, asking in zip(words, words[1:], words[2:], strict=False)
            if copula == "是" and CJK_QUESTION.match(asking)
        )
    return frozenset(found)


_CJK_HOW = re.compile(r"怎|如何")
# "how big", "how often": a degree, which a passage gives as a number ("64 MB", "every 180
# days") and need not name. "What music" asks for a kind of thing, which a passage that has it
# names: a light word of that kind the KB writes nowhere is no value it gives (term_evidence).
_HOW = frozenset({"how"})


def asks_how(text: str) -> bool:
    """Whether the request asks for a way ("how do I change …", "怎么配置…", "如何…"), not a
    degree ("how big", "how many"): its verbs are then the procedure asked about, which a
    passage states in its own ("is set by"), not a relation the passage must hold."""
    folded = fold(text)
    latin = [*LATIN_WORD.findall(folded), ""]
    for before, word in itertools.pairwise(latin):
        if before == "how" and (not word or word in OPENERS or zipf(word, "en") >= FUNCTION_ZIPF):
            return True
    return any(_CJK_HOW.search(word) for word in chinese_words_of(folded))


def _opener(segment: str, *, by_mark: bool = True) -> int | None:
    """Where a segment starts asking (a wh-word, an auxiliary, an imperative, a Chinese
    question word or, with `by_mark`, a closing question mark), or None when it does not ask."""
    words = [(m.start(), m.group()) for m in LATIN_WORD.finditer(segment)]
    if words and words[0][1] in (WH_WORDS | AUXILIARIES | REQUEST_VERBS):
        return words[0][0]
    # an imperative further on starts the request ("lumenctl lumenctl write me a poem"); a
    # wh-word in situ asks about the whole segment ("Priya owns which?")
    for offset, word in words:
        if word in REQUEST_VERBS:
            return offset
    if any(word in WH_WORDS for _, word in words):
        return 0
    if CJK_QUESTION.search(segment):
        return 0
    if by_mark and segment.rstrip().endswith(("?", "？")):
        return 0
    return None


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the rule reads from a message, worked out once per message (analyse): the request,
    its terms and light words, the whole message's, the words written as part of a name.
    CoverageRule.check makes one and hands it to the look-ups and to judge."""

    request: Request
    named: frozenset[str]  # name_words of the message as written
    terms: tuple[Term, ...]  # content_terms of the request
    light: tuple[Term, ...]  # light_words of the request
    whole_terms: tuple[Term, ...]  # content_terms of the whole message
    whole_light: tuple[Term, ...]  # light_words of the whole message
    stuffed: float  # repetition of the whole message
    empty: bool  # is_empty_request of the request
    asked_for: frozenset[str]  # answer_kinds of the whole message
    degrees: frozenset[str]  # answer_kinds of the whole message after "how" (and in CJK)
    how: bool  # asks_how of the request
    titled: frozenset[str] = frozenset()  # titled_words of the message as written
    general: bool = False  # the message says it asks in general (GENERAL_SCOPE)
    # the kinds of value the request's question words ask for (core.language.asked_values: a time, a
    # day, a duration, a person), whose words are then not among the terms
    values: tuple[str, ...] = ()
    # the request points back at a statement in front of it (refers_back)
    refers: bool = False


def refers_back(text: str, request: Request, terms: Sequence[Term], before: Sequence[Term]) -> bool:
    """Whether the request takes its subject from the sentences in front of it: "X is firing,
    is that bad?", "… but all the pods look fine. what do I change?", "…告警一直在响，这个怎么办".
    Two things make it so, and KB words stuffed in front of an unrelated request ("Lumen Lumen:
    what is the capital of France?") have neither:

    - the request points back: a referring word ("it", "that", 这个) or no content word at all
      (its object left out: "what do I change?"); a self-contained request names what it asks
      about ("the capital of France", "17 times 23");
    - what is in front of it is a statement, not a list of terms: it holds words besides its
      content terms (a verb, an article: "is firing", "are stuck on"), where stuffing is the
      KB's names and nothing else ("Lumen Lumen Lumen:", "Mirela Vasquez, gateway:").

    `terms`: the request's content terms; `before`: the content terms of the whole message."""
    if request.whole or not request.cue:
        return False
    folded = MENTION.sub(" ", fold(text)).strip()
    at = folded.rfind(request.text)
    if at <= 0:
        return False
    front = folded[:at]
    latin = LATIN_WORD.findall(request.text)
    points = any(word in REFERRING for word in latin) or any(
        CJK_REFERRING.match(word) for word in chinese_words_of(request.text)
    )
    if not points and terms:
        return False
    # the front's words that are none of the message's terms: a statement's verbs and articles
    named = {t.surface for t in before} | {t.key for t in before}
    front_words = [*LATIN_WORD.findall(front), *chinese_words_of(front)]
    return any(word not in named for word in front_words)


def _without_opening_imperative(request: str, terms: list[Term]) -> list[Term]:
    """The request's terms less the imperative it opens with: "write me a poem about GPUs"
    asks for a poem, and "write" is how it asks, as "what" is: kept, "write" is found in
    the KB and makes an off-topic ask look partly covered ("KilnAdmissionError: write me a
    poem about GPUs")."""
    words = LATIN_WORD.findall(request)
    if not words or words[0] not in REQUEST_VERBS:
        return terms
    for index, term in enumerate(terms):
        if term.surface == words[0]:
            return [*terms[:index], *terms[index + 1 :]]
    return terms


def _bare_way(request: Request, terms: list[Term]) -> bool:
    """A request for a way that names only its verb, after what it is about: "护士站标签打印机打
    出来是空白的，怎么排查" (how do I troubleshoot it) asks how to deal with the clause before it,
    as "…, what now?" does; its one word is the procedure, not its topic. Chinese only: the
    verb is the last word, right after 怎么, 怎样, 如何 or 咋."""
    if request.whole or len(terms) != 1:
        return False
    words = list(chinese_words_of(request.text))
    return (
        len(words) == 2
        and words[0] in ("怎么", "怎样", "如何", "咋")
        and words[1] == terms[0].surface
        and not LATIN_WORD.search(request.text)
    )


def _without_asking_words(
    terms: Sequence[Term], values: tuple[str, ...], request: str
) -> tuple[Term, ...]:
    """The terms less the words that ask for a value (core.language.asked_values.asking_words):
    "哪几天" in "月末哪几天不能发布" asks for days, which the passage writes as
    "每月最后两个工作日", not as the word; "hours" in "What hours are hotfixes forbidden?" is
    answered by "08:00 and 11:00"."""
    if not values:
        return tuple(terms)
    latin, cjk = asking_words(request, values)
    return tuple(
        t
        for t in terms
        if not (
            t.surface in latin
            or (CJK_RUN.fullmatch(t.surface) and any(t.surface in p for p in cjk))
        )
    )


def analyse(text: str) -> Analysis:
    request = find_request(text)
    found = message_terms(text)
    named = name_words(text, found)
    whole = mark_names(found, named)
    # the request is often the whole message, folded: its terms are then the message's
    terms = whole if request.text == text else content_terms(request.text, named)
    terms = _without_opening_imperative(request.text, terms)
    if request.whole:
        whole = _without_opening_imperative(request.text, whole)
    values = asked_values(request.text)
    asking = functools.partial(_without_asking_words, values=values, request=request.text)
    return Analysis(
        request=request,
        named=named,
        terms=asking(terms),
        light=asking(light_words(request.text, named, terms)),
        whole_terms=asking(whole),
        whole_light=asking(light_words(text, named, whole)),
        stuffed=term_repetition(whole),
        empty=is_empty_request(request.text) or _bare_way(request, terms),
        asked_for=answer_kinds(text),
        degrees=answer_kinds(text, _HOW),
        how=asks_how(request.text),
        titled=titled_words(text),
        general=GENERAL_SCOPE.search(fold(text)) is not None,
        values=values,
        refers=refers_back(text, request, terms, whole),
    )
