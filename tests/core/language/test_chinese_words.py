"""core/language/chinese_words.py: text without a Han character is cut without jieba's full
dictionary, and the same as with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jieba
import pytest

from core.language import chinese_words
from core.language.chinese_words import LATIN_WORDS, search_words, words

REPO = Path(__file__).resolve().parents[3]
HAN = re.compile("[\u4e00-\u9fd5]")

TRICKY = [
    "C++ and c# at AT&T: 3.14% of a_b-c.d runs, C+ and ATT&T and C+++ and c##",
    "naïve café Aschenbrödel über — “quoted” 'single' (parens) [x] {y}",
    "Привет мир, こんにちは, 한국어, ｆｕｌｌｗｉｄｔｈ ＡＴ＆Ｔ",
    "kubectl -n $NAMESPACE describe pod $POD\r\n\tline two  two spaces",
    "v1.2.3-rc.1 10MB 50% #hashtag &amp; e.g. i.e. foo_bar.baz-qux",
]


def english_texts() -> list[str]:
    """Han-free paragraphs of the repository's own documentation."""
    texts = [*TRICKY]
    for path in [*sorted((REPO / "docs").glob("*.md"))[:12], REPO / "README.md"]:
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            if paragraph.strip() and not HAN.search(paragraph):
                texts.append(paragraph)
    return texts


def test_the_latin_words_are_the_dictionarys_words_without_a_han_character() -> None:
    found = []
    with open(jieba.get_dict_file().name, encoding="utf-8") as dictionary:
        for line in dictionary:
            word, freq, tag = line.split()[:3]
            if not HAN.search(word) and not any(ch >= "\u3400" for ch in word):
                found.append((word, int(freq), tag))
    assert tuple(found) == LATIN_WORDS


@pytest.mark.parametrize("cut", ["words", "search_words"])
def test_text_without_han_is_cut_as_the_full_dictionary_cuts_it(cut: str) -> None:
    full = jieba.dt
    full.check_initialized()
    texts = english_texts()
    assert len(texts) > 50
    for text in texts:
        if cut == "words":
            assert words(text) == full.lcut(text), text
        else:
            assert list(search_words(text)) == list(full.cut_for_search(text)), text


def test_text_with_han_is_cut_with_the_full_dictionary() -> None:
    text = "部署C++服务的时候告警了，怎么排查？"
    assert words(text) == jieba.dt.lcut(text)
    assert "排查" in words(text)
    assert chinese_words._cutter(text) is jieba.dt


def test_an_english_cut_does_not_load_the_full_dictionary() -> None:
    probe = (
        "import jieba\n"
        "from core.language.chinese_words import search_words, words\n"
        "assert words('How do I restart the C++ pod?')\n"
        "assert list(search_words('kubectl rollout restart deployment'))\n"
        "print(jieba.dt.initialized)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"
