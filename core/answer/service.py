"""Answer a question from a knowledge base: retrieve, then generate (or extract), streaming.

Every stage degrades to the next: no LLM, or an LLM that fails before it says anything, gives
the extractive answer; evidence too weak to cover the question gives an explicit refusal.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import prompts
from core.answer.events import Answer, AnswerEvent, Citation, Delta, Final, Status
from core.answer.extractive import best_sentences, compose
from core.errors import InputError, LLMError
from core.ports import LLM, Embedder, GraphStore, VectorStore
from core.retrieve.dense import Evidence, retrieve_chunks
from core.text import Language, detect_language

MAX_QUESTION_CHARS = 4000
_CITATION_MARK = re.compile(r"\[(\d{1,3})\]")

# Fixed user-facing sentences (not prompts): what Tacit says when it will not answer.
NOT_COVERED = {
    "en": "The knowledge base does not cover this.",
    "zh": "知识库里没有这个问题的答案。",
}
CUT_SHORT = {
    "en": "(The answer was cut short: the language model stopped responding.)",
    "zh": "（回答不完整：语言模型中途失去响应。）",
}


@dataclass(frozen=True, slots=True)
class AnswerOptions:
    top_k: int = 5
    min_score: float = 0.25
    evidence_sentences: int = 3
    temperature: float = 0.0
    max_tokens: int | None = None


class Answerer:
    def __init__(
        self,
        *,
        embedder: Embedder,
        vectors: VectorStore,
        graph: GraphStore,
        llm: LLM | None,
        options: AnswerOptions | None = None,
    ) -> None:
        self.embedder = embedder
        self.vectors = vectors
        self.graph = graph
        self.llm = llm
        self.options = options or AnswerOptions()

    async def ask(self, kb: str, question: str) -> AsyncIterator[AnswerEvent]:
        """Status events, text deltas, and always exactly one Final at the end."""
        question = question.strip()
        if not question:
            raise InputError("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        language = detect_language(question)

        yield Status("searching the knowledge base")
        evidence = await retrieve_chunks(
            kb,
            question,
            embedder=self.embedder,
            vectors=self.vectors,
            graph=self.graph,
            top_k=self.options.top_k,
        )
        scores = tuple(e.score for e in evidence)
        best = scores[0] if scores else None
        if best is None or best < self.options.min_score:
            reason = (
                "the knowledge base is empty"
                if best is None
                else f"best match {best:.2f} is below the threshold {self.options.min_score:.2f}"
            )
            text = NOT_COVERED[language]
            yield Delta(text)
            yield Final(Answer(question, text, (), True, reason, language, "refused", scores))
            return

        if self.llm is not None:
            async for event in self._generate(question, language, evidence, scores):
                yield event
            return
        async for event in self._extract(question, language, evidence, scores):
            yield event

    async def _generate(
        self, question: str, language: Language, evidence: list[Evidence], scores: tuple[float, ...]
    ) -> AsyncIterator[AnswerEvent]:
        assert self.llm is not None
        yield Status("writing the answer")
        sources = [
            {"n": n, "label": _label(e), "text": e.chunk.text}
            for n, e in enumerate(evidence, start=1)
        ]
        prompt = prompts.render("answer", language, sources=sources, question=question)
        parts: list[str] = []
        try:
            async for delta in self.llm.stream(
                prompt, temperature=self.options.temperature, max_tokens=self.options.max_tokens
            ):
                parts.append(delta)
                yield Delta(delta)
        except LLMError as exc:
            if not parts:
                yield Status(f"the language model failed ({exc}); answering from the evidence")
                async for event in self._extract(question, language, evidence, scores):
                    yield event
                return
            note = "\n\n" + CUT_SHORT[language]
            parts.append(note)
            yield Delta(note)
        text = "".join(parts).strip()
        citations = _cited(text, evidence)
        yield Final(
            Answer(question, text, citations, False, "answered", language, "generated", scores)
        )

    async def _extract(
        self, question: str, language: Language, evidence: list[Evidence], scores: tuple[float, ...]
    ) -> AsyncIterator[AnswerEvent]:
        sentences = await best_sentences(
            question, evidence, self.embedder, count=self.options.evidence_sentences
        )
        text = compose(sentences)
        if not text:  # chunks with no usable sentence: quote the best chunk whole
            text = f"{evidence[0].chunk.text.strip()} [1]"
        yield Delta(text)
        citations = _cited(text, evidence)
        yield Final(
            Answer(
                question,
                text,
                citations,
                False,
                "answered from evidence (no LLM configured)"
                if self.llm is None
                else "answered from evidence (LLM unavailable)",
                language,
                "extractive",
                scores,
            )
        )


def _label(evidence: Evidence) -> str:
    chunk = evidence.chunk
    return f"{chunk.source} — {chunk.heading}" if chunk.heading else chunk.source


def _cited(text: str, evidence: list[Evidence]) -> tuple[Citation, ...]:
    """Citations for the source numbers the text refers to (all sources if it cites none)."""
    numbers = sorted({int(m) for m in _CITATION_MARK.findall(text) if 1 <= int(m) <= len(evidence)})
    if not numbers:
        numbers = list(range(1, len(evidence) + 1))
    return tuple(
        Citation(
            n,
            evidence[n - 1].chunk.source,
            evidence[n - 1].chunk.heading,
            evidence[n - 1].chunk.text,
        )
        for n in numbers
    )
