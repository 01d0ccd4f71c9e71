"""The scores of one answer or one ranking: choice letters, exact match and F1, recall@k.

Pure functions over strings and lists: the runs and reports build on them.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from core.language.text import CJK_CHAR, CJK_IDEOGRAPHS
from core.model_output import strip_reasoning

# --- single-choice answers ---------------------------------------------------------------------

DEFAULT_LETTERS = "ABCD"
# "A. text", "B) text", "(C) text", "D：text" at the start of a line of the question.
_OPTION_LINE = re.compile(r"^\s*[(（]?([A-Z])[)）.．:：、]\s*(.+?)\s*$", re.MULTILINE)
# Words that announce the chosen letter, in English and Chinese, strongest first
# ("选项A和B都不对，答案是C" chooses C). Joining words may come between ("is", "是", "应该选").
_JOINERS = r"(?:\s*(?:is|would be|should be|must be|:|：|是|为|应该是|应为|应选|选|就是))*"
_LETTER_AFTER = r"\s*[:：]?\s*[(（\[【]?\s*([A-Za-z])(?![A-Za-z])"
_ANNOUNCE = tuple(
    re.compile(words + _JOINERS + _LETTER_AFTER, re.IGNORECASE)
    for words in (
        r"(?:answer|答案|正确选项|应选|choose|pick|select)",
        r"(?:option|choice|选项|选择|选)",
    )
)
# The whole reply is a letter, maybe bracketed, maybe with a full stop: "B", "(b)", "C.".
_BARE = re.compile(r"^[(（\[【]?\s*([A-Za-z])\s*[)）\]】]?\s*[.。．!]?$")
# The reply starts with a letter that is clearly an option label: "B. …", "B) …", "B：…", "B，…".
_LEADING = re.compile(rf"^[(（\[【]?([A-Z])(?:[)）\]】.．:：,，、]|\s*$|\s*[{CJK_IDEOGRAPHS}])")
# A bracketed capital anywhere: "(C)", "（C）", "【C】".
_BRACKETED = re.compile(r"[(（\[【]([A-Z])[)）\]】]")
# A lone capital letter; "A" before a lower-case word is the English article, not an option
# (but "A or B", "A is right" name it).
_LONE = re.compile(r"(?<![A-Za-z])([B-Z]|A(?!\s+(?!or\b|and\b|is\b)[a-z]))(?![A-Za-z])")
_MARKUP = re.compile(r"[*_`#>]+")


def option_letters(question: str) -> str:
    """The option letters a question lists ("A. …" lines), or A–D when none are found."""
    letters = "".join(dict.fromkeys(m.group(1) for m in _OPTION_LINE.finditer(question)))
    return letters if len(letters) >= 2 else DEFAULT_LETTERS


def options(question: str) -> dict[str, str]:
    """Option letter -> option text, as listed in the question."""
    return {m.group(1): m.group(2) for m in _OPTION_LINE.finditer(question)}


def parse_choice(reply: str, question: str = "") -> str | None:
    """The option letter a reply chooses, or None when it names none (or several).

    In order: an announced letter ("the answer is A", "答案是 C", "Answer: D."), a reply that
    is only a letter ("B", "(b)"), a reply that starts with an option label ("B. …"), then a
    bracketed or lone capital if exactly one option letter appears, then the one option whose
    text the reply repeats.
    """
    letters = option_letters(question)
    # A reasoning model weighs every option inside <think> ("A? no, B…"): only the reply counts.
    text = _MARKUP.sub("", strip_reasoning(reply)).strip()
    if not text:
        return None
    for announce in _ANNOUNCE:
        for match in announce.finditer(text):
            letter = match.group(1).upper()
            if letter in letters:
                return letter
    bare = _BARE.match(text)
    if bare and bare.group(1).upper() in letters:
        return bare.group(1).upper()
    leading = _LEADING.match(text)
    if leading and leading.group(1) in letters:
        return leading.group(1)
    for pattern in (_BRACKETED, _LONE):
        found = {m.group(1) for m in pattern.finditer(text)} & set(letters)
        if len(found) == 1:
            return found.pop()
        if found:
            return None  # several letters named: no choice
    # Whole words only: option "c" is not quoted by "I cannot tell".
    said = f" {normalise_answer(text)} "
    quoted = [
        letter
        for letter, option in options(question).items()
        if normalise_answer(option) and f" {normalise_answer(option)} " in said
    ]
    return quoted[0] if len(quoted) == 1 else None


def gold_letter(answer: str) -> str:
    """The gold letter of a data set answer ("B", " b ", "B. text")."""
    found = parse_choice(answer)
    if found is None:
        raise ValueError(f"not an option letter: {answer!r}")
    return found


# --- exact match and F1 (SQuAD/HotpotQA normalisation, with Chinese characters as tokens) ----

_CITATION = re.compile(r"\[\d{1,3}\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation) | set("，。！？；：、“”‘’（）《》【】—…·「」")


def normalise_answer(text: str) -> str:
    """Lower case, citations, punctuation and English articles dropped, spaces collapsed;
    each Chinese character stands apart (a character is Chinese's word)."""
    text = _CITATION.sub(" ", text).lower()
    text = "".join(" " if ch in _PUNCTUATION else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    text = CJK_CHAR.sub(r" \g<0> ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: Iterable[str]) -> float:
    """1.0 when the prediction equals any gold answer after normalisation."""
    predicted = normalise_answer(prediction)
    return float(any(predicted == normalise_answer(g) for g in gold))


def f1(prediction: str, gold: Iterable[str]) -> float:
    """The best token-overlap F1 of the prediction against any gold answer.

    As HotpotQA scores it: yes/no/noanswer must match exactly (no partial credit).
    """
    predicted = normalise_answer(prediction).split()
    best = 0.0
    for answer in gold:
        expected = normalise_answer(answer).split()
        special = {"yes", "no", "noanswer"}
        if (" ".join(predicted) in special or " ".join(expected) in special) and (
            predicted != expected
        ):
            continue
        common = Counter(predicted) & Counter(expected)
        overlap = sum(common.values())
        if overlap == 0:
            continue
        precision, recall = overlap / len(predicted), overlap / len(expected)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


# --- rankings --------------------------------------------------------------------------------


def matches(source: str, document_id: str) -> bool:
    """Whether an indexed source id is the data set's document: the same id, or a corpus
    record of it ("corpus.jsonl#<id>", which is how `tacit index` names corpus records)."""
    return source == document_id or source.endswith("#" + document_id)


def ranked_documents(sources: Sequence[str]) -> list[str]:
    """Chunk sources in rank order, each document once (its best chunk's place)."""
    return list(dict.fromkeys(sources))


def found(sources: Sequence[str], supporting: Sequence[str]) -> list[str]:
    """The supporting ids that some source among `sources` is."""
    return [sid for sid in supporting if any(matches(s, sid) for s in sources)]


def recall_at(sources: Sequence[str], supporting: Sequence[str], k: int) -> float:
    """Share of supporting documents among the first k distinct documents retrieved."""
    if not supporting:
        return 0.0
    top = ranked_documents(sources)[:k]
    return len(found(top, supporting)) / len(set(supporting))


def within_budget(chunks: Sequence[tuple[str, int]], budget: int) -> list[str]:
    """Sources of the chunks (source, tokens) that fit in `budget` tokens, in rank order.

    The context is filled in rank order and stops at the first chunk that does not fit, as a
    prompt built from the ranking would.
    """
    used = 0
    kept: list[str] = []
    for source, tokens in chunks:
        if used + tokens > budget:
            break
        used += tokens
        kept.append(source)
    return kept
