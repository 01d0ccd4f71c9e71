"""The intent-and-refusal gate: for each message, answer, stay silent, or politely decline.

Stages run cheapest first and each may decide: filters (empty, too short, bots, commands), the
banned-topic list, a KB with no documents (its own reason, `kb_empty`, and a reply saying how
an admin indexes it: "not covered" would blame the question), then — concurrently — the
refusal score (coverage, the fitted scorer) and the LLM's screening (intent slot and safety in
ONE call, prompt "gate_classify", when an LLM is configured). Without an LLM's intent slot and
without a fit, whether a message asks anything at all comes from the request prior Tacit ships
(core.gate.prior), combined with coverage: a message is answered when it is a question or a
request AND the KB covers it. A refused message gets a short decline when the bot was addressed
(a mention, a DM, a reply to it, `tacit ask`) and silence when it was only overheard. With an
LLM and no fit, an addressed question the coverage rule refuses for coverage alone is deferred:
let through with a reason that says so (DEFERRED_PREFIX, the score DEFERRED_SCORE), for the
answerer's model to answer from the retrieved passages or to say they do not hold the answer.

screen() and classify() split the same decision for a caller that starts answering while the
LLM screens (bot.assistant): screen() runs every stage but the LLM's, classify() confirms or
overturns its "answer". A screening reply that cannot be read counts as a safe question
(HuixiangDou: a missed question costs more than a scored piece of chatter), so a model that
misbehaves on every call leaves the gate as it is without one.

Nothing a message says can turn a stage off: the LLM prompts hand the message over as a JSON
string to classify, and the other stages only measure it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

import prompts
from core.conversation import Message
from core.decision import (
    DEFERRED_SCORE,
    INTENTS,
    PRIOR_SCORE,
    PRIOR_THRESHOLD_SCORE,
    GateDecision,
    Intent,
    ScreenedKeywords,
    Stage,
)
from core.errors import InputError, LLMBadResponse, LLMError, StoreError, StoreUnavailable
from core.gate.coverage import CoverageOptions, CoverageRule
from core.gate.features import content_to_score, message_content
from core.gate.model import DEFAULT_FOLDS, GateFit, Matrix, cue_matrix, feature_matrix
from core.gate.prior import PriorScore, RequestPrior, shipped_prior
from core.gate.signals import CHUNKS_PER_MESSAGE, has_graph_vectors, kb_features
from core.gate.store import fit_command, fit_stamp, load_fit, save_fit
from core.kb import validate_kb_name
from core.language.text import Language, detect_language
from core.language.wording import (
    DECLINE_NOT_A_QUESTION,
    DECLINE_UNSAFE,
    KB_EMPTY,
    LANGUAGE_NAME,
    NOT_COVERED,
)
from core.language.words import normalise
from core.models import VectorHit
from core.ports import LLM, Embedder, StateStore, VectorStore
from core.vector_cache import CacheOptions, VectorCache

_COMMAND = re.compile(r"^/[A-Za-z_][\w@-]*(\s|$)")  # /start, /help@tacit_bot
# A letter or digit of any script: Chinese characters are letters to Unicode (\w matches them).
_HAS_CONTENT = re.compile(r"\w")


@dataclass(frozen=True, slots=True)
class GateOptions:
    min_chars: int = 2  # fewer meaningful characters than this: nothing to answer
    max_chars: int = 2000  # longer messages are scored on their beginning
    banned_topics: tuple[str, ...] = ()
    llm_intent: bool = True
    llm_safety: bool = True
    # Whether the KB covers what a message asks (core.gate.coverage): the whole decision
    # without a fit, and a veto on KB-word stuffing with one.
    coverage: CoverageOptions = field(default_factory=CoverageOptions)
    # Without a fit and without the LLM's intent slot, the shipped request prior says whether a
    # message asks anything at all (None: the threshold it was shipped with).
    request_prior: bool = True
    prior_threshold: float | None = None
    # With an LLM and no fit, a question addressed to the bot that the coverage rule refuses
    # for coverage alone (not its stuffing veto) goes to the answerer, whose model reads the
    # retrieved passages and answers or says they do not hold the answer (core.answer.pipeline):
    # the rule matches words, weakly across scripts, and a model reading the passages is the
    # better judge of those. Overheard messages are never deferred.
    model_judges_uncovered: bool = True
    # …and a question the rule's stuffing veto refuses (KB words, then a request the passages do
    # not hold) too: on chat written by teams nobody here knows the veto refuses covered
    # questions about as often as uncovered ones, and a model reading the passages tells them
    # apart. Deferred, stuffing is no more than the bare request after it, which is deferred
    # anyway. Off, the veto refuses before any model call, as without a model.
    model_judges_stuffing: bool = True
    # The screening names the message's search keywords as the KB's documents word them:
    # "every_language" of the passages nearest it (the message's own too: a typo, or a task
    # described without the setting that does it, finds other sections; the answer waits for
    # them, one call in sequence before its first token), or "across_languages" only (the
    # answer starts beside the screening, on the message's own words).
    screening_keywords: Literal["every_language", "across_languages"] = "every_language"


class IntentReply(BaseModel):
    intent: str = "question"


class SafetyReply(BaseModel):
    safe: bool = True
    topic: str = ""


class GateReply(IntentReply, SafetyReply):
    """The LLM's screening of a message: its intent and whether it is safe, in one reply;
    with the search keywords in the documents' language(s) when the prompt asked for them."""

    keywords: Any = None  # read leniently (screened_keywords): a broken one is no keywords


# Keywords of each level the screening names for a question (the keywords prompt's own
# limit), and the characters a keyword may have: a phrase, not a text.
SCREENING_KEYWORDS = 8
_KEYWORD_CHARS = 80


def screened_keywords(value: Any) -> ScreenedKeywords:
    """The (high level, low level) keywords of a screening reply's "keywords" field, read
    leniently: an object of two lists ("high_level"/"low_level", or "high"/"low"); a string
    for a list is one keyword. None when it names none: the answer then asks for them."""
    if not isinstance(value, dict):
        return None

    def level(*names: str) -> tuple[str, ...]:
        found: Any = next((value[n] for n in names if n in value), [])
        items = [found] if isinstance(found, str) else found if isinstance(found, list) else []
        kept = [" ".join(i.split())[:_KEYWORD_CHARS] for i in items if isinstance(i, str)]
        return tuple(dict.fromkeys(k for k in kept if k))[:SCREENING_KEYWORDS]

    high, low = level("high_level", "high"), level("low_level", "low")
    return (high, low) if high or low else None


@dataclass(frozen=True, slots=True)
class _Screening:
    intent: Intent = "question"
    unsafe: str | None = None  # the unsafe topic
    note: str = ""  # why the reply was not taken as given
    # The LLM's intent slot decided (or will, in classify()): then the request prior does not.
    llm_intent: bool = False
    keywords: ScreenedKeywords = None


# scores, covered, reason, the request prior's score (unfitted gates only), and whether a
# refusal is for coverage alone, which the model may judge instead (unfitted, not the stuffing
# veto: see GateOptions.model_judges_uncovered)
_Coverage = tuple[dict[str, float], bool, str, PriorScore | None, bool]
# How the reason of a deferred decision wraps the coverage rule's own, for a person reading it.
DEFERRED_PREFIX = "deferred to the model: the word rule says "
DEFERRED_SUFFIX = "; left to the model's check of the sources (LLM configured, addressed)"


@dataclass
class _CachedFit:
    stamp: str | None
    fit: GateFit | None


class Gate:
    def __init__(
        self,
        *,
        embedder: Embedder,
        vectors: VectorStore,
        state: StateStore,
        llm: LLM | None = None,
        options: GateOptions | None = None,
        cache: VectorCache | None = None,
        coverage: CoverageRule | None = None,
    ) -> None:
        self.embedder = embedder
        self.vectors = vectors
        # Every KB search of the gate goes through the in-memory copy of the KB's vectors
        # (see core.vector_cache for how it stays fresh); a KB too large for it is
        # searched in the store.
        self.cache = cache or VectorCache(vectors, options=CacheOptions())
        self.state = state
        self.llm = llm
        self.options = options or GateOptions()
        # The one coverage rule; the answerer shares it (bot.wiring), so a message the gate
        # has judged is not judged again.
        self.coverage = coverage or CoverageRule(
            embedder=embedder, snapshots=self.cache, options=self.options.coverage
        )
        self._fits: dict[str, _CachedFit] = {}

    # --- deciding ---------------------------------------------------------------------------

    async def decide(
        self, kb: str, message: Message | str, *, addressed: bool = False
    ) -> GateDecision:
        """The decision for one message. A Message says itself whether it was addressed
        (a mention, a reply to the bot, a DM); `addressed` is for plain text."""
        prepared = self._prepare(message, addressed)
        if isinstance(prepared, GateDecision):
            return prepared
        text, language, addressed = prepared
        empty = await self._kb_empty(kb, language, addressed)
        if empty is not None:
            return empty
        # The cheap checks first: the model's intent and safety call is made only for a message
        # they let through (or one they leave to the model), never to be thrown away.
        coverage, _ = await self._refusal(kb, text, addressed)
        _, covered, _, _, deferrable = coverage
        if not covered and not (deferrable and addressed and self._defers):
            return self._verdict(language, addressed, coverage, _Screening())
        return self._verdict(language, addressed, coverage, await self._screening(text, language))

    async def screen(
        self, kb: str, message: Message | str, *, addressed: bool = False
    ) -> GateDecision:
        """Every stage but the LLM's screening (filters, banned topics, coverage): cheap. An
        "answer" from here is provisional until classify() confirms it."""
        prepared = self._prepare(message, addressed)
        if isinstance(prepared, GateDecision):
            return prepared
        text, language, addressed = prepared
        empty = await self._kb_empty(kb, language, addressed)
        if empty is not None:
            return empty
        pending = _Screening(llm_intent=self._llm_intent_enabled)  # classify() asks the LLM
        coverage, near = await self._refusal(kb, text, addressed)
        decision = self._verdict(language, addressed, coverage, pending)
        if self.options.screening_keywords == "across_languages":
            near = tuple(lang for lang in near if lang != language)
        if decision.refused or not near:
            return decision
        # The screening, a call made anyway, also names the message's search keywords as the
        # nearest passages' language(s) word them: the answer retrieves on them beside the
        # message's own words (core.answer.pipeline, _retrieve_own_words). Across languages
        # the message's words find little; in the same language a typo, or a task described
        # without the setting or function that does it ("drop a metric at scrape time"),
        # finds other sections than the one that answers.
        return replace(decision, keyword_languages=near)

    async def classify(
        self, message: Message | str, screened: GateDecision, *, addressed: bool = False
    ) -> GateDecision:
        """`screened` (an "answer" from screen()) confirmed or overturned by the LLM's intent
        and safety screening — the one LLM call of the gate."""
        prepared = self._prepare(message, addressed)
        if isinstance(prepared, GateDecision) or screened.refused:
            return screened
        text, language, addressed = prepared
        screening = await self._screening(text, language, keywords_in=screened.keyword_languages)
        # an unfitted decision (its scores hold the prior's): the prior stands in for an
        # intent slot that failed
        prior = self._prior_score(text)[0] if PRIOR_SCORE in screened.scores else None
        said = screened.coverage_reason or screened.reason
        coverage: _Coverage = (screened.scores, True, said, prior, False)
        if screened.deferred:  # judged again: the screening may leave no evidence of a question
            scores = {k: v for k, v in screened.scores.items() if k != DEFERRED_SCORE}
            coverage = (scores, False, said, prior, True)
        decision = self._verdict(language, addressed, coverage, screening)
        return replace(decision, keywords=screening.keywords) if screening.keywords else decision

    def _prepare(
        self, message: Message | str, addressed: bool
    ) -> GateDecision | tuple[str, Language, bool]:
        """The message's text, language and whether it was addressed, or the decision of the
        filters and the banned-topic list when they already refuse it."""
        if isinstance(message, Message):
            text, from_bot = message.text, message.from_bot
            addressed = message.addressed or message.direct
        else:
            text, from_bot = message, False
        language = detect_language(text)
        filtered = self._filter(text, from_bot=from_bot, addressed=addressed, language=language)
        if filtered is not None:
            return filtered
        text = self._scored_part(text)
        banned = self._banned_topic(text)
        if banned is not None:
            return _refuse(
                "safety",
                f"mentions the banned topic {banned!r}",
                language,
                addressed,
                DECLINE_UNSAFE,
            )
        return text, language, addressed

    async def _kb_empty(self, kb: str, language: Language, addressed: bool) -> GateDecision | None:
        """The decision for a message to a KB with no chunks (nothing indexed yet, or a
        channel bound to a KB nobody indexed), else None. Read from the in-memory copy the
        coverage rule searches anyway (core.vector_cache): no store round trip per message,
        and the KB's first indexing run is seen at the next check (an empty copy waits for
        it; /tacit reindex and remember drop the copy at once)."""
        snapshot = await self.cache.snapshot("chunks", kb, wait_if_empty=True)
        if snapshot.matrix is None or snapshot.rows:  # too large to copy, or has chunks
            return None
        shown = _shown_kb(kb)
        return _refuse(
            "kb",
            f"kb_empty: knowledge base {kb[:60]!r} has no indexed documents (an admin "
            f"indexes them: tacit index PATH --kb {shown})",
            language,
            addressed,
            {lang: reply.format(kb=shown) for lang, reply in KB_EMPTY.items()},
        )

    def _verdict(
        self, language: Language, addressed: bool, coverage: _Coverage, screening: _Screening
    ) -> GateDecision:
        """Intent first (chatter is declined as chatter), then coverage, then safety. The
        intent is the LLM's when its slot answered, else the request prior's (no fit). A
        question addressed to the bot that the unfitted rule refused for coverage alone is
        deferred to the answerer's model instead (GateOptions.model_judges_uncovered)."""
        scores, covered, reason, prior, deferrable = coverage
        said = reason
        intent = screening.intent
        if prior is not None and not screening.llm_intent:
            if not prior.is_request:
                return _refuse(
                    "intent",
                    f"not a question or a request: {prior.describe()}; {reason}",
                    language,
                    addressed,
                    DECLINE_NOT_A_QUESTION,
                    intent="chitchat",
                    scores=scores,
                )
            reason = f"{prior.describe()}; {reason}"
        if intent != "question":
            return _refuse(
                "intent",
                f"intent is {intent}, not a question",
                language,
                addressed,
                DECLINE_NOT_A_QUESTION,
                intent=intent,
                scores=scores,
            )
        if screening.note:
            reason = f"{reason}; {screening.note}"
        if not covered:
            # a question by the LLM's intent slot or the prior, never by default
            asked = screening.llm_intent or prior is not None
            if not (deferrable and addressed and asked and self._defers):
                return _refuse(
                    "refusal",
                    reason,
                    language,
                    addressed,
                    NOT_COVERED,
                    intent=intent,
                    scores=scores,
                )
            reason = f"{DEFERRED_PREFIX}{reason}{DEFERRED_SUFFIX}"
            scores = {**scores, DEFERRED_SCORE: 1.0}
        if screening.unsafe is not None:
            return _refuse(
                "safety",
                f"judged unsafe: {screening.unsafe}",
                language,
                addressed,
                DECLINE_UNSAFE,
                intent=intent,
                scores=scores,
            )
        return GateDecision(
            "answer",
            "safety" if self._safety_enabled else "refusal",
            reason,
            language,
            intent,
            scores,
            coverage_reason=said,
        )

    def _filter(
        self, text: str, *, from_bot: bool, addressed: bool, language: Language
    ) -> GateDecision | None:
        if from_bot:  # never talk to bots: two assistants answering each other never stop
            return GateDecision("silent", "filter", "sent by a bot", language)
        stripped = text.strip()
        if _COMMAND.match(stripped):
            return GateDecision(
                "silent",
                "filter",
                "a chat command (its own handler answers it)",
                language,
                intent="command",
            )
        meaningful = len(_HAS_CONTENT.findall(stripped))
        if meaningful < self.options.min_chars:
            why = (
                "empty"
                if not stripped
                else (
                    f"too short ({meaningful} meaningful character(s), fewer than "
                    f"{self.options.min_chars})"
                )
            )
            return _refuse(
                "filter", why, language, addressed, DECLINE_NOT_A_QUESTION, intent="other"
            )
        if not message_content(stripped):  # "[捂脸][旺柴]", "[图片]。emoji"
            return _refuse(
                "filter",
                "only chat stickers or export placeholders: nothing is asked",
                language,
                addressed,
                DECLINE_NOT_A_QUESTION,
                intent="chitchat",
            )
        return None

    def _scored_part(self, text: str) -> str:
        """What the gate scores of a message, decided or labelled: its beginning, stripped."""
        return text.strip()[: self.options.max_chars]

    def _banned_topic(self, text: str) -> str | None:
        folded = normalise(text)
        for topic in self.options.banned_topics:
            if topic.strip() and normalise(topic.strip()) in folded:
                return topic
        return None

    @property
    def _margin(self) -> float:
        return self.coverage.options.overheard_margin

    @property
    def _safety_enabled(self) -> bool:
        return self.llm is not None and self.options.llm_safety

    @property
    def _defers(self) -> bool:
        return self.llm is not None and self.options.model_judges_uncovered

    @property
    def _llm_intent_enabled(self) -> bool:
        return self.llm is not None and self.options.llm_intent

    def _prior_score(self, text: str) -> tuple[PriorScore | None, str]:
        """The request prior's score of `text`, or None and why there is none."""
        if not self.options.request_prior:
            return None, "request prior off ([gate] request_prior)"
        prior = _request_prior()
        if isinstance(prior, str):
            return None, prior
        return prior.score(text, threshold=self.options.prior_threshold), ""

    async def _screening(
        self, text: str, language: Language, *, keywords_in: Sequence[Language] = ()
    ) -> _Screening:
        """The LLM's intent slot and safety verdict, from one call. Any failure to get them —
        the endpoint fails, the reply is unreadable, a draft inside <think> (never read) —
        counts as a safe question: the banned-topic list has already run, later stages
        catch chatter, and the answer comes from the team's documents.

        `keywords_in`: the languages of the passages nearest the message (screen()). The same
        call then names the message's search keywords in them as well: a question asked across
        languages would otherwise ask for them in a call of its own, one more in sequence
        before its first token (core.answer.pipeline _retrieve_own_words)."""
        if self.llm is None or not (self.options.llm_intent or self.options.llm_safety):
            return _Screening()
        prompt = prompts.render(
            "gate_classify",
            language,
            message=text,
            banned_topics=[t.strip() for t in self.options.banned_topics if t.strip()],
            keywords_in=[LANGUAGE_NAME[language][other] for other in keywords_in],
            max_keywords=SCREENING_KEYWORDS,
        )
        try:
            reply = await self.llm.chat_json(prompt, GateReply)
        except LLMBadResponse:
            return _Screening(note="screening reply unreadable: taken as a question, safe")
        except LLMError as exc:
            return _Screening(
                note=f"intent and safety check failed ({exc}): taken as a question, safe"
            )
        intent: Intent = "question"
        note = ""
        if self.options.llm_intent:
            said = reply.intent.strip().lower()
            known = [i for i in INTENTS if i == said]
            if known:
                intent = known[0]
            else:
                note = f"unknown intent {reply.intent!r}, taken as a question"
        unsafe = None
        if self.options.llm_safety and not reply.safe:
            unsafe = reply.topic.strip() or "unspecified"
        decided = self.options.llm_intent and not note  # an unknown intent decides nothing
        keywords = screened_keywords(reply.keywords) if keywords_in else None
        return _Screening(intent, unsafe, note, llm_intent=decided, keywords=keywords)

    async def _refusal(
        self, kb: str, text: str, addressed: bool
    ) -> tuple[_Coverage, tuple[Language, ...]]:
        """The coverage verdict (its scores, whether covered, why), and the languages the
        passages nearest the message are written in (Coverage.nearest_languages)."""
        # Two operating points of one rule (or one fit): addressed, its own bar; overheard,
        # a bar raised by CoverageOptions.overheard_margin (a message nobody asked the bot is
        # answered only when the KB clearly covers it).
        # The fit's stamp is a state-store round trip and the embedding a model call: neither
        # needs the other, so the read waits beside the embedding, not before it. The message
        # and its request (when that is not the whole message) are embedded in one call, and
        # so is its content when stickers or placeholders make that differ: the fitted scorer
        # reads the content (as its examples were read), the unfitted rule the text as written.
        content = content_to_score(text)
        written = self.coverage.texts_to_embed(text)
        read = written if content == text else [*written, *self.coverage.texts_to_embed(content)]
        (fit, missing), embedded = await asyncio.gather(
            self._usable_fit(kb), self.embedder.embed(read)
        )
        if fit is not None and (incompatible := self._incompatibility(kb, fit)):
            fit, missing = None, incompatible
        subject, vectors = text, embedded[: len(written)]
        if fit is not None and content != text:
            subject, vectors = content, embedded[len(written) :]
        embedding = vectors[:1]
        # With a fit, the rule's search of the chunks also brings the nearest few that the
        # fitted features need: one search of the KB per message, not two.
        coverage, nearest = await self.coverage.check_with_nearest(
            kb,
            subject,
            embedding=embedding[0],
            request_embedding=vectors[1] if len(vectors) > 1 else None,
            limit=1 if fit is None else CHUNKS_PER_MESSAGE,
        )
        near = coverage.nearest_languages
        if fit is None:
            scores = dict(coverage.signals)
            prior, why_not = self._prior_score(text)
            if prior is not None:
                scores.update(
                    {
                        PRIOR_SCORE: prior.probability,
                        "prior_marked": float(prior.marked),
                        "prior_asks": float(prior.asks),
                        PRIOR_THRESHOLD_SCORE: prior.threshold,
                    }
                )
            else:
                missing = f"{missing}; {why_not}"
            reason = f"{coverage.reason} ({missing})"
            covered = coverage.covered if addressed else coverage.clear
            if coverage.covered and not covered:
                reason = f"not clearly covered (overheard, every bar raised): {reason}"
            # the stuffing veto is no question the model could answer from the KB, unless the
            # model is to judge that too (GateOptions.model_judges_stuffing)
            deferrable = not coverage.off_request or self.options.model_judges_stuffing
            return (scores, covered, reason, prior, deferrable), near
        features = await self._features(
            kb, [text], embedding, fit, chunk_hits=None if nearest is None else [nearest]
        )
        probability = float(fit.probabilities(features)[0])
        scores = dict(zip(fit.features, (float(x) for x in features[0]), strict=True))
        threshold = fit.threshold if addressed else min(1.0, fit.threshold + self._margin)
        scores.update(probability=probability, threshold=fit.threshold)
        if not addressed:
            scores["overheard_threshold"] = threshold
        covered = probability >= threshold
        if covered and coverage.off_request:
            # KB words around an off-topic request: the fit saw the words, not what is asked
            return (scores, False, f"not answerable: {coverage.reason}", None, False), near
        verdict = "answerable" if covered else "not answerable"
        said = (
            scores,
            covered,
            (
                f"{verdict}: P(answerable) {probability:.2f} vs threshold {threshold:.2f} "
                f"(best chunk {scores['chunk_max']:.2f}, nearest answerable example "
                f"{scores['good_max']:.2f}, nearest chatter {scores['bad_max']:.2f})"
            ),
            None,
            False,  # a fit decides: nothing is deferred
        )
        return said, near

    async def _features(
        self,
        kb: str,
        texts: Sequence[str],
        embeddings: npt.NDArray[np.floating[Any]],
        fit: GateFit,
        *,
        chunk_hits: Sequence[Sequence[VectorHit]] | None = None,
    ) -> Matrix:
        """The fitted features of messages as written: `embeddings` (and `chunk_hits`) are
        of their content (content_to_score), the KB features read the content, the cues the
        text as written, and the n-gram index takes the content itself."""
        kb_rows = await self._kb_rows(
            kb,
            [content_to_score(t) for t in texts],
            embeddings,
            use_graph=fit.use_graph,
            chunk_hits=chunk_hits,
        )
        examples, lexical = fit.example_features(embeddings), fit.lexical_features(texts)
        return feature_matrix(kb_rows, examples, lexical, cue_matrix(texts))

    async def _kb_rows(
        self,
        kb: str,
        texts: Sequence[str],
        embeddings: npt.NDArray[np.floating[Any]],
        *,
        use_graph: bool,
        chunk_hits: Sequence[Sequence[VectorHit]] | None = None,
    ) -> Matrix:
        """The features that read the KB, per text: its nearest chunks (and entities and
        relations), then the coverage rule's signals. `chunk_hits`: the nearest chunks, when
        already searched (see core.gate.signals.kb_features)."""
        nearness = await kb_features(
            kb, texts, embeddings, vectors=self.cache, use_graph=use_graph, chunk_hits=chunk_hits
        )
        return np.hstack([nearness, await self.coverage.signal_rows(kb, texts, embeddings)])

    def _check_compatible(self, kb: str, fit: GateFit) -> None:
        if fit.embedder != self.embedder.name or fit.dim != self.embedder.dim:
            raise StoreError(
                f"the gate of knowledge base {kb!r} was fitted with embedder {fit.embedder} "
                f"({fit.dim}-d), but {self.embedder.name} ({self.embedder.dim}-d) is configured",
                hint=f"fit it again: {fit_command(kb)}",
            )

    def _incompatibility(self, kb: str, fit: GateFit) -> str:
        """Why `fit` cannot score this Tacit's messages ("" when it can)."""
        try:
            self._check_compatible(kb, fit)
        except StoreError as exc:
            return f"the stored fit is not usable: {exc}; {exc.hint}"
        return ""

    async def _usable_fit(self, kb: str) -> tuple[GateFit | None, str]:
        """The fit to score with, or None and why. A state store that cannot be reached does
        not stop the gate: the fit last loaded is used, or else the coverage rule. Nor does a
        fit this Tacit cannot read (an older format after an upgrade, an unreadable value):
        silencing a KB until someone refits would be worse than the unfitted rule, so that
        rule decides and every decision's reason says how to refit."""
        try:
            return await self.current_fit(kb), "no fitted gate for this KB"
        except StoreUnavailable as exc:
            cached = self._fits.get(kb)
            if cached is not None and cached.fit is not None:
                return cached.fit, ""
            return None, f"the gate's fit cannot be read: {exc}"
        except StoreError as exc:
            return None, f"the stored fit is not usable: {exc}; {exc.hint}"

    async def current_fit(self, kb: str) -> GateFit | None:
        """The stored fit, reloaded only when its stamp changed (one small read per message)."""
        stamp = await fit_stamp(self.state, kb)
        cached = self._fits.get(kb)
        if cached is not None and cached.stamp == stamp:
            return cached.fit
        fit = await load_fit(self.state, kb) if stamp is not None else None
        self._fits[kb] = _CachedFit(stamp, fit)
        return fit

    # --- fitting and evaluating ---------------------------------------------------------------

    async def labelled(
        self, kb: str, good: Sequence[str], bad: Sequence[str]
    ) -> tuple[list[str], npt.NDArray[np.int8], npt.NDArray[np.float32], Matrix, bool]:
        """Texts (as written), labels, embeddings and KB features of labelled messages (one
        batch each). What is embedded and searched is each message's content, as when a
        message is scored (see _features)."""
        if await self.vectors.count("chunks", kb) == 0:
            raise InputError(
                f"knowledge base {kb!r} is empty: the gate scores messages against its documents",
                hint=f"index documents first: tacit index --kb {kb} PATH",
            )
        self.cache.invalidate(kb)  # a fit reads the KB as it is now, not a copy of a minute ago
        texts = [self._scored_part(t) for t in (*good, *bad) if t.strip()]
        labels = np.asarray(
            [1] * sum(1 for t in good if t.strip()) + [0] * sum(1 for t in bad if t.strip()),
            dtype=np.int8,
        )
        use_graph = await has_graph_vectors(self.vectors, kb)
        contents = [content_to_score(t) for t in texts]
        embeddings = np.asarray(await self.embedder.embed(contents), dtype=np.float32)
        kb_rows = await self._kb_rows(kb, contents, embeddings, use_graph=use_graph)
        return texts, labels, embeddings, kb_rows, use_graph

    async def fit(
        self,
        kb: str,
        good: Sequence[str],
        bad: Sequence[str],
        *,
        precision: float | None = None,
        folds: int = DEFAULT_FOLDS,
    ) -> GateFit:
        """Fit on the labelled messages and store the fit with the KB."""
        fit = await self.trial_fit(kb, good, bad, precision=precision, folds=folds)
        await self.keep_fit(kb, fit)
        return fit

    async def keep_fit(self, kb: str, fit: GateFit) -> None:
        """Store a fit made by trial_fit (after checking it) as the KB's fit."""
        await save_fit(self.state, kb, fit)
        self._fits.pop(kb, None)

    async def trial_fit(
        self,
        kb: str,
        good: Sequence[str],
        bad: Sequence[str],
        *,
        precision: float | None = None,
        folds: int = DEFAULT_FOLDS,
    ) -> GateFit:
        """A fit on the labelled messages, not stored (to compare before storing it)."""
        from core.gate.fitting import fit_gate  # scikit-learn is needed only to fit

        texts, labels, embeddings, kb_rows, use_graph = await self.labelled(kb, good, bad)
        return await asyncio.to_thread(
            fit_gate,
            texts,
            labels,
            embeddings,
            kb_rows,
            embedder=self.embedder.name,
            use_graph=use_graph,
            precision=precision,
            folds=folds,
        )

    async def score_stored(
        self, kb: str, texts: Sequence[str]
    ) -> tuple[GateFit, npt.NDArray[np.float64]]:
        """P(answerable) of each message under the KB's stored fit."""
        fit = await self.current_fit(kb)
        if fit is None:
            raise InputError(
                f"knowledge base {kb!r} has no fitted gate",
                hint=f"fit one: {fit_command(kb)}",
            )
        return fit, await self.score_with(kb, fit, texts)

    async def score_with(
        self, kb: str, fit: GateFit, texts: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """P(answerable) of each message under `fit` (stored or not)."""
        self._check_compatible(kb, fit)
        contents = [content_to_score(t) for t in texts]
        embeddings = np.asarray(await self.embedder.embed(contents), dtype=np.float32)
        features = await self._features(kb, texts, embeddings, fit)
        return fit.probabilities(features)


def _request_prior() -> RequestPrior | str:
    """The shipped prior (read once per process), or why it cannot be read."""
    try:
        return shipped_prior()
    except (OSError, ValueError, KeyError) as exc:
        return f"request prior unreadable ({exc}): reinstall Tacit"


def _shown_kb(kb: str) -> str:
    """The KB's name as a reply shows it: only a valid name (core.kb) is echoed into a chat."""
    try:
        return validate_kb_name(kb)
    except ValueError:
        return "NAME"


def _refuse(
    stage: Stage,
    reason: str,
    language: Language,
    addressed: bool,
    declines: dict[str, str],
    *,
    intent: Intent | None = None,
    scores: dict[str, float] | None = None,
) -> GateDecision:
    if addressed:
        return GateDecision(
            "decline", stage, reason, language, intent, scores or {}, declines[language]
        )
    return GateDecision("silent", stage, reason, language, intent, scores or {})
