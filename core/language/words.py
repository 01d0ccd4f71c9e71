"""Word-level rules shared by the gate's coverage rule and the plan steps' row matching: how a
text is folded before words are compared, an English word's stem, and how common a word is in
general language. One place, so the two readers of a knowledge base's words agree."""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Any

from core.language.text import fold_diacritics


def normalise(text: str) -> str:
    """NFKC and case-folded: full-width punctuation and letters compare equal to ASCII ones."""
    return unicodedata.normalize("NFKC", text).casefold()


def fold(text: str) -> str:
    """normalise, and Latin diacritics removed: "Tomás" and "tomas" are one name, and
    "Bolesław" one word. Accents fold by the rule lexical search uses (core.language.text)."""
    return fold_diacritics(normalise(text))


@lru_cache(maxsize=1)
def _english_stemmer() -> Any:
    import snowballstemmer  # pure Python (Snowball's English stemmer), loaded on first use

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The English stem of a folded word (Snowball): "owns" → "own", "segments" → "segment"."""
    return str(_english_stemmer().stemWord(word))


def is_identifier(word: str) -> bool:
    """A folded word with a digit or a separator (LUMEN_SPOOL_DIR, lumen.events.v2, 8443) names
    one thing: it is matched whole, never stemmed."""
    return not word.isalpha()


@lru_cache(maxsize=65536)
def zipf(word: str, language: str) -> float:
    """Zipf frequency in general language (wordfreq; 0 for words it has never seen)."""
    from wordfreq import zipf_frequency  # its word lists load on first use

    return float(zipf_frequency(word, language))


# A contraction written without its apostrophe ("whats", "dont", "theres"), as chat writes it:
# wordfreq knows the contraction ("what's") better than the bare spelling, and it is one of
# a function word ("what" + 's) or a negation (n't). Read as a word, "whats" is rare enough to
# be a content term the passage must hold. The contraction's own frequency decides, not a
# list: a possessive of a content word ("worlds" as "world's") does not pass the stem's bar.
_CONTRACTED_ZIPF = 3.9  # the contraction is a word people write ("how's" 3.95; "when's" 3.2)
_FUNCTION_STEM_ZIPF = 6.0  # core.language.lexicon.FUNCTION_ZIPF: "what", "there", "you"


@lru_cache(maxsize=8192)
def bare_contraction(word: str) -> bool:
    """Whether a folded Latin word is a contraction written without its apostrophe."""
    if len(word) < 4 or not word.isalpha():
        return False
    written = zipf(word, "en")
    candidates: list[tuple[str, str | None]] = []
    if word.endswith("nt"):
        candidates.append((f"{word[:-1]}'t", None))  # n't: a negation, whatever the verb
    if word[-1] in "sdm":
        candidates.append((f"{word[:-1]}'{word[-1]}", word[:-1]))
    if word[-2:] in ("re", "ve", "ll"):
        candidates.append((f"{word[:-2]}'{word[-2:]}", word[:-2]))
    return any(
        zipf(contracted, "en") >= max(_CONTRACTED_ZIPF, written + 1e-9)
        and (stem is None or zipf(stem, "en") >= _FUNCTION_STEM_ZIPF)
        for contracted, stem in candidates
    )


__all__ = ["bare_contraction", "fold", "is_identifier", "normalise", "stem", "zipf"]
