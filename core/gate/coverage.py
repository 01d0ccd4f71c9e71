"""Does the knowledge base cover what a message asks? One rule, from every kind of evidence.

Embeddings match names, identifiers and numbers worst, and those are what a team's questions
are full of ("Who is Priya Natarajan?", "What is LUMEN_DISPATCH_CONCURRENCY?"). So besides the
dense similarity of the best chunk, the rule looks up the message's own terms in the KB:

- term coverage: the share of the request's content terms found anywhere in the KB, each
  weighted by how specific it is in general language (wordfreq's Zipf frequency: "lumenctl"
  and "Natarajan" weigh a lot, "capital" little, "the" nothing), names found exactly, after
  accent and case folding, stemmed, or fuzzily (one typo);
- passage coverage: the best single passage's share of those weighted terms (a question is
  covered by a passage that holds its terms together, not by terms scattered over the KB);
- dense: the best chunk's cosine similarity to the whole message and to its request;
- the ask: names are what a question is about, its other words what it asks about them. The
  passage must hold some of the ask (a quarter of its weight), in each script the message is
  written in: "LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？" is answered by "Default `32`", but
  "LUMEN_DISPATCH_CONCURRENCY 法国的首都是哪里？" by no passage, whatever the name weighs.
  Capitalised words written next to a name are the name ("Jonas Berg": "Jonas" alone is too
  common to be one), and when no word of the ask is heavy, the light ones are the ask ("What
  does Priya Natarajan like to eat?": "eat"), except about an identifier, which its passage
  defines ("What does LUMEN_MAX_ATTEMPTS control?"), when they are the KB's own words ("… like
  to eat?" is not).

A word in one script is looked for in a passage written in the other by translation: the
multilingual embedder puts "默认值" next to "default" and "组件" next to "components", word to
word (CoverageRule.translations), unless the KB writes another word of the message's script
for the passage's word (core.gate.rivals: not 床位 for "floor" where the KB writes 楼层). Names
and identifiers are spelt alike in both and are only matched as written.

The evidence is about what the message ASKS. KB words stuffed in front of an off-topic request
("Lumen Lumen Lumen: what is the capital of France?", "lumenctl lumenctl write me a poem")
must not buy an answer, so the rule finds the request — the clause that starts with a wh-word,
an auxiliary or an imperative verb, or that ends with a question mark — and measures coverage
on its terms; the words around it only count when the request itself has no content ("what
now?"). A message that repeats one term is not a question about it.

The parts: a message's terms and their weights (core.language.terms), the request it makes
(core.gate.request), the KB's terms and look-ups (core.gate.kb_terms), the evidence of the
terms in the KB (core.gate.evidence); here the thresholds, the verdict (judge) and the rule run
against a KB (CoverageRule). The look-ups are pure: the KB's terms come from the chunk texts the
gate already keeps in memory (core.vector_cache), indexed once per KB version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from core.gate import kb_terms as kb_terms_module
from core.gate.evidence import Evidence, anchored_similarity, term_evidence, valued_line
from core.gate.kb_terms import (
    TRANSLATION_PASSAGES,
    KbTerms,
    Translations,
    compounds,
    respelled,
    untranslated,
    within,
)
from core.gate.request import Analysis, analyse, find_request
from core.gate.rivals import ScriptWords
from core.language import lexicon as lexicon_module
from core.language import terms as terms_module
from core.language import text as text_module
from core.language import words as words_module
from core.language.terms import Term, distinct_terms, is_cjk, month_in
from core.language.text import Language
from core.models import Collection, VectorHit
from core.ports import Embedder, Vectors
from core.vector_cache import SavedParts, Snapshot
from core.word_vectors import WORD_VECTORS, WordVectors

log = logging.getLogger(__name__)


# The stuffing veto (Coverage.off_request): a request after other words, farther than this from
# every chunk, with less than this share of its terms in the KB.
OFF_REQUEST_DENSE = 0.2
OFF_REQUEST_TERMS = 0.3
# …or a request with none of its ask in the passage that holds its names, the ask's missing words
# this far from every chunk. Kept this strict (below OFF_REQUEST_DENSE, and only when nothing of
# the ask is found) because the veto overrides a fitted gate: on real group chat a looser veto
# silences answerable messages, which costs more than the off-topic ones it adds.
OFF_ASK_DENSE = 0.15
# At least this share of repeated terms: one term said over and over is not a question.
STUFFED = 0.5
# A word of the request in one script found in a passage written in the other when the
# multilingual embedder (USE) puts it this close to one of the passage's words: set between the
# scores of true translations (默认值 ~ defaults) and the best match of an unrelated word (午饭 ~
# hour), with room on both sides; lower lets unrelated everyday words count as found.
TRANSLATION_MIN = 0.65
# Words embedded per call when a KB's passage words are embedded ahead of its first messages
# (CoverageRule warm_words): a message's own embedding waits behind at most one such call.
WARM_BATCH = 64
# The share of the ask's weight (the request's words that are not names: "default",
# "components", "capital") the best passage must hold, in each script of the message. Stuffing
# has none of it there; real questions in group chat carry chat words no passage holds ("大佬",
# "[破涕为笑]"), so the share is low: a quarter is enough to tell stuffing from a question, and
# the verdicts barely move between a tenth and a half.
MIN_ASK = 0.25
# The passages nearest the message read for the anchored signal (anchored_similarity): enough
# that a term of a covered question is found among them, few enough that reading them costs
# nothing beside the search that ranks every chunk anyway.
ANCHOR_PASSAGES = 50
# The passages nearest a message whose languages say which languages its answer's retrieval
# may find (the answer reads the language of its best three: core.answer.pipeline).
NEAR_PASSAGES = 3


@dataclass(frozen=True, slots=True)
class CoverageOptions:
    # Covered: the request's specific terms are in the KB (term coverage) and mostly together
    # in one passage, or the best chunk is semantically close to the whole message.
    min_terms: float = 0.6  # share of the request's weighted terms found in the KB
    min_passage: float = 0.7  # … found together in the best single passage
    min_dense: float = 0.35  # best chunk cosine that counts on its own (with term coverage)
    dense_only: float = 0.45  # best chunk cosine enough when the request has no content terms
    min_weight: float = 0.25  # less total term weight than this: the request has no content
    # The overheard operating point: a message nobody addressed to the bot is answered only when
    # the KB clearly covers it, every bar of the rule above (min_terms, min_passage, MIN_ASK,
    # min_dense, dense_only) raised by this much; a passage whose heading or one line holds all
    # of a general request's words is clear evidence as it is. Addressed (a mention, a DM, a
    # reply, `tacit ask`), a wrong refusal is the worse error and the bars stay where they are.
    overheard_margin: float = 0.1


SIGNALS: tuple[str, ...] = (
    "dense_max",
    "request_dense",
    "term_coverage",
    "passage_coverage",
    "request_weight",
    "names_found",
    "stuffed",
    "request_cue",
    "request_prefixed",
)


@dataclass(frozen=True, slots=True)
class Coverage:
    covered: bool
    signals: dict[str, float]
    reason: str

    # KB words around a request that is plainly about something else, or one term repeated:
    # whatever else scores the message (a fitted gate) must not answer it. Narrower than "not
    # covered": on real group chat vetoing every uncovered prefixed request silences many
    # answerable messages, so the veto fires only where the ask is plainly elsewhere.
    off_request: bool = False
    # the words of the ask the best passage lacks (Evidence.unasked)
    unasked: tuple[str, ...] = ()
    # the ask was made of light words only (Evidence.light): never the stuffing veto
    light: bool = False
    # covered at the overheard operating point (CoverageOptions.overheard_margin)
    clear: bool = False
    # the languages the passages nearest the message are written in (NEAR_PASSAGES of them,
    # each language once): where the message's is not the only one, it may be asked across
    # languages
    nearest_languages: tuple[Language, ...] = dataclasses.field(default=(), compare=False)

    def detail(self) -> dict[str, object]:
        """For a trace: the verdict, why, and every signal (rounded)."""
        rounded = {k: round(v, 4) for k, v in self.signals.items()}
        return {"covered": self.covered, "reason": self.reason, **rounded}

    @property
    def score(self) -> float:
        """One number for logs and thresholds: the strongest evidence that passed the rule."""
        s = self.signals
        return min(s["term_coverage"], max(s["passage_coverage"], s["dense_max"]))


def judge(
    text: str,
    *,
    dense_max: float,
    request_dense: float | None,
    kb: KbTerms | None,
    options: CoverageOptions | None = None,
    translated: Translations | None = None,
    ask_dense: float | None = None,
    analysis: Analysis | None = None,
    nearest: Sequence[tuple[int, float]] = (),
) -> Coverage:
    """The coverage decision for one message from its dense similarities and the KB's terms.
    `request_dense` is the best chunk similarity of the request alone (None: the request is
    the whole message). `translated`: the message's words found in passages of the other
    script (CoverageRule.translations). `ask_dense`: the best chunk similarity of the words of
    the ask the best passage lacks (Coverage.unasked), when they were looked up. `analysis`:
    analyse(text), when already made. `nearest`: (passage index, similarity) of the passages
    nearest the whole message, best first (the anchored signal: anchored_similarity)."""
    o = options or CoverageOptions()
    a = analyse(text) if analysis is None else analysis
    if kb is not None:
        a = dataclasses.replace(
            a,
            terms=respelled(compounds(a.terms, kb), kb),
            whole_terms=respelled(compounds(a.whole_terms, kb), kb),
            light=respelled(a.light, kb),
            whole_light=respelled(a.whole_light, kb),
        )
    request = a.request
    evidence = term_evidence(
        a.terms,
        kb,
        translated,
        a.light,
        a.asked_for,
        how=a.how,
        degrees=a.degrees,
        titled=a.titled,
        values=a.values,
    )
    term_cov, passage_cov, weight, names = (
        evidence.terms,
        evidence.passage,
        evidence.weight,
        evidence.names,
    )
    stuffed = a.stuffed
    empty = a.empty
    # "…, what now?": nothing in the request to look up. "The partition is stuck on a poison
    # message. How do I get past it?": a request of general words, all found in the KB, that
    # takes its topic from the sentence before it. Either way the message is what counts. (A
    # request of general words the KB lacks — "…: who is the president of the United
    # States?" — is judged on its own: the names in front of it do not make it a KB question.)
    # "KafkaConsumerLagHigh is firing, is that bad?": a request that points back at a statement
    # in front of it (Analysis.refers) is about that statement, whatever its own words find.
    leans_on_context = (
        not request.whole and weight < o.min_weight and (term_cov >= o.min_terms or a.refers)
    )
    looked_up = [*a.terms, *a.light]
    anchored_terms = a.terms
    if empty or leans_on_context:
        anchored_terms = a.whole_terms
        looked_up = [*a.whole_terms, *a.whole_light]
        evidence = term_evidence(
            a.whole_terms,
            kb,
            translated,
            a.whole_light,
            a.asked_for,
            context=True,
            degrees=a.degrees,
            titled=a.titled,
            values=a.values,
        )
        term_cov, passage_cov, weight, names = (
            evidence.terms,
            evidence.passage,
            evidence.weight,
            evidence.names,
        )
        request_dense = None
        empty = True
    focus = dense_max if request_dense is None else min(dense_max, request_dense)
    # a passage's heading holds all the looked-up words, or one line holds them and the value
    # a question word asks for: the rule's evidence for a request of everyday words, measured
    # for every request since the shipped coverage model (core.gate.coverage_model) reads it
    headed = kb is not None and kb.headed(looked_up)
    valued = not headed and kb is not None and valued_line(looked_up, kb, a.values)
    signals = {
        "dense_max": dense_max,
        "request_dense": focus,
        "term_coverage": term_cov,
        "passage_coverage": passage_cov,
        "request_weight": weight,
        "names_found": names,
        "stuffed": stuffed,
        "request_cue": 1.0 if request.cue else 0.0,
        "request_prefixed": 0.0 if request.whole or empty else 1.0,
        # not one of SIGNALS (the fitted gate's features): the rule's own, and the shipped
        # coverage model's
        "ask_coverage": evidence.ask,
        "headed": 1.0 if headed else 0.0,
        "valued": 1.0 if valued else 0.0,
        "general": 1.0 if a.general else 0.0,
        "context": 1.0 if empty else 0.0,
        "anchored": anchored_similarity(anchored_terms, kb, translated, nearest),
    }
    if stuffed >= STUFFED:
        why = (
            f"not covered: one term repeated ({stuffed:.0%} of the terms), stuffing, not a question"
        )
        return _verdict(False, signals, why, True, evidence)
    # the KB's names with none of the ask in the passage holding them, and what it lacks far
    # from every chunk: "GATEWAY_CACHE_TTL 法国的首都是哪里？" (no punctuation: the request is
    # the whole message, and the names pull the whole message's similarity up)
    off_ask = (
        evidence.ask <= 0.0
        and not evidence.light  # a personal question about a name is not stuffing
        and ask_dense is not None
        and ask_dense < OFF_ASK_DENSE
    )
    # the request after the KB words is far from every passage and its own terms are not the
    # KB's (or it has hardly any): "Lumen Lumen: what is the capital of France?"
    off_request = (
        signals["request_prefixed"] > 0
        and focus < OFF_REQUEST_DENSE
        and (term_cov < OFF_REQUEST_TERMS or weight < o.min_weight)
    ) or off_ask
    if weight < o.min_weight:
        # Everyday words only ("Why is yesterday's number different today?"): no look-up says
        # much, but a passage whose heading holds all of them, light ones too, is the one asked
        # about — an FAQ entry's heading is its question, while the whole entry, answer
        # included, is too far from its own question for the similarity to say so.
        # …or a line that holds all of them and writes the value a question word asks for
        # (core.gate.evidence.valued_line: "What are the next release dates?").
        covered = focus >= o.dense_only or headed or valued
        clear = focus >= o.dense_only + o.overheard_margin or headed or valued
        why = (
            f"the request has no terms to look up; best chunk similarity {focus:.2f} vs "
            f"{o.dense_only:.2f}"
        )
        if headed:
            why += f"; a passage's heading holds all {len(distinct_terms(looked_up))} of its words"
        if valued:
            why += "; a line holds all its words and the value asked for"
        verdict = f"{'covered' if covered else 'not covered'}: {why}"
        off = off_request and not covered
        return _verdict(covered, signals, verdict, off, evidence, clear)

    def passes(margin: float) -> bool:
        """Covered with every bar raised by `margin` (0 addressed, overheard_margin overheard)."""
        # The passage must hold what is asked about the names, not only the names.
        lexical = (
            term_cov >= o.min_terms + margin
            and passage_cov >= o.min_passage + margin
            and evidence.ask >= MIN_ASK + margin
        )
        # Nor is similarity that the names alone pull up: a name said twice before an off-topic
        # ask ("schema-keeper schema-keeper 法国的首都是哪里？") pulls up a KB whose passages are
        # short and name their service often.
        # Nor for a question that says it asks in general: "How do I fix CUDA out of memory in
        # PyTorch in general?" is near the team's own runbook for its cluster, which holds
        # CUDA and memory but not how to fix it in PyTorch; a passage that holds what is asked
        # ("How long does a deploy take in general?": "takes 4 to 6 minutes") still answers it.
        semantic = (
            term_cov >= o.min_terms + margin
            and focus >= o.min_dense + margin
            and not off_ask
            and not a.general
        )
        return lexical or semantic

    covered = passes(0.0)
    clear = covered and passes(o.overheard_margin)
    asked = "the request" if not request.whole else "the question"
    why = (
        f"{term_cov:.0%} of {asked}'s terms are in the KB (need {o.min_terms:.0%}), "
        f"{passage_cov:.0%} in one passage (need {o.min_passage:.0%}), which holds "
        f"{evidence.ask:.0%} of what is asked (need {MIN_ASK:.0%}); best chunk "
        f"similarity {focus:.2f} (alone enough from {o.min_dense:.2f})"
    )
    if evidence.ask < MIN_ASK and evidence.unasked:
        why += f"; the passage lacks {', '.join(evidence.unasked)}"
    verdict = f"{'covered' if covered else 'not covered'}: {why}"
    off = off_request and not covered
    return _verdict(covered, signals, verdict, off, evidence, clear)


def _verdict(
    covered: bool,
    signals: dict[str, float],
    why: str,
    off_request: bool,
    evidence: Evidence,
    clear: bool = False,
) -> Coverage:
    return Coverage(
        covered,
        signals,
        why,
        off_request=off_request,
        unasked=evidence.unasked,
        light=evidence.light,
        clear=clear and covered,
    )


def _quiet(task: asyncio.Task[None]) -> None:
    """A warming task's outcome: a failure is logged, not raised (warming is an optimisation,
    and the look-up it prepares works without it)."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("coverage: warming the word vectors failed: %s", task.exception())


def _compared(kb: KbTerms, term: Term, index: int) -> tuple[str, ...]:
    """The passage's words a word is compared with (CoverageRule.translations): all of them in
    the other script, those written inside it in its own (within)."""
    words = kb.words(index)
    if (kb.languages[index] == "zh") == is_cjk(term):
        return within(term.key, words)
    return words


def signal_row(coverage: Coverage) -> list[float]:
    return [float(coverage.signals[name]) for name in SIGNALS]


# --- running the rule against a KB ---------------------------------------------------------


def _code_digest(*modules: ModuleType) -> str:
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()[:16]


# The name the KB's term postings are kept under beside its copy of the chunks: it holds a
# digest of the code that cuts passages into terms, so postings built by other code (an older
# Tacit) are never read.
KB_TERMS = "kb_terms-" + _code_digest(
    kb_terms_module, terms_module, lexicon_module, words_module, text_module
)


# The name the KB's words of one script and their vectors (core.gate.rivals) are kept under
# beside its copy of the chunks: the term-cutting code's digest, as KB_TERMS, and the embedder
# that made the vectors (script_words_name).
SCRIPT_WORDS = "script_words-" + KB_TERMS.removeprefix("kb_terms-")


def script_words_name(cjk: bool, embedder: str, dim: int) -> str:
    made_by = hashlib.sha256(f"{embedder}\0{dim}".encode()).hexdigest()[:12]
    return f"{SCRIPT_WORDS}-{'cjk' if cjk else 'other'}-{made_by}"


class Snapshots(Protocol):
    """What the rule reads the KB from: the gate's in-memory copy (VectorCache)."""

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]: ...

    async def snapshot(self, collection: Collection, kb: str) -> Snapshot: ...


class CoverageRule:
    """The rule run against a KB: the gate calls it for each message, the answerer for each
    question it is asked directly; a message the gate has just judged is not judged again
    (the last few verdicts are remembered per KB version)."""

    def __init__(
        self,
        *,
        embedder: Embedder,
        snapshots: Snapshots,
        options: CoverageOptions | None = None,
        remember: int = 256,
        warm_words: int = 0,
        words: WordVectors | None = None,
    ) -> None:
        """words: the word vectors to keep cross-script look-ups in, shared with the retriever's
        row look-ups in one process (the same embedder's words)."""
        self.embedder = embedder
        self.snapshots = snapshots
        self.options = options or CoverageOptions()
        # Passage words embedded in the background once a KB's terms are built, the most
        # common first (at most WORD_VECTORS): a message's first cross-script look-up then
        # embeds its own words only, not its candidate passages' (translations).
        self.warm_words = max(0, min(warm_words, WORD_VECTORS))
        self._warming: dict[str, asyncio.Task[None]] = {}
        self._terms: dict[str, tuple[Snapshot, KbTerms | None]] = {}
        self._building: dict[str, asyncio.Lock] = {}
        self._verdicts: OrderedDict[tuple[str, str, int], Coverage] = OrderedDict()
        self._remember = remember
        self._words = words or WordVectors(embedder)  # for cross-script look-ups
        # (id of a KbTerms, CJK script or not) → the KB's words of that script, embedded
        # (core.gate.rivals), for the versions of the KBs the rule holds
        self._scripts: dict[tuple[int, bool], tuple[KbTerms, ScriptWords]] = {}
        self._scripts_lock = asyncio.Lock()

    async def kb_terms(self, kb: str) -> KbTerms | None:
        """The KB's term postings, built once per snapshot of its chunks (None when the KB is
        too large to be held in memory: then only dense evidence counts)."""
        snapshot = await self.snapshots.snapshot("chunks", kb)
        known = self._terms.get(kb)
        if known is not None and known[0] is snapshot:
            return known[1]
        async with self._building.setdefault(kb, asyncio.Lock()):
            known = self._terms.get(kb)
            if known is not None and known[0] is snapshot:
                return known[1]
            terms = None
            if snapshot.matrix is not None:
                terms = await self._kept_terms(kb, snapshot)
                if terms is None:
                    terms = await asyncio.to_thread(KbTerms.build, snapshot.texts, snapshot.ids)
                    await self._keep_terms(kb, snapshot, terms)
                if known is not None and known[1] is not None:
                    await asyncio.to_thread(terms.carry_words, known[1])
            self._terms[kb] = (snapshot, terms)
            if terms is not None and self.warm_words:
                self._start_warming(kb, terms)
            return terms

    async def _kept_terms(self, kb: str, snapshot: Snapshot) -> KbTerms | None:
        """The postings built from this copy of the KB by an earlier process, kept beside the
        copy (core.vector_cache.VectorCache.derived): building them again was much of a
        one-shot `tacit ask` on a large KB."""
        derived = getattr(self.snapshots, "derived", None)
        if derived is None:
            return None
        kept = await derived(KB_TERMS, kb, snapshot)
        if kept is None:
            return None
        try:
            terms = KbTerms.from_parts(kept)
        except ValueError as exc:
            log.warning("coverage: the kept term postings of KB %r are unreadable: %s", kb, exc)
            return None
        return terms if terms.chunks == snapshot.rows else None

    async def _keep_terms(self, kb: str, snapshot: Snapshot, terms: KbTerms) -> None:
        keep = getattr(self.snapshots, "keep_derived", None)
        if keep is not None:
            await keep(KB_TERMS, kb, snapshot, await asyncio.to_thread(terms.to_parts))

    def _start_warming(self, kb: str, terms: KbTerms) -> None:
        earlier = self._warming.pop(kb, None)
        if earlier is not None:
            earlier.cancel()  # a new version of the KB: its words now
        task = asyncio.get_running_loop().create_task(self._warm(terms))
        task.add_done_callback(_quiet)
        self._warming[kb] = task

    async def warmed(self, kb: str) -> None:
        """Wait until the KB's passage words are embedded (no-op when nothing is warming)."""
        task = self._warming.get(kb)
        if task is not None:
            await asyncio.wait([task])

    async def aclose(self) -> None:
        """Stop warming (the rule works without it: a look-up embeds what it lacks)."""
        tasks, self._warming = list(self._warming.values()), {}
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _warm(self, terms: KbTerms) -> None:
        """Embed the words of the KB's passages, the most common first, in calls of WARM_BATCH
        words: the vectors a look-up would make on first use, made before it (the same words,
        the same vectors, so the same verdicts)."""
        words = await asyncio.to_thread(terms.common_words, self.warm_words)
        # The KB's words of each script hold every passage word: kept by an earlier process,
        # they give the common words' vectors without embedding them again.
        for cjk in (True, False):
            script = await self.script_words(terms, cjk)
            rows = dict(zip(script.words, range(len(script.words)), strict=True))
            self._words.add({w: script.matrix[rows[w]] for w in words if w in rows})
        for start in range(0, len(words), WARM_BATCH):
            await self._words.vectors(words[start : start + WARM_BATCH])

    async def script_words(self, kb: KbTerms, cjk: bool) -> ScriptWords:
        """The KB's words of one script embedded (core.gate.rivals), once per version of the
        KB: a word's vector is the embedder's, whatever the KB, so the words an earlier version
        (or another KB, or a look-up) embedded are not embedded again."""
        key = (id(kb), cjk)
        held = self._scripts.get(key)
        if held is not None and held[0] is kb:
            return held[1]
        async with self._scripts_lock:
            held = self._scripts.get(key)
            if held is not None and held[0] is kb:
                return held[1]
            held_by = next(((n, s) for n, (s, t) in self._terms.items() if t is kb), None)
            built = await self._kept_script_words(held_by, cjk)
            if built is None:
                words = await asyncio.to_thread(kb.script_words, cjk)
                known: dict[str, Any] = self._words.known(words)
                for _, other in self._scripts.values():
                    known.update(other.vectors())
                built = await ScriptWords.build(words, self.embedder.embed, known, batch=WARM_BATCH)
                await self._keep_script_words(held_by, cjk, built)
            # the versions the rule no longer holds are dropped (id() of a dropped one may be
            # reused: the entry keeps the KbTerms it was built for)
            held_now = {id(terms) for _, terms in self._terms.values() if terms is not None}
            self._scripts = {k: v for k, v in self._scripts.items() if k[0] in held_now}
            self._scripts[key] = (kb, built)
            return built

    async def _kept_script_words(
        self, held_by: tuple[str, Snapshot] | None, cjk: bool
    ) -> ScriptWords | None:
        """The KB's words of one script with their vectors, as an earlier process embedded
        them from this copy of the KB: embedding every word of a large KB was most of a
        one-shot `tacit ask` whose message met a passage of the other script."""
        derived = getattr(self.snapshots, "derived", None)
        if derived is None or held_by is None:
            return None
        name = script_words_name(cjk, self.embedder.name, self.embedder.dim)
        kept = await derived(name, held_by[0], held_by[1])
        if kept is None:
            return None
        words, matrix = kept.values.get("words"), kept.arrays.get("matrix")
        if not isinstance(words, list) or matrix is None:
            return None
        if matrix.dtype != np.float32 or matrix.shape[0] != len(words):
            return None
        if words and matrix.shape != (len(words), self.embedder.dim):
            return None
        return ScriptWords(tuple(str(w) for w in words), matrix)

    async def _keep_script_words(
        self, held_by: tuple[str, Snapshot] | None, cjk: bool, built: ScriptWords
    ) -> None:
        keep = getattr(self.snapshots, "keep_derived", None)
        if keep is None or held_by is None:
            return
        name = script_words_name(cjk, self.embedder.name, self.embedder.dim)
        parts = SavedParts({"words": list(built.words)}, {"matrix": built.matrix})
        await keep(name, held_by[0], held_by[1], parts)

    async def check(
        self, kb: str, text: str, *, embedding: npt.NDArray[np.floating[Any]] | None = None
    ) -> Coverage:
        """Does the KB cover what `text` asks? `embedding`: the text's, if already made."""
        verdict, _ = await self.check_with_nearest(kb, text, embedding=embedding)
        return verdict

    @staticmethod
    def texts_to_embed(text: str) -> list[str]:
        """What the rule compares with the chunks: the message, and its request when that is
        not the whole message. A caller that embeds them in one call (the gate, beside its
        other reads) hands both to check_with_nearest, which then embeds nothing."""
        request = find_request(text)
        return [text] if request.whole else [text, request.text]

    async def check_with_nearest(
        self,
        kb: str,
        text: str,
        *,
        embedding: npt.NDArray[np.floating[Any]] | None = None,
        request_embedding: npt.NDArray[np.floating[Any]] | None = None,
        limit: int = 1,
    ) -> tuple[Coverage, list[VectorHit] | None]:
        """check(), and the `limit` chunks nearest the message (best first) from the rule's
        own search: the fitted gate's features need the top few, and one search serves both
        (the rule reads only the best). None when the verdict was remembered: no search ran.
        `request_embedding`: the request's (texts_to_embed), if already made with the text's."""
        terms = await self.kb_terms(kb)
        key = (kb, text, id(terms))
        known = self._verdicts.get(key)
        if known is not None:
            self._verdicts.move_to_end(key)
            return known, None
        analysis = analyse(text)
        request = analysis.request
        wanted = [] if embedding is not None else [text]
        if not request.whole and request_embedding is None:
            wanted.append(request.text)
        made = np.asarray(await self.embedder.embed(wanted), dtype=np.float32) if wanted else None
        rows = (
            [np.asarray(embedding, dtype=np.float32).reshape(-1)] if embedding is not None else []
        )
        if made is not None:
            rows.extend(made)
        if not request.whole and request_embedding is not None:
            rows.append(np.asarray(request_embedding, dtype=np.float32).reshape(-1))
        # A word is looked for in the other script in the few nearest passages, not only the
        # nearest: the words a message shares as written with the KB (发布, 变更) rank pages in
        # its own script first, while the page that answers it may be written in the other
        # script a few places down ("by Tuesday 17:00 before the Thursday release"), and only
        # there are 周四 and 最晚 compared with "Thursday" and "late".
        ranked = await self.snapshots.search(
            "chunks", kb, np.stack(rows), limit=max(TRANSLATION_PASSAGES, limit, ANCHOR_PASSAGES)
        )
        hits = [h[: max(1, limit)] for h in ranked]
        best = [h[0].score if h else 0.0 for h in hits]
        translated = None
        anchors: list[tuple[int, float]] = []
        if terms is not None:
            anchors = [(terms.rows[h.id], h.score) for h in ranked[0] if h.id in terms.rows]
            nearest = [terms.rows[h[0].id] for h in hits if h and h[0].id in terms.rows]
            near = (hit.id for h in ranked for hit in h[1:TRANSLATION_PASSAGES])
            across = [terms.rows[i] for i in near if i in terms.rows]
            words = [*analysis.whole_terms, *analysis.whole_light]
            translated = await self.translations(terms, words, nearest, across)
        judged = functools.partial(
            judge,
            text,
            dense_max=best[0],
            request_dense=None if request.whole else best[1],
            kb=terms,
            options=self.options,
            translated=translated,
            analysis=analysis,
            nearest=anchors,
        )
        verdict = judged()
        # The ask's similarity only counts when the passage holds none of it (judge's off_ask):
        # with some of it there, looking it up (an embedding and a search of every chunk)
        # would leave the verdict as it is.
        lacks_ask = verdict.signals["ask_coverage"] <= 0.0 and verdict.unasked and not verdict.light
        if lacks_ask and not verdict.off_request:
            # Not covered for want of the ask, or covered by similarity alone without it: is
            # what the passage lacks about this KB at all? (the whole message's similarity is
            # pulled up by its names)
            asked = np.asarray(await self.embedder.embed([" ".join(verdict.unasked)]))
            found = await self.snapshots.search("chunks", kb, asked.astype(np.float32), limit=1)
            verdict = judged(ask_dense=found[0][0].score if found and found[0] else 0.0)
        nearby = [terms.languages[i] for i, _ in anchors[:NEAR_PASSAGES]] if terms else []
        verdict = dataclasses.replace(verdict, nearest_languages=tuple(dict.fromkeys(nearby)))
        self._verdicts[key] = verdict
        if len(self._verdicts) > self._remember:
            self._verdicts.popitem(last=False)
        return verdict, hits[0]

    async def translations(
        self,
        kb: KbTerms,
        terms: Sequence[Term],
        nearest: Sequence[int],
        across: Sequence[int] = (),
    ) -> Translations:
        """The message's words found in candidate passages written in the other script: "的默认值
        是多少" asks about "Default `32`" in an English passage. A word is found in a passage when
        the multilingual embedder puts it within TRANSLATION_MIN of one of the passage's own
        words (passage_words): word to word, as the lexical evidence is, so a passage that only
        shares the message's names does not also answer an off-topic ask. `nearest`, `across`:
        the passages nearest the message, and the next nearest (untranslated). An English
        month name is also found in a Chinese passage that writes its number (month_in: "dec"
        ~ 12月, which the embedder puts below TRANSLATION_MIN)."""
        found: dict[str, set[int]] = {}
        pairs = []
        for term, index in untranslated(terms, kb, nearest, across):
            if (
                kb.languages[index] == "zh"
                and not is_cjk(term)
                and month_in(term.surface, kb.texts[index])
            ):
                found.setdefault(term.key, set()).add(index)
            else:
                pairs.append((term, index))
        if not pairs:
            return {k: np.asarray(sorted(v), dtype=np.int32) for k, v in found.items()}
        wanted = dict.fromkeys(t.surface for t, _ in pairs)
        for term, index in pairs:
            wanted.update(dict.fromkeys(_compared(kb, term, index)))
        vectors = await self._words.vectors(list(wanted))
        # a passage's words stacked once for all the message's words compared with them
        matrices: dict[tuple[str, ...], npt.NDArray[np.float32]] = {}
        for term, index in pairs:
            words = _compared(kb, term, index)
            if not words or term.surface not in vectors:
                continue
            matrix = matrices.get(words)
            if matrix is None:
                matrix = np.stack([vectors[w] for w in words]).astype(np.float32)
                matrices[words] = matrix
            sims = matrix @ vectors[term.surface].astype(np.float32)
            if float(sims.max()) < TRANSLATION_MIN:
                continue
            other_script = (kb.languages[index] == "zh") != is_cjk(term)
            if other_script and await self._rivalled(kb, term, words, sims, vectors):
                continue
            found.setdefault(term.key, set()).add(index)
        return {k: np.asarray(sorted(v), dtype=np.int32) for k, v in found.items()}

    async def _rivalled(
        self,
        kb: KbTerms,
        term: Term,
        words: Sequence[str],
        sims: npt.NDArray[np.float32],
        vectors: dict[str, npt.NDArray[np.float16]],
    ) -> bool:
        """Whether every passage word the message's word matched (sims: to each of `words`)
        is the translation of another word the KB writes in the message word's script: 床位 ~
        floor, where the KB writes 楼层 for floor and 楼层 is the nearer (core.gate.rivals)."""
        script = await self.script_words(kb, is_cjk(term))
        surface, vector = term.surface, vectors[term.surface]
        matched = (int(i) for i in np.flatnonzero(sims >= TRANSLATION_MIN))
        return all(
            script.rivalled(
                words[i], vectors[words[i]], surface, vector, float(sims[i]), TRANSLATION_MIN
            )
            for i in matched
        )

    async def signal_rows(
        self, kb: str, texts: Sequence[str], embeddings: npt.NDArray[np.floating[Any]]
    ) -> npt.NDArray[np.float64]:
        """SIGNALS per text (the fitted gate's coverage features)."""
        rows = [
            signal_row(await self.check(kb, text, embedding=embeddings[i]))
            for i, text in enumerate(texts)
        ]
        return np.asarray(rows, dtype=np.float64).reshape(len(texts), len(SIGNALS))


__all__ = [
    "MIN_ASK",
    "SIGNALS",
    "Coverage",
    "CoverageOptions",
    "CoverageRule",
    "judge",
    "signal_row",
]
