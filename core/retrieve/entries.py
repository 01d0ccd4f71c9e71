"""A name's entries: the rows and lines that write it, ranked by what a step asks about it.

Teams write owners, ports and defaults in tables and definition lists, one row or line per
thing, and a plan step asks for one of them: "lumen-gateway / 负责人". Its query ranks passages
by their words and their meaning as a whole, so when the predicate is in the other script
("负责人" against a table headed `Owner`) nothing ranks the row: BM25 shares no word with it,
and a whole table is no closer to "lumen-gateway 负责人" in meaning than the passages that only
mention the gateway.

The subject is the part spelt alike in both languages, so the entries start from it: the
passages that write the name (its best BM25 hits), and in them each row (with its table's
header) or line holding it (core.language.rows). Each entry is scored word to word: for every
content word of the predicate, the nearest of the entry's own words by the multilingual
embedder (负责人 ~ owner, 端口 ~ port, 默认值 ~ default), averaged over the predicate's words.
Word to word rather than the entry's vector against the predicate's: a word is compared with a
word, not with a row of twenty, and in the demo KB's steps the owner's row ranks first or
close (the embedding of a whole row hardly moves with its header's one word). A passage's
score is its best entry's.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.language.rows import StepPattern, content_words
from core.ports import VectorStore
from core.retrieve.context import ScoredChunk
from core.retrieve.graph_reader import GraphReader
from core.word_vectors import WordVectors

# Names looked up per call (a reference may stand for a long list of items), and entries read
# in all: the words of each are embedded, so the work per step stays bounded.
MAX_NAMES = 8
MAX_ENTRIES = 64


async def name_entries(
    kb: str,
    *,
    graph: GraphReader,
    vectors: VectorStore,
    words: WordVectors,
    names: Sequence[str],
    about: Sequence[str],
    hits: int,
    limit: int,
) -> list[ScoredChunk]:
    """The `limit` passages holding the best entries of `names` for `about` (the step's
    predicates), best first, among the `hits` best BM25 hits of each name; none when there is
    no name, no predicate word or no entry."""
    names = [n for n in names if n.strip()][:MAX_NAMES]
    asked = list(dict.fromkeys(w for phrase in about for w in content_words(phrase)))
    if not names or not asked or limit <= 0:
        return []
    found = await vectors.lexical_search("chunks", kb, names, limit=hits)
    order = list(dict.fromkeys(h.id for per_name in found for h in per_name))
    if not order:
        return []
    records = {c.id: c for c in await graph.get_chunks(kb, order)}
    anchors = StepPattern.of(names, ())
    entries: list[tuple[str, list[str]]] = []  # (chunk id, the entry's words)
    for chunk_id in order:
        chunk = records.get(chunk_id)
        if chunk is None:
            continue
        for unit in anchors.anchored(chunk.text):
            entries.append((chunk_id, content_words(unit, leaving=names)))
            if len(entries) >= MAX_ENTRIES:
                break
        if len(entries) >= MAX_ENTRIES:
            break
    vocabulary = list(dict.fromkeys(w for _, ws in entries for w in ws))
    if not vocabulary:
        return []
    matrix = await words.matrix([*asked, *vocabulary])
    similar = matrix[: len(asked)] @ matrix[len(asked) :].T  # predicate word x entry word
    column = {w: i for i, w in enumerate(vocabulary)}
    best: dict[str, float] = {}
    for chunk_id, entry_words in entries:
        if not entry_words:
            continue
        score = float(similar[:, [column[w] for w in entry_words]].max(axis=1).mean())
        best[chunk_id] = max(best.get(chunk_id, -1.0), score)
    ranked = sorted(best, key=lambda c: (-best[c], order.index(c)))[:limit]
    return [ScoredChunk(records[c], best[c], ("entry",)) for c in ranked]


__all__ = ["MAX_ENTRIES", "MAX_NAMES", "name_entries"]
