"""Whether a question is worth a logic-form plan: decided without a model call.

A plan costs a model call before anything else can start, and its sub-answers a call each; a
question that is one lookup is answered as well, one call sooner, straight from dual-level
retrieval (a single lookup's plan is one step that retrieval does as well).
needs_plan() is the rule, over the question's text alone:

- arithmetic or comparison asked for: a total, a sum, an average, a percentage, a ratio, a
  difference, "more/fewer/longer … than", "compare", "vs"; 总共, 平均, 百分之, 比例, 相比, 差多少;
  a quantity the question gives is a condition, not a value to compute ("replicas lagging more
  than like 10MB", "disk above 90 percent"), and a pasted error message in backticks
  ("`longer than max length 4093`") is what was seen, not what is asked: both are read past;
  a count over things someone or something has ("how many components does Jonas Berg own",
  "几个服务归…负责") — not "how many slots does each replica have", one value looked up;
- several asks: parts joined by "and", a comma, a semicolon or a second sentence (以及, 并且,
  还有, "，", "；"), two or more of which ask something (a question word: what, which, who, how,
  when, where, why within its first words, or is/does/can … as its first word; 什么, 哪, 谁,
  几, 多少, 怎么, 如何, 吗, 是否); a statement before the ask ("One partition is stuck. How
  do I get past it?") is context, not an ask;
- several named things: a list of three or more distinct identifiers (words holding "-", "_",
  "." or a digit, CamelCase, or `quoted`, with only a comma, "and", "or", "、" or "/" between
  them), as in a question about each of a list of services; names strewn through a pasted
  error message are one thing asked about.

Anything else is a single lookup. tests/core/reason/test_needs_plan.py holds the rule to the demo
questions (bot/demo_questions.json) and the chat messages of tests/data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.language.lexicon import AUXILIARIES, CJK_QUESTION_WORDS, MODALS, WH_WORDS, alternation

# Arithmetic and comparison, English and Chinese.
_ARITHMETIC = re.compile(
    r"\b(?:in total|total|sum|summed|altogether|combined|average|on average|percent(?:age)?|"
    r"ratio|difference|compare[ds]?|comparison|versus|vs\.?|"
    r"(?:more|fewer|less|longer|shorter|larger|smaller|bigger|higher|lower|faster|slower|"
    r"greater|earlier|later)\s+(?:\w+\s+){0,3}?than|how many more|how much more)\b|"
    r"总共|一共|合计|总和|总计|平均|百分之|百分比|比例|占比|相比|对比|比较一下|差多少|区别|差别|"
    r"哪个更",
    re.IGNORECASE,
)
# A quantity the question states: a comparison with a number ("more than like 10MB", "longer
# than max length 4093") or a percentage of nothing named ("above 90 percent"). At most two
# words between "than" and the number: "than like", "than max length".
_GIVEN_QUANTITY = re.compile(
    r"\b(?:more|fewer|less|longer|shorter|larger|smaller|bigger|higher|lower|faster|slower|"
    r"greater|earlier|later)\s+(?:\w+\s+){0,3}?than\s+(?:\S+\s+){0,2}?[~≈<>]?(?<![\w-])\d|"
    r"(?<![\w-])\d[\d.,]*\s*(?:percent|%)(?!\s*of\b)",
    re.IGNORECASE,
)
# A pasted message quoted in backticks: what was seen, not what is asked.
_QUOTED = re.compile(r"`[^`]*`")
# A count over the things someone or something has, owns, runs or uses.
_COUNT = re.compile(
    r"\bhow many\b(?:\s+[\w-]+){1,4}?\s+(?:does|do|did)\b(?:\s+[\w-]+){1,5}?\s+"
    r"(?:own|manage|maintain|look after|be responsible for)\b|"
    r"\bhow many\s+[\w-]+s\s+(?:use|depend on|run on|call|belong to|are owned by)\b|"
    r"\bhow many\b[^?]*\b(?:are there|exist)\b|"
    r"(?:几个|多少个)[^？?]*(?:归|负责|拥有|属于|依赖)|(?:归|负责|拥有|属于)[^？?]*(?:几个|多少个)",
    re.IGNORECASE,
)
# Where a question splits into parts.
_PART_BREAK = re.compile(
    r",\s*(?:and|or|but|then)\b|;|\band\b|\balso\b|[?？]\s*(?=\S)|[.!。！]\s+(?=\S)|[，；、]|"
    r"以及|并且|还有|另外|同时|而且",
    re.IGNORECASE,
)
# A part that asks something (its first words, or a Chinese question word anywhere in it).
_ASKS_EN = re.compile(
    rf"^\W*(?:(?:[\w@-]+\s+){{0,3}}?(?:{alternation(WH_WORDS)})(?:'s)?|"
    rf"(?:{alternation(AUXILIARIES | MODALS)}))\b",
    re.IGNORECASE,
)
_ASKS_ZH = re.compile(f"{alternation(CJK_QUESTION_WORDS)}|吗")
# Between two names of a list: a comma, "and", "or", a slash.
_LIST_SEPARATOR = re.compile(r"\s*(?:,\s*(?:and|or)?|\band\b|\bor\b|[、/，]|和|及|与)\s*$", re.I)
_IDENTIFIER = re.compile(
    r"`[^`]{2,60}`|\b[A-Za-z][\w]*[-_.][\w.-]*\w\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|"
    r"\b[A-Za-z]+\d\w*\b"
)
SEVERAL_NAMES = 3  # distinct identifiers that make a question about several named things
SEVERAL_ASKS = 2  # parts that ask something


def asking_parts(question: str) -> list[str]:
    """The parts of the question that ask something (see the module's rule)."""
    parts = [p.strip() for p in _PART_BREAK.split(question) if p and p.strip()]
    return [p for p in parts if _ASKS_EN.search(p) or _ASKS_ZH.search(p)]


def named_things(question: str) -> set[str]:
    """The distinct identifiers of the longest list the question names (case-folded, quotes
    dropped): names one after another with only a comma, "and", "or", "、" or "/" between them.
    Names strewn through a pasted error message are one thing asked about, not a list."""
    best: set[str] = set()
    run: set[str] = set()
    end = None
    for match in _IDENTIFIER.finditer(question):
        name = match.group(0).strip("`").lower()
        if end is not None and _LIST_SEPARATOR.fullmatch(question[end : match.start()]) is None:
            run = set()
        run.add(name)
        end = match.end()
        if len(run) > len(best):
            best = set(run)
    return best


@dataclass(frozen=True, slots=True)
class PlanNeed:
    """Why a question is worth a plan ("" when it is a single lookup), and its asking parts
    when asking several things is the only reason: no arithmetic, no count and no list of
    named things, so no part needs a value another part finds, and each part can be retrieved
    for on its own."""

    why: str
    parts: tuple[str, ...] = ()


def plan_need(question: str) -> PlanNeed:
    """The module's rule, each of its tests read once."""
    if _ARITHMETIC.search(_GIVEN_QUANTITY.sub(" ", _QUOTED.sub(" ", question))):
        return PlanNeed("it asks for arithmetic or a comparison")
    if _COUNT.search(question):
        return PlanNeed("it asks for a count of the things something has")
    asks = asking_parts(question)
    names = named_things(question)
    if len(asks) >= SEVERAL_ASKS:
        parts = () if len(names) >= SEVERAL_NAMES else tuple(asks)
        return PlanNeed(f"it asks {len(asks)} things", parts)
    if len(names) >= SEVERAL_NAMES:
        return PlanNeed(f"it names {len(names)} things")
    return PlanNeed("")


def needs_plan(question: str) -> bool:
    """Whether the question has several parts or needs arithmetic (the module's rule)."""
    return bool(plan_need(question).why)


__all__ = [
    "PlanNeed",
    "asking_parts",
    "named_things",
    "needs_plan",
    "plan_need",
]
