"""What a question word asks for, and whether a text writes one: a kind of value, not a word.

"How long" and 多久 ask for a duration, "who" and 谁 for a person's name, "when", 什么时候 and
哪几天 for a time of day or a day or date. A passage answers them by writing such a value ("5
minutes", "Rosa Lindqvist", "every Monday at 10:00 UTC", "每月最后两个工作日"), not by holding the
question word. Two readers use this: the extractive answer picks the line that writes the value
(core.answer.extractive), and the coverage rule counts it as part of what is asked
(core.gate.evidence). Pure text: regular expressions, wordfreq and jieba's person tags.
"""

from __future__ import annotations

import itertools
import re

from core.language.chinese_words import person_names
from core.language.lexicon import CJK_NUMBERED, CJK_POINTS_OF, VALUE_ASKS, alternation
from core.language.text import CJK_RUN
from core.language.words import zipf

# A question asking how long, and a duration a line writes: a number and a unit of time.
ASKS_HOW_LONG = re.compile(r"\bhow long\b|多久|多长时间|多少(?:秒|分钟|小时|天|周|个月)", re.I)
DURATION = re.compile(
    r"(?<![\w.])(?:\d+(?:[.,]\d+)?|[一二两三四五六七八九十百半]+)\s?(?:"
    r"(?:(?:milli)?seconds?|minutes?|hours?|days?|weeks?|months?|years?|ms|secs?|mins?|hrs?|"
    r"[smhd])(?![A-Za-z])|个?(?:秒钟?|分钟|小时|钟头|天|周|星期|月))",
    re.I,
)
# A question asking who, and a person's name a line writes: in English two capitalized words in
# a row, neither of them a common word ("Mateus Carvalho", not "Payments Platform"; wordfreq's
# Zipf scale), in Chinese a name jieba tags and a surname opens (chinese_words.person_names).
ASKS_WHO = re.compile(r"\bwho(?:m|se|'s)?\b|谁", re.I)
_CAPITALIZED_WORDS = re.compile(r"(?<![\w`])[A-Z][a-zà-ÿ]+(?:\s+[A-Z][a-zà-ÿ]+)+(?![\w`])")
_NAME_WORD_ZIPF = 4.0
# A question asking when, and a time a line writes. "when" asks only as the question's word:
# before its verb ("When is the cutoff?", "by when must …"), asked of someone ("do you know
# when …") or left at the end ("cutoff when?"); a clause it opens asks what the main clause asks
# ("When I run X, it fails: why?", "When the breaker opens, how long …"). "What time" and 几点
# ask for a time of day, "which day" and 周几 for a day or a date, "when" and 什么时候 for
# either. 几点 is also "a few points" (有几点建议: CJK_POINTS_OF), 几号 also "which number" (几号楼,
# 几号机: CJK_NUMBERED).
ASKS_WHEN = re.compile(
    r"\bwhen(?:['’]s\b|\s+(?:exactly\s+|usually\s+)?(?:is|are|was|were|do|does|did|will|would|"
    r"can|could|should|must|shall|may|might|has|have|had)\b|\s*[?？]*\s*$)"
    r"|\b(?:by|until|till|since|from)\s+when\b"
    r"|\b(?:know|tell\s+(?:me|us)|idea|sure|remember|find\s+out|wonder(?:ing)?|ask|check|confirm)"
    r"\s+when\b"
    r"|\bdeadlines?\b|\bdue\s+dates?\b"
    r"|\b(?:release|freeze|start|end|cut-?off|launch|go-live)\s+(?:dates?|times?)\b"
    r"|什么时候|啥时候|什么时间|何时|截止(?:时间|日期)",
    re.I,
)
ASKS_TIME_OF_DAY = re.compile(
    r"\b(?:what|which)\s+(?:exact\s+)?(?:time|hour)s?\b(?!\s*zones?\b)"
    rf"|(?<!有)(?<!这)几点(?!{alternation(CJK_POINTS_OF)})|什么时段|哪个时间段",
    re.I,
)
ASKS_DAY = re.compile(
    r"\b(?:what|which)\s+(?:exact\s+)?(?:day|date|weekday|month)s?\b(?!-|\s+formats?\b)"
    r"|哪一?天|哪几天|哪个?日子|星期几|周几|礼拜几|哪个?月|哪几个月|几月"
    rf"|几号(?!{alternation(CJK_NUMBERED)})",
    re.I,
)
TIME_OF_DAY = re.compile(
    # 17:00, 3pm, 下午三点, 凌晨 2 点; not a version (3.11), a host's port (10.20.8.15:7001) or
    # a list's points (以下 3 点：, 第 3 点)
    r"(?<![\w.:])(?:[01]?\d|2[0-4]):[0-5]\d(?::[0-5]\d)?(?!\d|[.:]\d)"
    r"|(?<![\w.])(?:1[0-2]|0?[1-9])(?::[0-5]\d)?\s?(?:[ap]\.m\.|[ap]m)(?![A-Za-z])"
    r"|\b(?:noon|midnight|o'clock)\b"
    r"|(?:凌晨|清晨|早上|早晨|上午|中午|下午|傍晚|晚上|晚间|夜里|夜间|半夜)\s?[0-9零一二两三四五六七八九十]{1,3}\s?[点时]"
    r"|(?<![\d.])(?<!第)(?<!第 )(?:[01]?\d|2[0-4])\s?点(?![:：]|建议|注意|要求|说明|意见|原因)"
    r"|[零一二两三四五六七八九十]{1,3}点(?:钟|半|整|[0-9零一二三四五六七八九十]+分)",
    re.I,
)
# Month names count beside a day or a year ("Dec 14", "14 March 2026") or after a word that
# dates ("in May", "mid-March"): alone, "May" is a verb and "March" or "June" a name. "Sun",
# "Sat", "Wed" are words too: a short weekday counts before a time or a date ("Sun 03:00",
# "Tue, Dec 14") or in a range ("Mon–Fri"). A date with dots is not one: 2026.11.2 is a
# version (YYYY.MM.patch).
_FULL_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
)
_MONTH = rf"(?:{_FULL_MONTH}|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
_SHORT_DAY = r"(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)"
DAY_OR_DATE = re.compile(
    # a weekday, a recurrence, an end of a period, a holiday
    r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?\b|\bweek(?:day|end)s?\b"
    rf"|(?-i:\b{_SHORT_DAY}\b(?:\.?,?\s+(?=\d|{_MONTH}\b)|\s?[-–~]\s?{_SHORT_DAY}\b))"
    r"|\b(?:every|each)\s+(?:other\s+)?(?:day|night|morning|evening|afternoon|week|month|quarter"
    r"|year|business\s+day|working\s+day)\b|\b(?:nightly|daily|weekly|monthly|quarterly|yearly"
    r"|annually)\b|\b(?:once|twice)\s+a\s+(?:day|week|month|quarter|year)\b"
    r"|\bend\s+of\s+(?:the\s+)?(?:day|week|month|quarter|year)\b|\bEO[DWM]\b"
    r"|(?:周|星期|礼拜)[一二三四五六日天](?!次|遍|趟|回)|每(?:天|日|晚|周|月|年|季度)|工作日"
    r"|[上中下]旬|月[底末初]|年[底初末]|季度末|节假日|春节|国庆|元旦|中秋|除夕|双十[一二]"
    # a date: 2026-12-01, 2027-03, Dec 14, 14 March, in May, 12月14日, 每月 1 号
    r"|(?<![\w.])(?:19|20)\d{2}-(?:0?[1-9]|1[0-2])(?:-(?:0?[1-9]|[12]\d|3[01]))?(?![\d-])"
    r"|(?<![\w.])(?:19|20)\d{2}/(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])(?!\d)"
    rf"|(?-i:\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b"
    rf"|\b{_MONTH}\s+(?:19|20)\d{{2}}\b)"
    r"|\b(?:in|by|until|till|since|from|before|after|early|mid|late|of|for|next|last|this)"
    rf"[\s-]+(?-i:{_FULL_MONTH})\b"
    r"|(?<![\d.])(?:[01]?\d|[一二三四五六七八九十]{1,2})\s?月(?:\s?(?:[0-3]?\d|[一二三四五六七八九十]{1,3})"
    r"\s?[日号])?"
    r"|每个?月\s?(?:[0-3]?\d|[一二三四五六七八九十]{1,3})\s?[日号]",
    re.I,
)


def writes_duration(text: str) -> bool:
    return bool(DURATION.search(text))


def writes_time_of_day(text: str) -> bool:
    return bool(TIME_OF_DAY.search(text))


def writes_day_or_date(text: str) -> bool:
    return bool(DAY_OR_DATE.search(text))


def writes_when(text: str) -> bool:
    return writes_time_of_day(text) or writes_day_or_date(text)


def writes_person(text: str) -> bool:
    for match in _CAPITALIZED_WORDS.finditer(text):
        rare = [zipf(word.casefold(), "en") < _NAME_WORD_ZIPF for word in match.group().split()]
        if any(first and second for first, second in itertools.pairwise(rare)):
            return True
    return any(person_names(run) for run in CJK_RUN.findall(text))


# What a question asks for by its question word, and whether a line writes one: a term of its
# own, held beside the question's (the extractive answer's line scores, the coverage rule's ask).
DURATION_KIND, PERSON, WHEN = "\x00duration", "\x00person", "\x00when"
ASKED_VALUES = (
    (DURATION_KIND, ASKS_HOW_LONG, writes_duration),
    (PERSON, ASKS_WHO, writes_person),
    (WHEN, ASKS_WHEN, writes_when),
    ("\x00time of day", ASKS_TIME_OF_DAY, writes_time_of_day),
    ("\x00day", ASKS_DAY, writes_day_or_date),
)


# What the answer also reads as asking for a value, beside the question words the coverage rule
# reads (ASKED_VALUES): "how many" and 多少 ask for a count, a number the answering line writes
# ("more than 7 or 8 people"); "how often", "how fast" and a noun that names a span of time (a
# timeout, a cadence, an interval) ask for a duration ("set your escalation timeout to 5
# minutes"). The answer picks its line by them; the gate does not widen what it asks for.
ASKS_COUNT = re.compile(
    r"\bhow\s+many\b|\bnumber\s+of\b|\bmax(?:imum)?\s+(?:number|count)\b|多少(?![秒分小天周个月])"
    r"|几(?:个|位|名|次|台|人|条|项|种)",
    re.I,
)
ASKS_SPAN = re.compile(
    r"\bhow\s+(?:fast|quickly|soon|often|frequently|early|late)\b"
    r"|\b(?:timeouts?|cadence|intervals?|frequency|delays?|retention|ttl)\b"
    r"|多快|多频繁|频率|间隔|超时|多久一次",
    re.I,
)
# A count as a line writes it: digits not glued to a word or an identifier ("SEV-1", "v2" name
# things), or a small number in words.
_COUNT = re.compile(
    r"(?<![\w.,-])\d+(?:[.,]\d+)?(?![\w-])"
    r"|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|dozen)\b"
    r"|[一二两三四五六七八九十百千万]+\s?(?:个|位|名|次|台|人|条|项|种)",
    re.I,
)


def writes_count(text: str) -> bool:
    return bool(_COUNT.search(text))


def writes_span(text: str) -> bool:
    return writes_duration(text) or bool(_SPELT_DURATION.search(text))


COUNT, SPAN = "\x00count", "\x00span"
ANSWERED_VALUES = (
    *ASKED_VALUES,
    (COUNT, ASKS_COUNT, writes_count),
    (SPAN, ASKS_SPAN, writes_span),
)

# The gate reads "who" more narrowly than the answerer: in chat "有谁遇到过…" and "anyone who
# knows…" ask whether someone can help, not for a person's name, and the rule would then look for
# a name in the passage that answers the question.
_NOT_ASKING_WHO = re.compile(
    r"有谁|谁(?:知道|遇到|碰到|用过|了解|懂|能帮|可以帮)"
    r"|\b(?:anyone|anybody|someone|somebody|everyone|people|those|one)\s+who\b"
    r"|\bwho\s+(?:knows|can\s+help)\b",
    re.I,
)


def asked_values(request: str) -> tuple[str, ...]:
    """The kinds of value (ASKED_VALUES) a request asks for by its question words, for the
    coverage rule: "who" not when it asks whether anyone can help (_NOT_ASKING_WHO)."""
    kinds = []
    for kind, asks, _ in ASKED_VALUES:
        if asks.search(request) is None:
            continue
        if asks is ASKS_WHO and not _asks_who(request, asks):
            continue
        kinds.append(kind)
    return tuple(kinds)


def _asks_who(request: str, asks: re.Pattern[str]) -> bool:
    """Whether some "who" or 谁 of the request is not one that asks for help (_NOT_ASKING_WHO)."""
    helping = [m.span() for m in _NOT_ASKING_WHO.finditer(request)]
    return any(
        not any(start <= m.start() < end for start, end in helping) for m in asks.finditer(request)
    )


def asking_words(request: str, kinds: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The words of the request's question phrases for the value kinds it asks (asked_values):
    its Latin ones that ask for the value itself (VALUE_ASKS: "hours" of "what hours", not
    "release" of "release dates"), and its Chinese phrases whole (哪几天, 几点, 多长时间), which
    hold a word of the question's terms when jieba cut one out of them (几天 of 哪几天)."""
    latin: set[str] = set()
    cjk: list[str] = []
    for kind, asks, _ in ASKED_VALUES:
        if kind not in kinds:
            continue
        for match in asks.finditer(request):
            phrase = match.group().casefold()
            latin.update(w for w in re.findall(r"[a-z]+", phrase) if w in VALUE_ASKS)
            cjk.extend(CJK_RUN.findall(phrase))
    return frozenset(latin), tuple(cjk)


# A duration spelt in words ("about four minutes", "a few hours", "half an hour").
_SPELT_DURATION = re.compile(
    r"\b(?:an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|ninety|few|couple\s+of|several|half\s+an?)\s+"
    r"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b",
    re.I,
)
# Who a team's pages name beside a person: a role ("needs the on-call lead's approval",
# "需要值班负责人批准"). Not a team, a channel or "owners": "Who founded the Data Streaming team?"
# found its team's FAQ line ("…the Data Streaming team (#streaming-help) … component owners are
# listed in glossary.md"), which says nothing of who founded it.
_ROLE = re.compile(
    r"\b(?:lead|manager|engineer|admin|administrator|maintainers?|reviewers?|"
    r"approvers?)\b|负责人|组长|经理|主任|主管|工程师|管理员",
    re.I,
)


def writes(kind: str, text: str) -> bool:
    """Whether `text` writes a value of the kind (one of ASKED_VALUES), as the coverage rule
    reads it, more widely than the answerer's line scores, which pick the line that writes the
    value itself: "when" is also answered by a time relative to something ("入职满 3 个月后", "30
    days before it expires", "every 180 days"), a duration also in words ("about four
    minutes"), and "who" also by a role ("needs the on-call lead's approval")."""
    if kind in (WHEN, DURATION_KIND) and (writes_duration(text) or _SPELT_DURATION.search(text)):
        return True
    if kind == PERSON and _ROLE.search(text):
        return True
    return any(writer(text) for name, _, writer in ASKED_VALUES if name == kind)
