"""bench/convert_hotpotqa.py and bench/convert_musique.py on tiny inline samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from core.index.loaders import load_file
from tests.bench.loading import bench_module
from tests.conftest import REPO

BENCH = REPO / "bench"


hotpot = bench_module("convert_hotpotqa")
musique = bench_module("convert_musique")

HOTPOT_HF = [
    {
        "id": "q1",
        "question": "Were A and B of the same nationality?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": {"title": ["Alpha", "Beta", "Alpha"], "sent_id": [0, 0, 1]},
        "context": {
            "title": ["Gamma", "Alpha", "Beta"],
            "sentences": [["Gamma is a town."], ["Alpha is a poet.", " He is French."], ["Beta."]],
        },
    },
    {
        "id": "q2",
        "question": "Where is Gamma?",
        "answer": "France",
        "supporting_facts": {"title": ["Gamma"], "sent_id": [0]},
        "context": {"title": ["Gamma", "Delta"], "sentences": [["Gamma is a town."], ["Delta."]]},
    },
]
# The original HotpotQA layout of the second question.
HOTPOT_ORIGINAL = [
    {
        "_id": "q2",
        "question": "Where is Gamma?",
        "answer": "France",
        "supporting_facts": [["Gamma", 0]],
        "context": [["Gamma", ["Gamma is a town."]], ["Delta", ["Delta."]]],
    }
]


def _paragraph(idx: int, title: str, text: str, supporting: bool = False) -> dict[str, object]:
    return {"idx": idx, "title": title, "paragraph_text": text, "is_supporting": supporting}


MUSIQUE = [
    {
        "id": "2hop__1_2",
        "question": "Who founded the publisher of J?",
        "answer": "Hall",
        "answer_aliases": ["G. Hall"],
        "answerable": True,
        "question_decomposition": [
            {"id": 1, "question": "publisher of J?", "answer": "APA", "paragraph_support_idx": 2},
            {"id": 2, "question": "founder of #1?", "answer": "Hall", "paragraph_support_idx": 0},
        ],
        "paragraphs": [
            _paragraph(0, "APA", "APA was founded by Hall.", True),
            _paragraph(1, "Tennessee", "Tennessee is a state."),
            _paragraph(2, "J", "J is published by APA.", True),
        ],
    },
    {
        "id": "2hop__3_4",
        "question": "Unanswerable?",
        "answer": "x",
        "answerable": False,
        "paragraphs": [_paragraph(0, "Z", "Z text.", True)],
    },
    {
        "id": "2hop__5_6",
        "question": "Which state?",
        "answer": "Tennessee",
        "answerable": True,
        "question_decomposition": [
            {"id": 5, "question": "q", "answer": "a", "paragraph_support_idx": 0},
        ],
        "paragraphs": [
            # Same title as a passage of the first question, different text: a different id.
            _paragraph(0, "Tennessee", "Tennessee borders Kentucky.", True),
            _paragraph(1, "APA", "APA was founded by Hall."),
        ],
    },
]


def test_hotpotqa_pools_paragraphs_by_title_and_keeps_supporting_order() -> None:
    corpus, questions = hotpot.convert(HOTPOT_HF)
    assert [row["id"] for row in corpus] == ["Gamma", "Alpha", "Beta", "Delta"]
    assert corpus[1] == {"id": "Alpha", "title": "Alpha", "text": "Alpha is a poet. He is French."}
    assert questions[0] == {
        "id": "q1",
        "question": "Were A and B of the same nationality?",
        "supporting": ["Alpha", "Beta"],
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
    }
    assert questions[1]["supporting"] == ["Gamma"]


def test_hotpotqa_reads_the_original_layout_and_limits_questions() -> None:
    corpus, questions = hotpot.convert(HOTPOT_ORIGINAL)
    assert [row["id"] for row in corpus] == ["Gamma", "Delta"]
    assert questions[0]["id"] == "q2" and questions[0]["supporting"] == ["Gamma"]
    corpus, questions = hotpot.convert(HOTPOT_HF, limit=1)
    assert len(questions) == 1 and "Delta" not in {row["id"] for row in corpus}


def test_musique_ids_are_stable_and_tell_same_titled_passages_apart() -> None:
    corpus, questions = musique.convert(MUSIQUE)
    ids = [row["id"] for row in corpus]
    assert len(ids) == len(set(ids)) == 4  # APA once; two different "Tennessee" passages
    assert sum(1 for i in ids if i.startswith("Tennessee:")) == 2
    assert [q["id"] for q in questions] == ["2hop__1_2", "2hop__5_6"]  # unanswerable skipped
    first = questions[0]
    # Hop order from the decomposition: J first, then APA.
    assert first["supporting"] == [
        musique.paragraph_id("J", "J is published by APA."),
        musique.paragraph_id("APA", "APA was founded by Hall."),
    ]
    assert first["aliases"] == ["G. Hall"] and first["hops"] == 2
    # The id depends on the passage only, not on which questions were selected.
    _, only_last = musique.convert(MUSIQUE[2:])
    assert only_last[0]["supporting"] == questions[1]["supporting"]
    corpus_one, questions_one = musique.convert(MUSIQUE, limit=1)
    assert len(questions_one) == 1 and len(corpus_one) == 3


def test_musique_full_corpus_replaces_the_pool() -> None:
    full = [
        {"title": "APA", "text": "APA was founded by Hall."},
        {"title": "J", "text": "J is published by APA."},
        {"title": "Other", "text": "Not in any question."},
    ]
    corpus, questions = musique.convert(MUSIQUE, limit=1, full_corpus=full)
    assert [row["title"] for row in corpus] == ["APA", "J", "Other"]
    assert len(questions) == 1


def test_the_command_lines_write_files_the_indexer_reads(tmp_path: Path) -> None:
    source = tmp_path / "hotpot.json"
    source.write_text(json.dumps(HOTPOT_HF), encoding="utf-8")
    corpus, questions = tmp_path / "out" / "corpus.jsonl", tmp_path / "out" / "questions.jsonl"
    outputs = ["--corpus", str(corpus), "--questions", str(questions)]
    run = subprocess.run(
        [sys.executable, str(BENCH / "convert_hotpotqa.py"), str(source), *outputs],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "2 questions" in run.stdout
    loaded = load_file(corpus, "corpus.jsonl")
    assert not loaded.failed
    assert [d.source for d in loaded.documents][:2] == ["corpus.jsonl#Gamma", "corpus.jsonl#Alpha"]
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["supporting"] == ["Alpha", "Beta"]

    source = tmp_path / "musique.json"
    source.write_text(json.dumps(MUSIQUE), encoding="utf-8")
    subprocess.run(
        [sys.executable, str(BENCH / "convert_musique.py"), str(source), "--limit", "1", *outputs],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = load_file(corpus, "corpus.jsonl")
    assert len(loaded.documents) == 3 and not loaded.failed


def test_the_command_lines_explain_themselves_and_fail_cleanly(tmp_path: Path) -> None:
    outputs = ["--corpus", str(tmp_path / "c.jsonl"), "--questions", str(tmp_path / "q.jsonl")]
    for name in ("convert_hotpotqa.py", "convert_musique.py"):
        shown = subprocess.run(
            [sys.executable, str(BENCH / name), "--help"], capture_output=True, text=True
        )
        assert shown.returncode == 0 and "--questions" in shown.stdout
        broken = subprocess.run(
            [sys.executable, str(BENCH / name), str(tmp_path / "missing.json"), *outputs],
            capture_output=True,
            text=True,
        )
        assert broken.returncode == 1 and "error:" in broken.stderr
