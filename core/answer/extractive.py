"""The answer when no LLM is configured: the best evidence sentences, each with its citation.

Sentences are scored by similarity to the question; the answer keeps the best few, in the
order they appear in their sources, so the text still reads as the documents wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.ports import Embedder
from core.retrieve.context import ScoredChunk
from core.text import CJK_RUN, cjk_pairs, split_sentences

_WORD = re.compile(r"[A-Za-z0-9_.:-]{3,}")

# Markdown noise that makes a poor answer sentence on its own.
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")
_MIN_SENTENCE_CHARS = 8
_MAX_SENTENCES_PER_CHUNK = 40


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    n: int  # citation number of the chunk it came from
    position: int  # order within the evidence, to restore reading order
    text: str
    score: float


def _sentences(text: str) -> list[str]:
    """Answer-sized sentences: list markers dropped, and a sentence that ends in a colon joined
    with the one after it (a lead-in alone answers nothing: "Deploys are frozen:")."""
    sentences: list[str] = []
    for raw in split_sentences(text):
        sentence = raw.lstrip("#>-*• ").replace("**", "").strip()
        if sentences and sentences[-1].endswith((":", "：")):
            sentences[-1] = f"{sentences[-1]} {sentence}"
        elif len(sentence) >= _MIN_SENTENCE_CHARS and not _TABLE_RULE.match(sentence):
            sentences.append(sentence)
    return sentences


def _candidates(evidence: Sequence[ScoredChunk]) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    position = 0
    for n, item in enumerate(evidence, start=1):
        sentences = _sentences(item.chunk.text)
        for sentence in sentences[:_MAX_SENTENCES_PER_CHUNK]:
            found.append((n, position, sentence))
            position += 1
    return found


async def best_sentences(
    question: str, evidence: Sequence[ScoredChunk], embedder: Embedder, *, count: int
) -> list[EvidenceSentence]:
    """The `count` sentences of the evidence closest to the question, in reading order.

    A sentence's score blends its own similarity with its chunk's, so a sentence from the best
    chunk beats a look-alike from a weak one, and with the share of the question's terms it
    contains.
    """
    candidates = _candidates(evidence)
    if not candidates:
        return []
    vectors = await embedder.embed([question] + [text for _, _, text in candidates])
    similarity = vectors[1:] @ vectors[0]
    chunk_scores = np.array([evidence[n - 1].score for n, _, _ in candidates], dtype=np.float32)
    asked = _terms(question)
    overlap = np.array(
        [len(asked & _terms(text)) / len(asked) if asked else 0.0 for _, _, text in candidates],
        dtype=np.float32,
    )
    blended = 0.55 * similarity + 0.25 * chunk_scores + 0.2 * overlap
    best = np.argsort(-blended)[:count]
    chosen = [
        EvidenceSentence(candidates[i][0], candidates[i][1], candidates[i][2], float(blended[i]))
        for i in best
    ]
    return sorted(chosen, key=lambda s: s.position)


def _terms(text: str) -> set[str]:
    """Words (English) and character pairs (Chinese): the question's own terms in a sentence
    are evidence the embedder alone under-weights, such as names and identifiers."""
    terms = {w.casefold().strip(".:-") for w in _WORD.findall(text)}
    for run in CJK_RUN.findall(text):
        terms.update(cjk_pairs(run))
    return {t for t in terms if t}


def compose(sentences: list[EvidenceSentence]) -> str:
    """One line per sentence, each ending with its citation marker."""
    return "\n".join(f"{s.text} [{s.n}]" for s in sentences)
