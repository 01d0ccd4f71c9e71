"""What the KB holds of a message's terms: the evidence the coverage rule weighs.

For the distinct terms of a request (core.language.terms), looked up in the KB (core.gate.kb_terms)
or found in a passage of the other script by translation: the share of their weight the KB
holds, the share the best single passage holds together, the names found, and how much of the
ask (the words that are not names) that passage holds, in each script the message is written
in. The thresholds that turn the evidence into a verdict are the rule's (core.gate.coverage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.gate.kb_terms import SUBJECT_MIN_CHUNKS, KbTerms, Translations, findable
from core.language.asked_values import writes
from core.language.lexicon import ROLE_ASKS
from core.language.terms import ASK_WEIGHT, NUMBER, Term, distinct_terms, is_cjk
from core.language.text import LEADS_IN


@dataclass(frozen=True, slots=True)
class Evidence:
    terms: float  # share of the weighted terms found in the KB
    passage: float  # … found together in the best single passage
    weight: float  # total weight of the terms
    names: float  # names found
    ask: float  # share of the words' weight (the terms that are not names) in that passage
    unasked: tuple[str, ...] = ()  # the words of the least covered script that passage lacks
    light: bool = False  # the ask was made of light words only (light_words)


def _chunks_of(
    term: Term, kb: KbTerms, translated: Translations | None
) -> npt.NDArray[np.int32] | None:
    found = kb.lookup(term)
    other = None if translated is None else translated.get(term.key)
    if other is None:
        return found
    return other if found is None else np.union1d(found, other)


def term_evidence(
    terms: Sequence[Term],
    kb: KbTerms | None,
    translated: Translations | None = None,
    light: Sequence[Term] = (),
    asked_for: frozenset[str] = frozenset(),
    *,
    context: bool = False,
    how: bool = False,
    degrees: frozenset[str] | None = None,
    titled: frozenset[str] = frozenset(),
    values: Sequence[str] = (),
) -> Evidence:
    """The evidence of the distinct terms: a term is in a passage that holds it, or for a word
    of the other script, a translation of it (`translated`: term → chunks, see translations).
    `light`: the message's light words (light_words), the ask when no term is heavy enough.
    `asked_for`: the words a question word asks for (answer_kinds). `context`: the terms are
    the whole message's because its request has none of its own ("the spool segment is full,
    what now?"): the words around a request say what it is about, not what it asks. `how`:
    the request asks for a way (asks_how). `degrees`: the words "how" asks for (answer_kinds
    with _HOW; None: all of `asked_for`). `titled`: the words the message writes in title case
    (titled_words): names written so, or in Chinese, are a person's. `values`: the kinds of
    value the question words ask for (Analysis.values), each one more word of the ask, held by
    a best passage whose line about what the question names writes one (_value_chunks)."""
    distinct = distinct_terms(terms)
    total = sum(t.weight for t in distinct.values())
    if not distinct or total <= 0.0 or kb is None or kb.chunks == 0:
        return Evidence(0.0, 0.0, total, 0.0, 0.0)
    matched = 0.0
    names = 0.0
    per_chunk = np.zeros(kb.chunks)
    # the ask's words by script (0: Latin, 1: CJK): their weight, and per chunk what is found
    ask_total = [0.0, 0.0]
    asked = np.zeros((2, kb.chunks))
    words: list[tuple[Term, npt.NDArray[np.int32] | None]] = []
    for term in distinct.values():
        ask = not term.name and term.weight >= ASK_WEIGHT
        chunks = _chunks_of(term, kb, translated)
        if ask:
            ask_total[is_cjk(term)] += term.weight
            words.append((term, chunks))
        if chunks is None:
            continue
        matched += term.weight
        names += 1.0 if term.name else 0.0
        per_chunk[chunks] += term.weight
        if ask:
            asked[int(is_cjk(term)), chunks] += term.weight
    best = per_chunk.max()
    # A message in two scripts is asked in each: both parts must be in the passage.
    at_best = np.flatnonzero(per_chunk >= best - 1e-9)
    shares = _ask_shares(asked, ask_total, at_best)
    lightly = False
    # An identifier or a number names one thing its passage defines: light words about it, in
    # the script of that passage, ask what it is ("What does LUMEN_MAX_ATTEMPTS control?"), as
    # does the word a question word asks for ("LUMEN_BREAKER_OPEN_S 是什么意思？": a meaning).
    # A name written as words (a person, a team) can be asked about anything.
    by_words = all(t.surface.isalpha() for t in distinct.values() if t.name)
    # An identifier names one thing its passage defines, and a word the KB writes somewhere (in
    # its own script, _written) is the KB's own vocabulary: asked about an identifier, such
    # words ask what that passage is there to say, in whatever words it says it. "What does
    # LUMEN_METRICS_PORT expose?" (the demo KB writes "exposed" elsewhere, not in the line
    # defining the port) is answered by that line; "Is
    # lumen-ledger a vegetarian?" asks in a word the KB writes nowhere, and "LUMEN_MAX_ATTEMPTS
    # 法国的首都是哪里？" too (法国). Every word of the ask must be the KB's: one word it writes
    # nowhere leaves the evidence as it was. Not about a number: 650 or 2020 in chat is a board,
    # a year, a count, not one thing a passage defines, and on real group chat numbers let
    # unanswerable messages in where identifiers let answerable ones in. The passage then holds
    # those words for its passage coverage too, so "Which component reads
    # LUMEN_DISPATCH_CONCURRENCY?" is found together in the line that defines it.
    # A word the KB only translates into some passage is not its own: "Where does LOOM_ENV go
    # on weekends?" found 周末 in a Chinese page.
    identified = _identifier_chunks(distinct, kb, translated)
    written = [
        (term, chunks) for term, chunks in words if chunks is not None and _written(term, kb)
    ]
    if shares and identified is not None and len(written) == len(words):
        own = np.intersect1d(at_best, identified)
        for term, chunks in written:
            lacking = np.setdiff1d(own, chunks)
            asked[int(is_cjk(term)), lacking] += term.weight
            per_chunk[lacking] += term.weight
        best = per_chunk.max()
        # read on the earlier best passages: those holding the identifier among them now hold
        # all of the ask and are the only ones that gained, so the share is 1 either way
        shares = _ask_shares(asked, ask_total, at_best)
    if shares and light and not (context or how) and any(t.name for t in distinct.values()):
        # A heavier word found beside the names is not all that is asked: "Rosa Lindqvist
        # 周末喜欢做什么？" (what does she like to do at weekends) found 周末 in the deploy guide's
        # passage naming her, whose weekend is the release freeze's. A light word the KB writes
        # nowhere (喜欢: in no passage, in either script, and translated into none) asks what
        # no passage holds, about a person or an identifier alike ("lumen-gateway 的负责人喜欢
        # 吃什么？"). Not so for what a question word asks for ("How big is a spool segment?"
        # asks for a size, which its passage gives as "64 MB"), nor when the request asks for a
        # way ("how do I change the dispatch concurrency" is answered by "is set by …", which
        # never says "change"). A single Chinese character (嘛, 吃) is never found, since the
        # postings hold pairs: on the refusal set's chat such particles refused 9 questions.
        # Such a word leaves none of the ask in any passage; when the heavier words had none of
        # it there already, the evidence is theirs, as it was (the stuffing veto reads it).
        # What "how" asks for is a degree, which a passage gives as a number; "what music does
        # lumen-gateway listen to?" asks for a kind of thing, which a passage holding it names.
        unwritten = tuple(
            t.surface
            for t in distinct_terms(light).values()
            if t.surface not in (asked_for if degrees is None else degrees)
            and findable(t)
            and _chunks_of(t, kb, translated) is None
        )
        if unwritten and min(shares)[0] > 0.0:
            # light, like any ask of light words: never the fitted gate's stuffing veto
            shares_found = matched / total, float(best) / total
            return Evidence(*shares_found, total, names, 0.0, unwritten, True)
    if not shares and light:
        # No word weighs ASK_WEIGHT: the names carry the question, and the light words left
        # besides the frame say what it asks of them, each counting alike. "What does Priya
        # Natarajan like to eat?" (eat), "Priya Natarajan 喜欢吃什么？" (喜欢, 吃) or "Where
        # does Priya Natarajan live?" ask what the passage naming her does not hold; "What
        # does Priya Natarajan own?" (own: "does not own" is in it) asks what it does. With no
        # light word either ("Who is Priya Natarajan?") the names are the whole question. This
        # refuses personal questions about the KB's people without refusing a covered question.
        #
        # Across scripts such words are verbs of everyday frequency that the word-to-word
        # embedder does not translate reliably (负责 ~ owners scores below unrelated pairs such
        # as 住 ~ owning): a passage of the other script holds one when the KB writes it in its
        # own script somewhere (负责 in the Chinese deploy guide; 喜欢, 电影 nowhere).
        #
        # About an identifier, the same, except that its passage holds the light words written
        # in its own script and the word a question word asks for: "LUMEN_DISPATCH_CONCURRENCY
        # 喜欢吃什么？" (what does it like to eat) asks in words the English passage defining it
        # does not hold and the KB writes nowhere in Chinese. And every one of them must be the
        # KB's (written somewhere), as heavier words about an identifier must: one it writes
        # nowhere leaves none of the ask in any passage. "What does LUMEN_SPOOL_HIGH_WATER_PCT
        # set?" asks in the KB's words; "What does LUMEN_MAX_ATTEMPTS like to eat?", "Is
        # LUMEN_DISPATCH_CONCURRENCY nice?" and "Which team does lumen-dispatcher support in
        # football?" (team and support are in its passage) ask in words it writes nowhere.
        # Words asking what a named thing is there for (ROLE_ASKS) and the word a question
        # word asks for are the question's frame, not the KB's words.
        kbs = by_words or all(
            _written(t, kb) or t.key in ROLE_ASKS or t.surface in asked_for
            for t in distinct_terms(light).values()
            if findable(t)
        )
        # a person: every name written as a person's ("Aiyana Whitehorse", 赵慧玲), not a
        # component or an acronym ("the PVC of the dispatcher spool")
        named = [t for t in distinct.values() if t.name]
        person = by_words and all(is_cjk(t) or t.surface in titled for t in named)
        people = named if person else []
        for term in distinct_terms(light).values():
            if not by_words and not findable(term):
                continue  # a particle ("如 yolo8-pose 吗"), found by no look-up
            chunks = (
                _light_chunks(term, kb, translated, at_best, by_words, asked_for, people)
                if kbs
                else None
            )
            ask_total[is_cjk(term)] += 1.0
            if chunks is not None and chunks.size:
                asked[int(is_cjk(term)), chunks.astype(np.int32)] += 1.0
            words.append((term, chunks))
        shares = _ask_shares(asked, ask_total, at_best)
        lightly = True
    # the weight of the words alone: a question word's value makes no question of everyday
    # words one with terms to look up ("Who is the director of the hospital?")
    words_weight = total
    if values:
        # one more word of the ask, in the script(s) the ask is written in, or the question's;
        # after the light words, which still say what else is asked ("谁负责 LUMEN_…？")
        cjk = any(is_cjk(t) for t in distinct.values())
        scripts = [s for s in (0, 1) if ask_total[s] > 0.0] or [int(cjk)]
        held = _value_chunks(values, distinct, kb, translated, per_chunk)
        for kind in values:
            total += VALUE_WEIGHT
            for script in scripts:
                ask_total[script] += VALUE_WEIGHT
            # among the best passages by the words: a value never lifts a passage that holds
            # fewer of them ("Who is the team lead of Foundry?" over a line naming someone else)
            chunks = np.intersect1d(held[kind], at_best)
            if chunks.size:
                matched += VALUE_WEIGHT
                per_chunk[chunks] += VALUE_WEIGHT
                for script in scripts:
                    asked[script, chunks] += VALUE_WEIGHT
        # the ask is read on the same best passages as the words were: one that writes the
        # value does not shut out one tied with it that holds the light words ("Who is the
        # team lead of Foundry?": the on-call page's "team lead", the training page's 林晓雯)
        best = per_chunk.max()
        shares = _ask_shares(asked, ask_total, at_best)
    if not shares:
        return Evidence(matched / total, float(best) / total, words_weight, names, 1.0)
    share, script = min(shares)
    passage = int(at_best[int(np.argmax(asked[script, at_best]))])
    unasked = tuple(
        t.surface
        for t, chunks in words
        if is_cjk(t) == bool(script) and (chunks is None or passage not in chunks)
    )
    return Evidence(
        matched / total, float(best) / total, words_weight, names, share, unasked, lightly
    )


def anchored_similarity(
    terms: Sequence[Term],
    kb: KbTerms | None,
    translated: Translations | None,
    nearest: Sequence[tuple[int, float]],
) -> float:
    """How near the message the passages holding its terms are: each distinct term's weight
    times the similarity of the nearest passage that holds it (0 for a term no passage holds),
    over the terms' weight. `nearest`: (passage index, similarity to the message) of the
    passages nearest the message, best first; a term held only farther down counts the last
    similarity read (no passage farther down is nearer). Term and passage coverage say whether
    the KB holds the words; this says whether it holds them where it writes about what the
    message says. A question about a neighbouring tool the KB names in passing ("configure flux
    ImageUpdateAutomation", in a comparison table) finds every term, in passages far from it."""
    distinct = distinct_terms(terms)
    total = sum(t.weight for t in distinct.values())
    if kb is None or total <= 0.0 or not nearest:
        return 0.0
    at = np.asarray([i for i, _ in nearest], dtype=np.int32)
    scores = np.asarray([s for _, s in nearest], dtype=np.float64)
    floor = float(scores.min())
    held = 0.0
    for term in distinct.values():
        chunks = _chunks_of(term, kb, translated)
        if chunks is None or not chunks.size:
            continue
        # the postings are sorted: a binary search per passage read, not a scan of every
        # passage holding a common term
        place = np.minimum(np.searchsorted(chunks, at), chunks.size - 1)
        inside = chunks[place] == at
        held += term.weight * (float(scores[inside].max()) if inside.any() else floor)
    return held / total


# What finding the value a question word asks for weighs (a time, a day, a duration, a name):
# as much as a word of middling specificity ("hotfixes" 0.72, "forbidden" 0.28, 月末 0.35), so it
# is part of the ask and never the question's whole evidence.
VALUE_WEIGHT = 0.3
# At most this many passages are read for a value, those holding most of the question first.
VALUE_PASSAGES = 16


def _value_chunks(
    values: Sequence[str],
    distinct: dict[str, Term],
    kb: KbTerms,
    translated: Translations | None,
    per_chunk: npt.NDArray[np.float64],
) -> dict[str, npt.NDArray[np.int32]]:
    """For each kind of value asked, the passages that write one in a line holding one of the
    question's names or heavier words, or in the line after it when that line leads in (an
    FAQ's question), among the VALUE_PASSAGES holding every name the KB holds (with none, an
    anchor word) that hold most of the question's terms. A date somewhere in the KB is no
    evidence of its own: "Lumen Lumen: when did Napoleon die?" names nothing the KB holds, and
    "Rosa Lindqvist 的生日是哪天？" finds her in a line that writes no day (the freeze's Friday is
    on another)."""
    empty = {kind: np.zeros(0, dtype=np.int32) for kind in values}
    if not per_chunk.size or per_chunk.max() <= 0.0:
        return empty
    # the KB's subject ("Lumen" in Lumen's docs, in every passage: KbTerms.lookup) is in every
    # line that says anything: it tells no line about what is asked
    chunks = {t.key: _chunks_of(t, kb, translated) for t in distinct.values()}
    subject = {
        k
        for k, c in chunks.items()
        if c is not None and c.size == kb.chunks and kb.chunks >= SUBJECT_MIN_CHUNKS
    }
    words = [t for t in distinct.values() if t.key not in subject and findable(t)]
    names = [t for t in words if t.name]
    anchors = [t for t in words if t.name or t.weight >= ASK_WEIGHT] or words
    found_names = [chunks[t.key] for t in names]
    if names and all(c is None for c in found_names):
        return empty  # names the KB does not hold: no passage is about them
    # the passages holding every name the KB holds (or with none an anchor word), those holding
    # most of the question's terms first
    if names:
        candidates = _together([c for c in found_names if c is not None])
    else:
        held = [c for t in anchors if (c := chunks[t.key]) is not None]
        candidates = np.unique(np.concatenate(held)) if held else None
    if candidates is None:
        return empty
    ranked = candidates[np.argsort(-per_chunk[candidates], kind="stable")][:VALUE_PASSAGES]
    found: dict[str, list[int]] = {kind: [] for kind in values}
    for index in ranked:
        lines = _anchor_lines(kb, int(index), anchors)
        for kind in values:
            if any(writes(kind, line) for line in lines):
                found[kind].append(int(index))
    return {kind: np.asarray(found[kind], dtype=np.int32) for kind in values}


def valued_line(terms: Sequence[Term], kb: KbTerms, values: Sequence[str]) -> bool:
    """Whether one line of a passage (with the line after it when it leads in: _with_next)
    holds every one of the words (those a look-up can find) and writes a value of each kind
    the question words ask for: a question of everyday words that asks for a value is answered
    where they are written beside one ("What are the next release dates?": "Next dates:
    2026-11-26, …" in the release calendar's line). Words spread over a passage with a value
    somewhere in it ("Who is the director of the hospital?") are not."""
    words = [t for t in distinct_terms(terms).values() if findable(t)]
    if not values or not words:
        return False
    together = _together([kb.lookup(t) for t in words])
    if together is None:
        return False
    for index in together[:VALUE_PASSAGES]:
        lines = kb.lines(int(index))
        found = [lines.lookup(t) for t in words]
        if any(f is None for f in found):
            continue
        for at in range(len(lines.texts)):
            text, span = _with_next(lines.texts, at)
            beside = all(span.intersection(f.tolist()) for f in found if f is not None)
            if beside and all(writes(kind, text) for kind in values):
                return True
    return False


def _together(
    found: Sequence[npt.NDArray[np.int32] | None],
) -> npt.NDArray[np.int32] | None:
    """The passages in every one of the look-ups (None when one found nothing, or none)."""
    together: npt.NDArray[np.int32] | None = None
    for chunks in found:
        if chunks is None:
            return None
        together = chunks if together is None else np.intersect1d(together, chunks)
    return together


def _anchor_lines(kb: KbTerms, index: int, anchors: Sequence[Term]) -> list[str]:
    """The lines of a passage (KbTerms.lines) that hold one of the anchor terms, each with the
    next line when it leads in (_with_next). The whole passage when it holds none as written: a
    passage of the other script holds a word by translation (CoverageRule.translations), found
    for the passage, not a line of it ("Who must approve an emergency fix during a release
    freeze?" asks of the Chinese deploy guide)."""
    lines = kb.lines(index)
    texts = lines.texts
    held: set[int] = set()
    for term in anchors:
        found = lines.lookup(term)
        if found is not None:
            held.update(int(i) for i in found)
    if not held:
        return [kb.texts[index]]
    return [_with_next(texts, i)[0] for i in sorted(held)]


def _with_next(texts: Sequence[str], at: int) -> tuple[str, set[int]]:
    """Line `at`, with the next line when it leads in (LEADS_IN: an FAQ's question, a label and
    its colon, whose value is written on the next line), and the lines it spans."""
    text = texts[at]
    if text.rstrip(" *#\n").endswith(LEADS_IN) and at + 1 < len(texts):
        return f"{text}\n{texts[at + 1]}", {at, at + 1}
    return text, {at}


def _identifier_chunks(
    distinct: dict[str, Term], kb: KbTerms, translated: Translations | None
) -> npt.NDArray[np.int32] | None:
    """The passages holding one of the message's identifiers (names with a digit or a
    separator that are not numbers: LUMEN_SPOOL_DIR, lumen-gateway, yolov8), None when it
    names none the KB holds."""
    found: npt.NDArray[np.int32] | None = None
    for term in distinct.values():
        if not term.name or term.surface.isalpha() or NUMBER.match(term.surface):
            continue
        chunks = _chunks_of(term, kb, translated)
        if chunks is not None:
            found = chunks if found is None else np.union1d(found, chunks).astype(np.int32)
    return found


def _written(term: Term, kb: KbTerms) -> bool:
    """Whether the KB writes the word somewhere, in its own script: the KB's own vocabulary. A
    translation only says that one passage holds what the word means."""
    return kb.lookup(term) is not None


def _light_chunks(
    term: Term,
    kb: KbTerms,
    translated: Translations | None,
    at_best: npt.NDArray[np.intp],
    by_words: bool,
    asked_for: frozenset[str],
    people: Sequence[Term] = (),
) -> npt.NDArray[np.int32] | None:
    """The passages holding a light word when the light words are the ask: those that hold it
    or its translation, the best ones of the other script when the KB writes it in its own
    script somewhere, and, about an identifier (not `by_words`), the best ones written in its
    script, or all of them for the word a question word asks for or one asking what a setting
    is for (ROLE_ASKS). About a person (`people`: the names, written as words), a best passage
    holds the word only in a line that names them, and one of the other script only when
    none of the best is written in the word's own script."""
    chunks = _chunks_of(term, kb, translated)
    if people and chunks is not None:
        # "How old is Aiyana Whitehorse?" found "Older data must be re-sent" in the runbook
        # passage whose last line needs her approval: a passage says what it says of a person
        # where it names them
        lexical = kb.lookup(term)
        if lexical is not None:
            beside = [
                i
                for i in np.intersect1d(lexical, at_best)
                if not _beside(kb.lines(int(i)), term, people)
            ]
            chunks = np.setdiff1d(chunks, beside)
    lacks_own = not people or not any((kb.languages[i] == "zh") == is_cjk(term) for i in at_best)
    if kb.lookup(term) is not None and lacks_own:
        # "Priya Natarajan 负责什么？" is answered by the English passage naming her, and 负责
        # is the KB's word (its Chinese guide writes it); "How old is Zhao Huiling?" asks of
        # English passages naming her too, which do not say it, so a Chinese one naming her
        # holds no "old" either for the KB writing "old" elsewhere
        other = [i for i in at_best if (kb.languages[i] == "zh") != is_cjk(term)]
        chunks = np.union1d(chunks, other) if chunks is not None else np.asarray(other)
    if by_words and term.key in ROLE_ASKS:
        # what a person is there for (whether to turn to them) is what the passage naming them
        # says
        return np.union1d(chunks, at_best) if chunks is not None else np.asarray(at_best)
    if not by_words:
        everywhere = term.surface in asked_for or term.key in ROLE_ASKS
        own = [i for i in at_best if everywhere or (kb.languages[i] == "zh") == is_cjk(term)]
        if own:
            chunks = np.union1d(chunks, own) if chunks is not None else np.asarray(own)
    return chunks


def _beside(lines: KbTerms, term: Term, people: Sequence[Term]) -> bool:
    """Whether one line of a passage (KbTerms.lines) holds the word and one of the names."""
    held = lines.lookup(term)
    if held is None:
        return False
    for name in people:
        named = lines.lookup(name)
        if named is not None and np.intersect1d(held, named).size:
            return True
    return False


def _ask_shares(
    asked: npt.NDArray[np.float64], ask_total: Sequence[float], at_best: npt.NDArray[np.intp]
) -> list[tuple[float, int]]:
    """(share of the ask found in the best passage, script) for each script the ask has words
    in (0: Latin, 1: CJK)."""
    return [
        (float(asked[script, at_best].max()) / ask_total[script], script)
        for script in (0, 1)
        if ask_total[script] > 0.0
    ]
