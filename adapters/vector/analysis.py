"""How chunk text is cut into BM25 terms: one definition for Milvus's analyzer and the in-process
index (adapters/vector/bm25_index.py), so both find the same chunks for the same words.

jieba segments Chinese into words and English on spaces and punctuation, so one analyzer serves
the zh+en KBs Tacit is built for. Milvus servers ship jieba; Lite and the in-process index need
the `jieba` package. Both run jieba's search mode (`cut_for_search`, through
core.language.chinese_words: a long word also yields the dictionary words inside it),
lower-case, and drop the stop words below. (The standard analyzer splits on non-word characters
only: a run of Chinese characters becomes a single token and Chinese lexical search finds
nothing.)

The in-process index also folds Latin diacritics first (core.language.text.fold_diacritics),
at index and at query time alike: jieba cuts a word at its first non-ASCII letter ("Aschenbrödel" ->
"aschenbr", "ö", "del"), so a question spelling "Aschenbrodel" found nothing. Chinese,
Japanese and Korean text is left as it was. Milvus's own BM25 function (a server, or Lite with
lexical="milvus") runs DEFAULT_ANALYZER on the stored text and does not fold, on both sides
too, so each path is consistent with itself: `analyse(text)` is exactly Milvus's cut of
`fold_diacritics(text)` (tests/adapters/vector/test_bm25_index.py checks it), and text without Latin
diacritics is cut identically by both. Folding on a server as well would need a folded copy of
each chunk's text as the function's input field (the stored text is what searches return).
ANALYSER_VERSION names this cut: an index saved with another is rebuilt from its texts.
"""

from __future__ import annotations

from typing import Any

from core.language.chinese_words import search_words
from core.language.text import fold_diacritics

# Bumped whenever analyse() cuts any text differently: saved in-process indexes record it.
ANALYSER_VERSION = 2

# Punctuation the tokenizer emits as tokens of its own: as BM25 terms they only add noise.
PUNCTUATION = list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`") + list(
    "，。！？；：、“”‘’（）《》〈〉【】「」『』…—·～"
)

# Function words: BM25's idf discounts them but does not silence them, and in a question ("Who
# was the director of …") they outnumber the terms that matter, so dropping them ranks the
# passages about those terms higher (bench/bench_retrieval.py measures it). The list is
# explicit because Lite ignores Milvus's "_english_" shorthand (and its stemmer filter).
_ENGLISH_FUNCTION_WORDS = (
    "a an the and or but if of in on at to for by with from into onto about as than then "
    "is are was were be been being am do does did has have had having will would shall should "
    "can could may might must it its it's this that these those there here who whom whose "
    "which what when where why how i you he she we they me him her us them my your his our "
    "their not no so such also too very just only any some each both all s t"
)
FUNCTION_WORDS = [*_ENGLISH_FUNCTION_WORDS.split(), *"的了是在和与及或也都就而吗呢吧啊呀么"]
STOP_WORDS = frozenset(PUNCTUATION + FUNCTION_WORDS)

# Milvus's analyzer parameters for the same cut. "lowercase" is a no-op in Lite (its jieba
# analyzer lower-cases already) and needed on a server.
DEFAULT_ANALYZER: dict[str, Any] = {
    "tokenizer": "jieba",
    "filter": ["lowercase", {"type": "stop", "stop_words": PUNCTUATION + FUNCTION_WORDS}],
}


def analyse(text: str) -> list[str]:
    """The BM25 terms of `text`, in order, repeats kept (term frequency counts them)."""
    terms = (t.strip().lower() for t in search_words(fold_diacritics(text)))
    return [t for t in terms if t and t not in STOP_WORDS]
