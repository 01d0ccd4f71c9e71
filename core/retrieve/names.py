"""The names a passage writes: what a bridge to another passage can be.

A multi-hop question names one thing and asks about another that the first one's passage
names ("the woman who portrayed Corliss Archer in Kiss and Tell": the film's page says
"starring Shirley Temple"). The NLP extractor's terms are a poor list of those names: ten per
chunk, ranked by frequency, cut at ASCII letters ("Androscoggin Bank Colis"), and a long
capitalised run is split into words. So the bridges also take the passage's own names, read at
question time from the few best first-hop passages:

- runs of capitalised words (any script with case: "Lourenço Mutarelli", "Aschenbrödel"),
  joined by a short lowercase connector ("Prime Minister of Australia");
- variants, because the run is not always the name: without a leading number ("17-year-old
  Shirley Temple" -> "Shirley Temple"), split at "and" ("Kiss and Tell" and "Kiss", "Tell"),
  and joined across a comma ("McLean, Virginia", the form of many place and page titles);
- quoted titles (core.retrieve.keywords.quoted_terms), in English and Chinese (《…》).

A candidate becomes a bridge only when a passage is headed by it (core.retrieve.graph_chunks
looks each one up), so a variant that names nothing costs one term lookup and no ranking.
"""

from __future__ import annotations

import re

from core.language.lexicon import ENGLISH_STOP_WORDS, NAME_CONNECTORS, SENTENCE_OPENERS
from core.models import unique_in_order
from core.retrieve.keywords import quoted_terms

# A word (starting with a letter or digit; apostrophes, dots and hyphens inside: "O'Brien",
# "F.C.", "Buck-Tick", "2011–12") or one other visible character.
_TOKEN = re.compile(r"[^\W_][\w'’.\-–]*|[^\w\s]")


def _capitalised(token: str) -> bool:
    return token[:1].isupper() or token[:1].isdigit()


def _ends_sentence(token: str) -> bool:
    """A word with a final full stop that is not an initial or abbreviation ("W.", "F.C.")."""
    return token.endswith(".") and len(token) > 3 and "." not in token[:-1]


def _trim(words: list[str]) -> list[str]:
    while words and (
        words[0].casefold() in ENGLISH_STOP_WORDS or words[0].casefold() in SENTENCE_OPENERS
    ):
        words = words[1:]
    # A name ends in a word: not a connector, not a number ("Manchester United F.C. of the
    # 1995–96" season).
    while words and (words[-1].casefold() in NAME_CONNECTORS or words[-1][:1].isdigit()):
        words = words[:-1]
    return words


def _variants(words: list[str]) -> list[list[str]]:
    """The run itself, without its leading numbers, and its parts around "and"."""
    found = [words]
    start = 0
    while start < len(words) and words[start][:1].isdigit():
        start += 1
    if 0 < start < len(words):
        found.append(words[start:])
    lowered = [w.casefold() for w in words[start:]]
    if "and" in lowered:
        part: list[str] = []
        for word in words[start:]:
            if word.casefold() == "and":
                found.append(part)
                part = []
            else:
                part.append(word)
        found.append(part)
    return found


def _is_name(words: list[str]) -> bool:
    name = " ".join(words)
    if len(name) < 3 or not any(ch.isalpha() for ch in name):
        return False
    # A lone capitalised common word opens many sentences ("Kiss", "Born"); a lone word is a
    # name only when it is at least four letters.
    return len(words) > 1 or len(name) >= 4


def capitalised_names(text: str) -> list[str]:
    """Names as runs of capitalised words and their variants, first mention first, each once."""
    runs: list[tuple[list[str], int, int]] = []  # (words, start, end) in text
    run: list[str] = []
    run_start = run_end = 0

    def close() -> None:
        nonlocal run
        if run:
            runs.append((run, run_start, run_end))
        run = []

    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if not token[:1].isalnum():
            close()
            continue
        if _capitalised(token):
            if not run:
                run_start = match.start()
            ends = _ends_sentence(token)
            run.append(token.rstrip(".") if ends else token)
            run_end = match.end()
            if ends:
                close()
        elif run and token.casefold() in NAME_CONNECTORS:
            run.append(token)
        else:
            close()
    close()

    names: list[str] = []
    previous: tuple[list[str], int] | None = None  # the last run's words and end offset
    for words, start, end in runs:
        for variant in _variants(_trim(words)):
            trimmed = _trim(variant)
            if _is_name(trimmed):
                names.append(" ".join(trimmed))
        # "McLean, Virginia": two runs with only a comma between them.
        if previous is not None and text[previous[1] : start].strip() == ",":
            left, right = _trim(previous[0]), _trim(words)
            if left and right and right[0][:1].isupper() and _is_name(left):
                names.append(f"{' '.join(left)}, {' '.join(right)}")
        previous = (words, end)
    return unique_in_order(names)


def passage_names(text: str, *, limit: int) -> list[str]:
    """Quoted titles, then capitalised names, first mention first, at most `limit`."""
    return unique_in_order([*quoted_terms(text), *capitalised_names(text)])[:limit]
