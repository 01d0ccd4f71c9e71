"""The KB's own word for a passage word: a word found across scripts must be the KB's word for it.

CoverageRule.translations finds a word of the message in a passage of the other script when
the multilingual embedder puts it close enough to one of the passage's words (TRANSLATION_MIN).
That band holds true translations and false ones alike: 最晚 ~ late 0.678 is one, 床位 ~ floor
0.678 is not, and on real chat 键盘 ~ keys 0.672 and 幻觉 ~ visual 0.665 are not either. The KB
itself tells them apart: it writes 楼层 for "floor" (0.737), a word of the message's script
nearer "floor" than 床位 and not meaning 床位 (楼层 ~ 床位 0.59). So a match "message word m ~
passage word p" stands unless the KB writes a rival: a word of m's script more than
RIVAL_MARGIN nearer p than m is, that is neither m said another way (SAME_MEANING from m or
more: "minutes" is nearer 分钟 than "min", and means it) nor, in Chinese, a word sharing one of
m's characters (kin: 源码 and 来源于 share 源, "source", and sit close to it). The
margin keeps 最晚 ~ late, whose nearest word of the KB is 延迟, only a little nearer: a rival
must be clearly the KB's word for the passage word, not merely as near.

The check needs every word of the KB in that script embedded: ScriptWords holds them, built
once per version of the KB, the vectors of the words an earlier version held carried over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

# A rival must be this much nearer the passage word than the message's word is: 最晚 ~ late
# is a translation though the KB's 延迟 is slightly nearer "late"; 床位 ~ floor is not, the KB's
# 楼层 being clearly nearer "floor". The margin sits between the two.
RIVAL_MARGIN = 0.04
# …and less near the message's word than this: a word nearer it is the same word said another
# way (min and minutes, 病人 and 患者, db and database), no rival; 床位 and 楼层 fall below it.
SAME_MEANING = 0.6

Embed = Callable[[Sequence[str]], Awaitable[npt.NDArray[np.floating]]]


@dataclass
class ScriptWords:
    """The KB's words of one script (KbTerms.script_words) and their unit vectors."""

    words: tuple[str, ...]
    # one unit row per word, float32 (2 KiB at 512 dimensions): a passage word is compared with
    # all of them, and widening float16 rows for each comparison costs far more than the product
    matrix: npt.NDArray[np.float32]
    # a passage word → the rows of the KB's words that could rival a match with it (nearer it
    # than any match can be by RIVAL_MARGIN) and how near: the same words recur message after
    # message
    _near: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]] = field(
        default_factory=dict, repr=False
    )

    @classmethod
    async def build(
        cls,
        words: Sequence[str],
        embed: Embed,
        known: Mapping[str, npt.NDArray[np.floating]],
        *,
        batch: int,
    ) -> ScriptWords:
        """`known`: vectors already made (an earlier version's, the rule's word cache); the
        other words are embedded `batch` at a time."""
        vectors = {w: np.asarray(known[w], dtype=np.float32) for w in words if w in known}
        missing = [w for w in words if w not in vectors]
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            made = np.asarray(await embed(part), dtype=np.float32)
            norms = np.linalg.norm(made, axis=1, keepdims=True)
            unit = made / np.where(norms > 0.0, norms, 1.0)
            vectors.update(zip(part, unit, strict=True))
        if not words:
            return cls((), np.zeros((0, 0), dtype=np.float32))
        return cls(tuple(words), np.stack([vectors[w] for w in words]))

    def vectors(self) -> dict[str, npt.NDArray[np.float32]]:
        """Each word's row, for the next version of the KB (build's `known`)."""
        return dict(zip(self.words, self.matrix, strict=True))

    def rivalled(
        self,
        passage_word: str,
        passage_vector: npt.NDArray[np.floating],
        word: str,
        word_vector: npt.NDArray[np.floating],
        similarity: float,
        floor: float,
    ) -> bool:
        """Whether the KB writes a word of this script more than RIVAL_MARGIN nearer the passage
        word than the message's `word` is (`similarity`, at least `floor`: the threshold of a
        match), that neither means the message's word nor is its kin."""
        rows, near = self._rivals(passage_word, passage_vector, floor + RIVAL_MARGIN)
        closer = [int(row) for row in rows[near > similarity + RIVAL_MARGIN]]
        closer = [row for row in closer if not kin(word, self.words[row])]
        if not closer:
            return False
        to_word = self.matrix[closer] @ np.asarray(word_vector, np.float32)
        return bool((to_word < SAME_MEANING).any())

    def _rivals(
        self, passage_word: str, vector: npt.NDArray[np.floating], least: float
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        known = self._near.get(passage_word)
        if known is None:
            if not self.words:
                return np.zeros(0, np.intp), np.zeros(0, np.float32)
            sims = self.matrix @ np.asarray(vector, dtype=np.float32)
            at = np.flatnonzero(sims >= least)
            known = (at, sims[at])
            self._near[passage_word] = known
        return known


def kin(word: str, other: str) -> bool:
    """Two Chinese words sharing a character: a Chinese character is a morpheme, so the two
    share a meaning (源码 "source code", 来源于 "comes from": 源 "source"), where two English
    words sharing letters need not."""
    return not word.isascii() and not set(word).isdisjoint(other)


__all__ = ["RIVAL_MARGIN", "SAME_MEANING", "ScriptWords", "kin"]
