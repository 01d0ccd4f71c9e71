"""The KB's vocabulary: which passages hold a term, and how a term is looked for in them.

The coverage rule (core.gate.coverage) asks of every term of a message which passages hold it.
KbTerms indexes a KB's chunk texts once per KB version (Latin words by the keys
core.language.terms gives a message's words, CJK text by its pairs of characters, each passage's
heading path apart) and answers exactly, with one typo for a name, by a word's agent noun, by
the KB's own subject, and for a CJK word jieba cut across the KB's own vocabulary, as the KB
writes it. Here too: two CJK words the KB writes as one compound, and which passages of the
other script a word must be looked for in by translation.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import OSA

from core.language.lexicon import FUNCTION_ZIPF
from core.language.terms import (
    CJK_QUESTION,
    LATIN_WORD,
    Term,
    agent_forms,
    distinct_terms,
    is_cjk,
    passage_words,
    specificity,
    term_key,
)
from core.language.text import CJK_RUN, Language, cjk_pairs, detect_language
from core.language.words import fold, zipf
from core.vector_cache import SavedParts

# A name in more than half of the passages of a KB of at least this many is the KB's subject
# (KbTerms.lookup): in a KB of a few passages, most of them sharing a name says nothing.
SUBJECT_MIN_CHUNKS = 20
# A request of everyday words is covered by a passage whose heading holds all of them, when
# they are at least this many (KbTerms.headed): one word in a heading ("Steps") says nothing.
HEADED_TERMS = 2
# Passages a word is looked for in across scripts: the best few by the request's terms found
# lexically, and as many nearest by embedding (CoverageRule.check_with_nearest).
TRANSLATION_PASSAGES = 3
# A typo is one edit (a letter wrong, missing, added, or two swapped: OSA distance) in a word of
# at least this many letters: shorter words are one edit from too many others ("wat": what,
# was, way).
TYPO_LETTERS = 4
# A word read as a misspelling of a KB word is this much rarer in general language (Zipf) than
# the word it is read as: a typo is a word nobody writes ("kafak" 0.0 for "kafka" 3.0, "agian"
# 1.8 for "again" 5.7), a real word of its own is not ("pods" 3.5 beside "pod" 3.6).
TYPO_RARER = 1.0


@dataclass
class KbTerms:
    """Postings of the KB's chunk terms (the same keys as content_terms): term → chunks."""

    postings: dict[str, npt.NDArray[np.int32]]
    chunks: int
    by_prefix: dict[str, list[str]] = field(default_factory=dict)
    texts: tuple[str, ...] = ()
    languages: tuple[Language, ...] = ()  # each chunk's language (core.language.text's one rule)
    rows: dict[str, int] = field(default_factory=dict)  # chunk id → its index
    # each passage's words (words()) by its text: a text the KB holds twice, or that an earlier
    # version of the KB held (carry_words), is cut into words once
    _words: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _lines: dict[int, KbTerms] = field(default_factory=dict, repr=False)
    # the keys of each passage's first line (its heading path) → the passages: headed() asks
    # a message of everyday words, and scanning every heading for each message grows with the KB
    heads: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)
    # the KB's Latin words as written (folded), by first letter: what a typo is read as (respell)
    spellings: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _respelt: dict[str, str | None] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, texts: Sequence[str], ids: Sequence[str] = ()) -> KbTerms:
        found: dict[str, list[int]] = {}
        heads: dict[str, set[int]] = {}
        languages: list[Language] = []
        written: set[str] = set()
        for index, text in enumerate(texts):
            languages.append(detect_language(text))
            for key in _heading_keys(text):
                heads.setdefault(key, set()).add(index)
            folded = fold(text)
            latin = LATIN_WORD.findall(folded)
            written.update(w for w in latin if len(w) >= TYPO_LETTERS - 1 and w.isalpha())
            keys = {term_key(w) for w in latin}
            # identifiers also count by their parts: "lumen-dispatcher" answers "dispatcher"
            for word in list(keys):
                if any(c in word for c in "_.-"):
                    keys.update(term_key(p) for p in re.split(r"[_.\-]+", word) if p)
            for run in CJK_RUN.findall(folded):
                keys.update(cjk_pairs(run))
            for key in keys:
                found.setdefault(key, []).append(index)
        postings = {k: np.asarray(v, dtype=np.int32) for k, v in found.items()}
        by_prefix: dict[str, list[str]] = {}
        for key in postings:
            if len(key) >= 5 and key.isascii():
                by_prefix.setdefault(key[:2], []).append(key)
        spellings: dict[str, list[str]] = {}
        for word in sorted(written):
            spellings.setdefault(word[0], []).append(word)
        rows = {chunk_id: index for index, chunk_id in enumerate(ids)}
        return cls(
            postings,
            len(texts),
            by_prefix,
            tuple(texts),
            tuple(languages),
            rows,
            heads={key: frozenset(at) for key, at in heads.items()},
            spellings=spellings,
        )

    def respell(self, word: str) -> str | None:
        """The KB's word a message's word misspells: one edit away (TYPO_LETTERS, rapidfuzz's
        OSA distance, so "kafak" is "kafka" and "laggin" "lagging") and much more common in
        general language than it (TYPO_RARER). Matched against the KB's own words only, its
        first letter as written (typos rarely hit the first): a word the KB does not write is
        not corrected into one it does by general language."""
        if word in self._respelt:
            return self._respelt[word]
        found = None
        if len(word) >= TYPO_LETTERS and word.isascii() and word.isalpha():
            candidates = self.spellings.get(word[0], [])
            best = process.extractOne(word, candidates, scorer=OSA.distance, score_cutoff=1)
            rarer = best is not None and zipf(best[0], "en") - zipf(word, "en") >= TYPO_RARER
            if best is not None and best[0] != word and rarer:
                found = best[0]
        self._respelt[word] = found
        return found

    def to_parts(self) -> SavedParts:
        """As data (core.vector_cache.SavedParts), for the files a later process reads
        (from_parts): the postings as one array cut at offsets, the rest as JSON. The caches
        (_words, _lines) are left out: they fill again as they are asked."""
        keys = list(self.postings)
        lengths = [len(self.postings[k]) for k in keys]
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = (
            np.concatenate([self.postings[k] for k in keys]).astype(np.int32)
            if keys
            else np.zeros(0, dtype=np.int32)
        )
        values = {
            "keys": keys,
            "chunks": self.chunks,
            "by_prefix": self.by_prefix,
            "texts": list(self.texts),
            "languages": list(self.languages),
            "rows": self.rows,
            "heads": {key: sorted(at) for key, at in self.heads.items()},
            "spellings": self.spellings,
        }
        return SavedParts(values, {"postings": flat, "offsets": offsets})

    @classmethod
    def from_parts(cls, parts: SavedParts) -> KbTerms:
        """What to_parts wrote. ValueError when the parts are not that (a file broken or
        written by someone else): the caller builds the postings again."""
        try:
            v = parts.values
            keys, flat, offsets = v["keys"], parts.arrays["postings"], parts.arrays["offsets"]
            if flat.dtype != np.int32 or offsets.ndim != 1 or len(offsets) != len(keys) + 1:
                raise ValueError("postings and their offsets disagree")
            if len(offsets) and (offsets[0] != 0 or offsets[-1] != len(flat)):
                raise ValueError("postings and their offsets disagree")
            if np.any(np.diff(offsets) < 0):
                raise ValueError("postings and their offsets disagree")
            chunks = int(v["chunks"])
            texts = tuple(str(t) for t in v["texts"])
            languages = tuple(v["languages"])
            if len(texts) != chunks or len(languages) != chunks:
                raise ValueError("a passage count that its texts do not have")
            if any(lang not in ("en", "zh") for lang in languages):
                raise ValueError("an unknown language")
            if len(flat) and (int(flat.min()) < 0 or int(flat.max()) >= chunks):
                raise ValueError("a posting names no passage")
            postings = dict(zip(map(str, keys), np.split(flat, offsets[1:-1]), strict=True))
            return cls(
                postings,
                chunks,
                {str(k): [str(w) for w in words] for k, words in v["by_prefix"].items()},
                texts,
                languages,
                {str(k): int(i) for k, i in v["rows"].items()},
                heads={str(k): frozenset(int(i) for i in at) for k, at in v["heads"].items()},
                # a file written before typos were read has none: rebuilt, not read as empty
                spellings={
                    str(first): [str(w) for w in words] for first, words in v["spellings"].items()
                },
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not the parts of a KbTerms: {exc}") from exc

    def headed(self, terms: Sequence[Term]) -> bool:
        """Whether one passage's first line (its heading path: "Loom FAQ > Why is …?") holds
        every one of at least HEADED_TERMS distinct terms, exactly (CJK words by their pairs).
        A single CJK character (啥, 嘛) is in no pair, so none can say it holds it: it is left
        out, and does not count towards HEADED_TERMS."""
        keys = [key for key, term in distinct_terms(terms).items() if findable(term)]
        if len(keys) < HEADED_TERMS:
            return False
        wanted = {part for k in keys for part in (cjk_pairs(k) if CJK_RUN.fullmatch(k) else [k])}
        together: frozenset[int] | None = None  # the headings holding every part so far
        for part in sorted(wanted, key=lambda p: len(self.heads.get(p, ()))):  # rarest first
            held = self.heads.get(part, frozenset())
            together = held if together is None else together & held
            if not together:
                return False
        return True

    def words(self, index: int) -> tuple[str, ...]:
        """The chunk's own words in its own script (Latin words and identifiers' parts of an
        English chunk, jieba's words of a Chinese one), by the rule content_terms applies to a
        message: a word of the other script is looked for among these."""
        text = self.texts[index]
        known = self._words.get(text)
        if known is None:
            # the language is detect_language(text): the text alone decides the words
            known = passage_words(text, self.languages[index])
            self._words[text] = known
        return known

    def carry_words(self, earlier: KbTerms) -> None:
        """Take the words an earlier version of the KB cut its passages into, for the passages
        this version still holds as they were: a KB's new version (one file indexed again, or
        the same chunks read afresh) re-reads every chunk, and cutting the passages into words
        again (jieba, wordfreq) is the larger part of the cross-script look-up's time on a
        large KB."""
        held = set(self.texts)
        for text, words in list(earlier._words.items()):
            if text in held:
                self._words.setdefault(text, words)

    def lines(self, index: int) -> KbTerms:
        """The chunk's lines as passages of their own (a table row with its header row, which
        names its cells), looked up as the KB is: where in a passage a word is written."""
        known = self._lines.get(index)
        if known is None:
            known = KbTerms.build(_statements(self.texts[index]))
            self._lines[index] = known
        return known

    def common_words(self, limit: int) -> list[str]:
        """The `limit` words (words()) in the most passages, the most common first."""
        counts: dict[str, int] = {}
        for index in range(self.chunks):
            for word in self.words(index):
                counts[word] = counts.get(word, 0) + 1
        return sorted(counts, key=lambda word: -counts[word])[:limit]

    def script_words(self, cjk: bool) -> list[str]:
        """Every word (words()) of the passages written in CJK script (`cjk`) or in the other:
        the KB's own words for what a word of that script may translate (core.gate.rivals)."""
        found: dict[str, None] = {}
        for index in range(self.chunks):
            if (self.languages[index] == "zh") == cjk:
                found.update(dict.fromkeys(self.words(index)))
        return list(found)

    def lookup(self, term: Term) -> npt.NDArray[np.int32] | None:
        """The chunks holding the term: exactly, or for a name one typo away. A word is also in
        the passages holding its agent noun or its verb (agent_forms: "owns" in a table headed
        "Owner", 负责人 where the KB writes 负责). A name in most of a large enough KB's passages
        is the KB's subject ("Loom" in Loom's docs): every passage is about it, whether or not
        its heading repeats it, so it is in all of them — else "How do I roll back a Loom
        release?" is judged on the passages that happen to spell "Loom", not the one that
        says how to roll back."""
        hit = self._lookup(term.key, term.name)
        if term.name:
            if hit is not None and self.chunks >= SUBJECT_MIN_CHUNKS and hit.size * 2 > self.chunks:
                return np.arange(self.chunks, dtype=np.int32)
            return hit
        for form in agent_forms(term.key):
            other = self._lookup(form, False)
            if other is not None:
                hit = other if hit is None else np.union1d(hit, other).astype(np.int32)
        if hit is None and term.context:
            hit = self._as_written(term)
        return hit

    def _as_written(self, term: Term) -> npt.NDArray[np.int32] | None:
        """The passages holding a CJK word the KB does not write, read as the KB writes its
        characters with a neighbour jieba left on its own. jieba cuts the words of a team's own
        vocabulary, which its dictionary lacks, across their boundaries: "银联验签用什么算法" gives
        验/签用, "回调最多重试几次" 最/多重/试, "双十一大促" 双/十一大/促, so the KB's 验签,
        重试 and 大促 were never looked for, and the pieces counted against the question. The
        runs of pairs the KB holds (its postings index CJK text by pairs of characters) that
        take in the word's characters are the word as the KB reads it when one of them takes in
        such a neighbour, and together they take in at least half of the word. A neighbour of
        everyday frequency (的, 是, 最: FUNCTION_ZIPF) or a question particle (吗, 呢) is the
        question's, never part of the KB's word; one jieba put in a word of its own (双十 in
        双十/一买) is that word's (the context holds none). Not the word's own pairs alone: on
        real chat against a large KB, "这不贵" read as 这不 and "不换个" as 换个 bring chatter
        in. The passages are those holding every such run. The word keeps its own weight."""
        text, start = term.context, term.at
        end = start + len(term.key)
        held = [
            i
            for i in range(len(text) - 1)
            if text[i : i + 2] in self.postings
            and all(start <= j < end or _joins(text[j]) for j in (i, i + 1))
        ]
        spans: list[tuple[int, int]] = []
        for i in held:
            if spans and spans[-1][1] == i + 1:
                spans[-1] = (spans[-1][0], i + 2)
            else:
                spans.append((i, i + 2))
        spans = [(a, b) for a, b in spans if a < end and b > start]
        inside = {j for a, b in spans for j in range(max(a, start), min(b, end))}
        across = any(a < start or b > end for a, b in spans)
        if not across or 2 * len(inside) < end - start:
            return None
        found: npt.NDArray[np.int32] | None = None
        for a, b in spans:
            part = self._lookup(text[a:b], False)
            if part is None:
                return None
            found = part if found is None else np.intersect1d(found, part).astype(np.int32)
        return found if found is not None and found.size else None

    def _lookup(self, key: str, name: bool) -> npt.NDArray[np.int32] | None:
        hit = self.postings.get(key)
        if hit is not None:
            return hit
        if len(key) >= 3 and CJK_RUN.fullmatch(key):
            # the KB indexes CJK bigrams: a longer word is in the passages holding all of its
            # bigrams (an approximation that only errs towards "found")
            found: npt.NDArray[np.int32] | None = None
            for pair in cjk_pairs(key):
                part = self.postings.get(pair)
                if part is None:
                    return None
                found = part if found is None else np.intersect1d(found, part)
            return found if found is not None and found.size else None
        if name and len(key) >= 5 and key.isascii():
            # one typo (OSA: a transposition is one, "Natarjan", "kafak"), by rapidfuzz
            candidates = self.by_prefix.get(key[:2], [])
            near = process.extractOne(key, candidates, scorer=OSA.distance, score_cutoff=1)
            if near is not None:
                return self.postings[near[0]]
        return None


def _statements(text: str) -> list[str]:
    """A passage's lines, each a statement of its own, except a table's rows: each with the
    table's first row (its header), which says what the row's cells are ("| 姓名 | 负责 | 所在城市
    |" above "| Aiyana Whitehorse | 团队经理 | 阿姆斯特丹 |")."""
    found: list[str] = []
    header = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.lstrip().startswith("|"):
            header = ""
            found.append(line)
        elif not header:
            header = line
            found.append(line)
        else:
            found.append(f"{header}\n{line}")
    return found


def _heading_keys(text: str) -> set[str]:
    """The keys of a passage's first line, its heading path ("Loom FAQ > Why is …?"): Latin
    words by content_terms' keys, CJK text by its pairs of characters."""
    first = fold(text.split("\n", 1)[0])
    keys = {term_key(w) for w in LATIN_WORD.findall(first)}
    for run in CJK_RUN.findall(first):
        keys.update(cjk_pairs(run))
    return keys


def _joins(neighbour: str) -> bool:
    """Whether a character next to a word may be part of it as the KB writes it (KbTerms.
    _as_written): not one of everyday frequency, nor a question particle."""
    return zipf(neighbour, "zh") < FUNCTION_ZIPF and not CJK_QUESTION.fullmatch(neighbour)


def findable(term: Term) -> bool:
    """Whether the KB's postings could hold the word: they index CJK text by pairs of
    characters, so a single character (嘛, 吃, 了) is in none of them, whatever the KB says."""
    return not is_cjk(term) or len(term.key) >= 2


def compounds(terms: Sequence[Term], kb: KbTerms) -> tuple[Term, ...]:
    """The terms with two neighbouring CJK words the KB writes together made one, weighed as
    one. jieba splits compounds its dictionary lacks into everyday words: "我们的发布窗口是什么
    时候？" gives 发布 (0.03) and 窗口 (0.21), too light together (< min_weight) for the look-up
    to count, though a passage says 发布窗口, a word as specific as any name (Zipf 3.3: 0.40).
    Words only, as the postings hold them (exactly, or all of the compound's pairs in one
    passage); not across words the question's frame stands between."""
    joined: list[Term] = []
    skip = False
    for term, after in itertools.zip_longest(terms, terms[1:]):
        if skip:
            skip = False
            continue
        if term.head and not term.name:
            # the word before it too common to be a term ("产品经理是哪位": 产品, Zipf 5.6, and
            # 经理 0.15 alone: nothing to look up), a compound the KB writes (产品经理, 0.34)
            word = term.head + term.key
            weight = specificity(zipf(word, "zh"))
            if weight > term.weight and kb._lookup(word, False) is not None:
                term = Term(word, word, weight, False, next_word=term.next_word)
        if term.next_word and after is not None and after.key == term.next_word:
            word = term.key + after.key
            weight = specificity(zipf(word, "zh"))
            if weight > 0.0 and kb._lookup(word, False) is not None:
                joined.append(Term(word, word, weight, False))
                skip = True
                continue
        joined.append(term)
    return tuple(joined)


def respelled(terms: Sequence[Term], kb: KbTerms) -> tuple[Term, ...]:
    """The terms with each misspelt word the KB does not hold read as the KB word it misspells
    (KbTerms.respell), weighed as that word: "kafak consumer laggin" asks about kafka and
    lagging, which the KB writes, not about two words found nowhere that weighed like names. A
    misspelt everyday word ("agian") is the frame it stands for, and is dropped. A word no
    dictionary knows is read as a name, and its own look-up (one typo in a name, KbTerms.lookup)
    misses the KB's words it stems ("laggin": the KB's key is "lag"), so names are respelt too."""
    fixed: list[Term] = []
    for term in terms:
        # A word the KB writes stays, and one it finds by another form ("owns": "Owner"); a
        # name found one typo away is respelt all the same, to weigh as the word it misspells.
        unwritten = not is_cjk(term) and term.key not in kb.postings
        respell = unwritten and (term.name or kb.lookup(term) is None)
        word = kb.respell(term.surface) if respell else None
        if word is None:
            fixed.append(term)
            continue
        weight = specificity(zipf(word, "en"))
        if zipf(word, "en") < FUNCTION_ZIPF and weight > 0.0:
            fixed.append(Term(term_key(word), word, weight, False))
    return tuple(fixed)


Translations = dict[str, npt.NDArray[np.int32]]


def _lexical_best(terms: Sequence[Term], kb: KbTerms, limit: int) -> list[int]:
    per_chunk = np.zeros(kb.chunks)
    for term in distinct_terms(terms).values():
        chunks = kb.lookup(term)
        if chunks is not None:
            per_chunk[chunks] += term.weight
    # the best of the chunks holding a term, ties in index order: sorting every chunk of a
    # large KB for a few cost more than the rest of the look-up
    held = np.flatnonzero(per_chunk > 0.0)
    order = held[np.argsort(-per_chunk[held], kind="stable")[:limit]]
    return [int(i) for i in order]


def untranslated(
    terms: Sequence[Term], kb: KbTerms, nearest: Sequence[int], across: Sequence[int] = ()
) -> list[tuple[Term, int]]:
    """(word, passage) pairs to judge across scripts: a word of the request (not a name: names
    and identifiers are spelt alike in either language) absent from a candidate passage written
    in the other script. Candidates: the best few passages by the terms found lexically, the
    `nearest` by embedding, and `across`, the next nearest, for the other script's words only.
    A CJK word the KB writes nowhere is also paired with the candidates of its own script
    (not `across`): jieba may have cut it around the KB's word (within, which
    CoverageRule.translations reads)."""
    candidates = dict.fromkeys([*_lexical_best(terms, kb, TRANSLATION_PASSAGES), *nearest])
    # Farther passages of the word's own script stay out: on real chat, reading 超高速 as 高速
    # or 聊天记录 as 记录 there lets unanswerable messages in and no answerable one.
    farther = dict.fromkeys(index for index in across if index not in candidates)
    pairs: list[tuple[Term, int]] = []
    for term in distinct_terms(terms).values():
        if term.name:
            continue
        found = kb.lookup(term)
        for index in [*candidates, *farther]:
            if (kb.languages[index] == "zh") == is_cjk(term):
                if index in farther:
                    continue
                if found is None and is_cjk(term) and within(term.key, kb.words(index)):
                    pairs.append((term, index))
                continue
            if found is None or index not in found:
                pairs.append((term, index))
    return pairs


def within(word: str, words: Sequence[str]) -> tuple[str, ...]:
    """The passage's `words` written inside a CJK word the KB writes nowhere, taking in at
    least half of it: jieba cuts a team's words it does not know together with a neighbour
    ("怎么给用户临时加风控白名单" gives 加风控 where the KB writes 风控; "能用真钱付吗" 真钱付
    where it writes 真钱), and the KB's word inside is then what was written, when the embedder
    says the two mean the same (CoverageRule.translations: 加风控 ~ 风控 0.81, 真钱付 ~ 真钱
    0.90)."""
    return tuple(w for w in words if len(w) >= 2 and 2 * len(w) >= len(word) and w in word)
