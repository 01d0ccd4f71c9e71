"""What a message's words are, and what each weighs: the terms the coverage rule looks up.

A team's questions are about names, identifiers and numbers, which embeddings match worst, so
the rule (core.gate.coverage) looks the message's own words up in the KB. This module reads them
off the text, in either script: each content word's key (folded, stemmed; identifiers whole),
its weight (how specific it is in general language: wordfreq's Zipf frequency), whether it is a
name (identifiers, numbers, rare words, capitalised words written next to one, Chinese-written
person names), the light words that frame an ask, and the word sets of a question's frame and
its asking words. Pure text analysis: nothing here reads the KB (core.gate.kb_terms does).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from core.language import chinese_words
from core.language.lexicon import (
    ASKING_ONLY,
    AUXILIARIES,
    CJK_FRAME,
    CJK_PARTICLES,
    CJK_QUESTION_WORDS,
    FRAME,
    FRAME_PHRASES,
    FUNCTION_ZIPF,
    REQUEST_VERBS,
    STOP_ZIPF,
    WH_WORDS,
    alternation,
)
from core.language.text import CJK_RUN, Language
from core.language.words import bare_contraction, fold, is_identifier, stem, zipf

# A Latin word or identifier of folded text (lumen-gateway, lumen.events.v2, 8443); a number.
LATIN_WORD = re.compile(r"[a-z0-9][a-z0-9_.\-]*[a-z0-9]|[a-z0-9]")
NUMBER = re.compile(r"^[0-9][0-9.,]*$")
# Lighter words (Zipf above ~5.1: 负责, 意思, "control", 法国) only frame the ask: a passage
# need not hold them beside a heavier word (they are the ask only when no word is heavier: see
# light_words). Low enough that "capital" and "France" stay the ask of
# "LUMEN_DISPATCH_CONCURRENCY what is the capital of France?".
ASK_WEIGHT = 0.08


# A question word jieba cuts together with its measure word (几次 "how many times", 哪位 "which
# person", 那次 "that time"), and the colloquial ones (多久 "how long", 啥 "what", 咋整 "how to
# deal with it", 干嘛 "what for"): the question's frame, like 多少 and 哪个 above, however
# rarely wordfreq has seen the pair: as content they weigh much and, found in no passage, count
# against every question asked with them.
# Not the measure words of time (哪天, 几年): the one case for them ("赵慧玲的生日是哪天？"
# refused for 哪天) came from a Chinese-written name not yet read as a name, not from 哪天.
# 这边 / 那边 ("our side", "over there") point as 这个 does: "我们这边要做什么" (what do we do on
# our side) asks nothing about a 这边.
_CJK_ASKING = re.compile(r"[几哪这那][个次位种台条张家些里回遍件份边]|多久|啥|咋.?|干嘛")


def common_word(word: str) -> bool:
    """A CJK word too common to be looked up (Zipf ≥ STOP_ZIPF: 产品, 用户) but not the frame
    of a question (below FUNCTION_ZIPF): it may begin a compound (compounds)."""
    return STOP_ZIPF <= zipf(word, "zh") < FUNCTION_ZIPF


def _cjk_frame(word: str) -> bool:
    return word in CJK_FRAME or _CJK_ASKING.fullmatch(word) is not None


# A question that says it asks in general ("How do I fix CUDA out of memory in PyTorch in
# general?", 一般来说…): about the world unless a passage holds what it asks (core.gate.coverage).
GENERAL_SCOPE = re.compile(r"\bin general\b|\bgenerally speaking\b|一般来说|一般而言|通常来说")

# Words that point back at what was said before them: a request holding one ("is that bad?",
# "how do I get past it?", 这个怎么办) takes its subject from the sentences in front of it
# (core.gate.request.refers_back). A closed class, an input to that signal.
CJK_REFERRING = re.compile(r"[这那它][个些样种]?")

# Words that open a question or frame it: never part of a name, never what is asked.
OPENERS = WH_WORDS | AUXILIARIES | REQUEST_VERBS | FRAME
# A Chinese question word or particle: a segment holding one asks.
# A verb said twice around 不 or 没 (能不能, 是不是, 要不要, 会不会, 可不可以) asks yes or no, as
# 吗 does: "LIS_DB_POOL_SIZE 能不能调到 80" was no request at all.
CJK_QUESTION = re.compile(
    f"{alternation(CJK_QUESTION_WORDS | CJK_PARTICLES)}|请问|有没有|可以|"
    r"([\u4e00-\u9fff])[不没]\1"
)
# "@bot" or "@alice" addresses someone, wherever in the message: it is not what the message is
# about. Latin handles, or a CJK one closed by a space; not a mail address (lab@example.org).
MENTION = re.compile(r"(?<![\w.@])@(?:[a-z0-9_][a-z0-9_.\-]*|[\u4e00-\u9fff]{1,8}(?=\s))")
# English contractions: "don't" is "do not" (not the term "don"), "what's" is "what is".
_NEGATED = re.compile(r"\b[a-z]+n['’]t\b")
_CLITIC = re.compile(r"['’](?:s|re|ve|ll|d|m)\b")


def unaddressed(folded: str) -> str:
    """Folded text without the mentions that address someone (MENTION) and with English
    contractions read as their words (a negation is a frame word, a clitic nothing)."""
    return _CLITIC.sub(" ", _NEGATED.sub(" not ", MENTION.sub(" ", folded)))


@dataclass(frozen=True, slots=True)
class Term:
    key: str  # what the KB is searched for: folded, stemmed
    surface: str  # as written (folded)
    weight: float  # how much finding it says: specificity in general language, in (0, 1]
    name: bool  # an identifier, a name or a number: exact evidence, worth a fuzzy look-up
    # a CJK word: the word with each neighbour jieba cut as a single character, as written, and
    # where the word starts in it (KbTerms.lookup reads the word there as the KB writes it, when
    # the KB does not write the word itself)
    context: str = ""
    at: int = 0
    # a CJK word: the next word of its run, when that is a content word too (compounds)
    next_word: str = ""
    # a CJK word: the word before it in its run when that is too common to be looked up on its
    # own (产品 in 产品经理), which a compound may begin with (compounds)
    head: str = ""


def term_key(word: str) -> str:
    """Identifiers stay whole (LUMEN_SPOOL_DIR, lumen.events.v2); words are stemmed."""
    if is_identifier(word):
        return word
    return stem(word)


# Agent-noun suffixes of Chinese (负责人 "person in charge" of 负责 "be in charge of", 管理员,
# 维护者): a word that ends in one is also found where the KB writes the word without it.
_CJK_AGENT = "人者员"


def agent_forms(key: str) -> tuple[str, ...]:
    """The keys of a word's agent noun or verb, both ways: the stemmer leaves "owner" whole
    (Snowball strips "-er" only past the word's second syllable: "maintainer", "scheduler" and
    "reviewer" already share their verb's stem), so "who owns X?" found nothing in a table
    headed "Owner"; 负责人 is not cut into 负责 either. Words only, never names or identifiers."""
    if CJK_RUN.fullmatch(key):
        return (key[:-1],) if len(key) >= 3 and key[-1] in _CJK_AGENT else ()
    if not key.isascii() or not key.isalpha():
        return ()
    if key.endswith("er") and len(key) >= 5:
        return (key[:-2],)
    return (key + "er",)


def specificity(z: float) -> float:
    """A word's weight by its Zipf frequency: 1 for a word never seen, 0 from STOP_ZIPF."""
    return max(0.0, (STOP_ZIPF - z) / STOP_ZIPF)


# A capitalised Latin word as written (case kept): what the name spans are made of.
_CASED_WORD = re.compile(r"[A-Za-z\u00c0-\u024f0-9][A-Za-z\u00c0-\u024f0-9_.\-]*")


def _name_spans(text: str, names: set[str]) -> set[str]:
    """The folded words of the message written as part of a name: capitalised words next to
    each other, one of which is a name by the rule content_terms applies ("Jonas Berg": "Berg"
    is rare, so "Jonas" — a word of everyday frequency — belongs to the name too). Words that
    open a question ("What", "Does", "Tell") are never part of one."""
    written = unicodedata.normalize("NFKC", text)
    spans: set[str] = set()
    run: list[str] = []
    end = -1
    for match in [*_CASED_WORD.finditer(written), None]:
        word = "" if match is None else match.group()
        folded = fold(word)
        capitalised = word[:1].isupper() and folded not in OPENERS
        adjacent = match is not None and end >= 0 and not written[end : match.start()].strip()
        if not (capitalised and adjacent):
            if len(run) > 1 and names.intersection(run):
                spans.update(run)
            run = []
        if capitalised:
            run.append(folded)
        end = -1 if match is None else match.end()
    return spans


def titled_words(text: str) -> frozenset[str]:
    """The folded Latin words the message writes in title case ("Aiyana", "Whitehorse"; not
    "PVC", "lumen-gateway"): how a person's name is written, where an acronym or a component
    is not."""
    written = unicodedata.normalize("NFKC", text)
    return frozenset(
        fold(word)
        for word in _CASED_WORD.findall(written)
        if word[0].isupper() and word[1:].isalpha() and word[1:].islower()
    )


def name_words(text: str, terms: Sequence[Term] | None = None) -> frozenset[str]:
    """The words of the message that are names only as part of a written name (_name_spans):
    found on the message as written, since the request is cut from its folded form. `terms`:
    the message's own (message_terms), when already found."""
    names = {t.surface for t in (message_terms(text) if terms is None else terms) if t.name}
    return frozenset(_name_spans(text, names) - names) if names else frozenset()


def content_terms(text: str, named: frozenset[str] | None = None) -> list[Term]:
    """The message's terms that can say what it is about, in order, repeats kept. `named`:
    words written as part of a name (name_words), when `text` is no longer as written."""
    found = message_terms(text)
    return mark_names(found, name_words(text, found) if named is None else named)


def mark_names(found: list[Term], spans: frozenset[str]) -> list[Term]:
    """The terms, those written as part of a name (`spans`: name_words) made names."""
    if not spans:
        return found
    return [dataclasses.replace(t, name=True) if t.surface in spans else t for t in found]


def _latin_words(folded: str) -> list[str]:
    """The Latin words of folded text, less the first word of a framing phrase (FRAME_PHRASES)
    and the scope a question says it asks in ("in general": GENERAL_SCOPE, read by the rule)."""
    words = LATIN_WORD.findall(GENERAL_SCOPE.sub(" ", unaddressed(folded)))
    after = [*words[1:], ""] if words else []
    return [
        word
        for word, next_word in zip(words, after, strict=True)
        if (word, next_word) not in FRAME_PHRASES
    ]


def message_terms(text: str) -> list[Term]:
    """The message's terms before the words written as part of a name are made names
    (content_terms does both)."""
    folded = unaddressed(fold(text))
    found: list[Term] = []
    for word in _latin_words(folded):
        if word in FRAME or bare_contraction(word):
            continue
        identifier = any(c in word for c in "_.-") or (
            any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
        )
        if NUMBER.match(word):
            # Numbers are exact evidence, but a short one ("17") is in every KB.
            weight = 0.6 if len(word.strip(".,")) >= 3 else 0.1
            found.append(Term(word, word, weight, True))
            continue
        z = 0.0 if identifier else zipf(word, "en")
        weight = specificity(z)
        if weight <= 0.0 or len(word) < 2:
            continue
        found.append(Term(term_key(word), word, weight, identifier or z < 3.5))
    # Words, not every bigram: a bigram across two words ("户修" in 商户修改) is in no passage
    # and would count against a question the KB does cover.
    for match in CJK_RUN.finditer(folded):
        run = match.group()
        words = _after_number(run, folded[: match.start()])
        people = _people(run)
        start = 0
        previous = -2  # the index of the last word found as a term
        for index, word in enumerate(words):
            at, start = start, start + len(word)
            if len(word) < 2 or _cjk_frame(word):
                continue
            z = zipf(word, "zh")
            weight = specificity(z)
            head = words[index - 1] if index > 0 else ""
            if len(head) < 2 or _cjk_frame(head) or not common_word(head):
                head = ""
            if weight > 0.0:
                # a neighbour jieba left on its own (验 in 验/签用) may belong to the word
                before = at - 1 if index > 0 and len(words[index - 1]) == 1 else at
                alone_after = index + 1 < len(words) and len(words[index + 1]) == 1
                after = start + 1 if alone_after else start
                name = word in people and len(word) <= CJK_NAME_CHARS and z < CJK_NAME_ZIPF
                if previous == index - 1 and not name and not found[-1].name:
                    found[-1] = dataclasses.replace(found[-1], next_word=word)
                found.append(
                    Term(word, word, weight, name, run[before:after], at - before, head=head)
                )
                previous = index
    return found


# A Chinese-written person's name: a word jieba tags as one whose first character opens names
# (chinese_words.person_names), a surname and a given name of one or two characters, and rare as
# a word. jieba's tag alone also falls on 瑞芯微, 静默, 卡住 and 高斯分布: the surname leaves out
# the first two, Zipf the third (3.3), the length the last. 鲁棒性 and 易用性 (Zipf 2.3, 2.0) stay
# names, as "robustness" (2.8) is one to the Latin rule. Rarer than that rule's 3.5: two or three
# characters also spell everyday words (张力 3.5, 李白 3.5), and wordfreq scores CJK words it
# does not list from their characters (赵慧玲 1.1, not 0). A name is never half of a compound.
CJK_NAME_CHARS = 3
CJK_NAME_ZIPF = 3.0


@lru_cache(maxsize=16384)
def _people(run: str) -> frozenset[str]:
    return chinese_words.person_names(run)


def light_words(
    text: str, named: frozenset[str] | None = None, terms: Sequence[Term] | None = None
) -> list[Term]:
    """The words of the message that say what it asks but weigh less than ASK_WEIGHT ("eat",
    "own", "movie", 喜欢, 负责, 吃): not names, not the question's frame (what, does, 什么, 谁),
    below FUNCTION_ZIPF. The ask when the message has no heavier word (see term_evidence).
    `terms`: content_terms(text, named), when already found."""
    found_terms = content_terms(text, named) if terms is None else terms
    names = {t.surface for t in found_terms if t.name}
    folded = unaddressed(fold(text))
    found: list[Term] = []
    for word in _latin_words(folded):
        if len(word) < 2 or word in OPENERS or word in names or not word.isalpha():
            continue
        z = zipf(word, "en")
        if z < FUNCTION_ZIPF and specificity(z) < ASK_WEIGHT:
            found.append(Term(term_key(word), word, specificity(z), False))
    for word in chinese_words_of(folded):
        if _cjk_frame(word) or CJK_QUESTION.fullmatch(word):
            continue
        z = zipf(word, "zh")
        if z < FUNCTION_ZIPF and specificity(z) < ASK_WEIGHT:
            found.append(Term(word, word, specificity(z), False))
    return found


def chinese_words_of(folded: str) -> Iterator[str]:
    """The words of the text's CJK runs, in order (jieba, through core.language.chinese_words)."""
    for run in CJK_RUN.findall(folded):
        yield from cjk_words(run)


def _after_number(run: str, before: str) -> tuple[str, ...]:
    """The words of a CJK run; right after a number, its first character on its own when jieba
    joined it to the next into a word its dictionary does not list: the number's measure word
    ("9 点发吗": 9 点 / 发, not 点发, which no passage writes). A listed word stays (5 分钟)."""
    words = cjk_words(run)
    if (
        before.rstrip()[-1:].isdigit()
        and len(words[0]) == 2
        and not chinese_words.in_dictionary(words[0])
    ):
        return (run[0], *cjk_words(run[1:]))
    return words


@lru_cache(maxsize=16384)
def cjk_words(run: str) -> tuple[str, ...]:
    # jieba writes 啥 with the noun it asks for (啥意思, 啥时候): the question word and its
    # noun, as 什么 / 意思, so the noun is what a question word asks for (answer_kinds)
    words: list[str] = []
    for word in chinese_words.words(run):
        if len(word) >= 3 and word[0] == "啥":
            words.extend((word[0], word[1:]))
        else:
            words.append(word)
    return tuple(words)


def is_cjk(term: Term) -> bool:
    return CJK_RUN.fullmatch(term.key) is not None


# English month names and their abbreviations → the month's number, which a Chinese passage
# writes instead (12月, 十二月): "who's primary on call the week of Dec 14?" found no "dec" in
# the on-call table headed "2026 年 11–12 月排班表", and the embedder puts "dec" below the rule's
# TRANSLATION_MIN from 12月: a fixed dictionary, not the embedder. Not "may", far more often the
# verb.
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
MONTHS: dict[str, int] = {
    form: number
    for number, name in enumerate(_MONTH_NAMES.split(" "), 1)
    if name != "may"
    for form in (name, name[:3])
} | {"sept": 9}
_CHINESE_DIGITS = "一二三四五六七八九十"


@lru_cache(maxsize=12)
def _month_written(number: int) -> re.Pattern[str]:
    """The month as Chinese text writes it (12月, 12 月, 十二月), not inside another month
    (1月 in 11月, 一月 in 十一月)."""
    chinese = _CHINESE_DIGITS[number - 1] if number <= 10 else "十" + _CHINESE_DIGITS[number - 11]
    return re.compile(rf"(?<![0-9])0?{number}\s?月|(?<![{_CHINESE_DIGITS}]){chinese}月")


def month_in(word: str, text: str) -> bool:
    """Whether an English month name (folded, as written: "dec", "december") is written in
    Chinese text as its number (MONTHS)."""
    number = MONTHS.get(word)
    return number is not None and _month_written(number).search(fold(text)) is not None


def passage_words(text: str, language: Language) -> tuple[str, ...]:
    """A passage's distinct words in the script of its language, as written (folded), the
    parts of identifiers included and the most frequent words left out (STOP_ZIPF): what a
    word of the other script is compared with. Frame words stay: "default" is not a question's
    topic, but a passage that says "Default `32`" holds what "默认值是多少" asks."""
    folded = fold(text)
    found: dict[str, None] = {}
    if language == "zh":
        words = list(chinese_words_of(folded))
    else:
        words = [p for w in LATIN_WORD.findall(folded) for p in re.split(r"[_.\-]+", w)]
    for word in words:
        if len(word) < 2 or any(c.isdigit() for c in word) or word in found:
            continue
        if specificity(zipf(word, language)) > 0.0:
            found[word] = None
    return tuple(found)


def is_empty_request(text: str) -> bool:
    """Nothing but asking words ("what now?", "how?", "why?", "any idea?", "怎么办？"): the words
    around the request say what it is about."""
    folded = unaddressed(fold(text))
    for word in LATIN_WORD.findall(folded):
        if word in FRAME or word in ASKING_ONLY or NUMBER.match(word):
            continue
        if zipf(word, "en") < FUNCTION_ZIPF:
            return False
    for word in chinese_words_of(folded):
        if len(word) >= 2 and not _cjk_frame(word) and zipf(word, "zh") < FUNCTION_ZIPF:
            return False
    return True


def distinct_terms(terms: Sequence[Term]) -> dict[str, Term]:
    """The first term of each key, in order."""
    distinct: dict[str, Term] = {}
    for term in terms:
        distinct.setdefault(term.key, term)
    return distinct


def repetition(text: str) -> float:
    """1 - distinct/total of the message's latin words and CJK bigrams (0: no repeats)."""
    return term_repetition(content_terms(text))


def term_repetition(terms: Sequence[Term]) -> float:
    words = [t.key for t in terms]
    if len(words) < 3:
        return 0.0
    return 1.0 - len(set(words)) / len(words)
