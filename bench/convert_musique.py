"""Turn MuSiQue questions into a corpus `tacit index` reads and questions `tacit eval retrieval`
scores.

    python bench/convert_musique.py --corpus /tmp/musique/corpus.jsonl \\
        --questions /tmp/musique/questions.jsonl [--limit 50] [--full-corpus] [INPUT]

INPUT defaults to ../shared/data/musique/musique_train.json: a list of
{"id", "question", "answer", "answer_aliases", "answerable", "question_decomposition",
"paragraphs": [{"idx", "title", "paragraph_text", "is_supporting"}]} (20 paragraphs each).

- corpus JSONL: {"id", "title", "text"} per paragraph, pooled over the selected questions and
  written once each. Titles repeat in MuSiQue (85 titles name two or more different passages
  in the shared 1,890-passage corpus), so the id is the title plus the first 8 hex digits of
  the SHA-256 of the text: "Tennessee:1a2b3c4d". It depends on the paragraph alone, so it is
  the same whichever questions are selected. --full-corpus writes every passage of
  musique_train_corpus.json (beside INPUT; --corpus-file to name another) instead of the pool.
- questions JSONL: {"id", "question", "supporting": [ids, in hop order], "answer",
  "aliases", "hops"}. Unanswerable questions (answerable: false) are skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

# The sibling converter's writer: this folder is no package (scripts and tests load files).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_hotpotqa import write_outputs

DEFAULT_INPUT = (
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "data"
    / "musique"
    / "musique_train.json"
)
CORPUS_FILE_NAME = "musique_train_corpus.json"


def paragraph_id(title: str, text: str) -> str:
    """A stable id for one passage: its title and a short hash of its text."""
    digest = hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:8]
    return f"{title.strip()}:{digest}"


def corpus_record(title: str, text: str) -> dict[str, str]:
    return {"id": paragraph_id(title, text), "title": title.strip(), "text": text.strip()}


def supporting_ids(record: dict[str, Any]) -> list[str]:
    """The supporting passages' ids, in the order the decomposition uses them."""
    by_idx = {p["idx"]: p for p in record["paragraphs"]}
    ordered: list[dict[str, Any]] = []
    for step in record.get("question_decomposition") or []:
        paragraph = by_idx.get(step.get("paragraph_support_idx"))
        if paragraph is not None and paragraph not in ordered:
            ordered.append(paragraph)
    # Supporting paragraphs the decomposition does not point at still count.
    ordered += [p for p in record["paragraphs"] if p.get("is_supporting") and p not in ordered]
    return list(dict.fromkeys(paragraph_id(p["title"], p["paragraph_text"]) for p in ordered))


def convert(
    records: list[dict[str, Any]],
    limit: int | None = None,
    full_corpus: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """(corpus records, question records) for the first `limit` answerable questions."""
    answerable = [r for r in records if r.get("answerable", True)]
    selected = answerable if limit is None else answerable[:limit]
    corpus: dict[str, dict[str, str]] = {}
    if full_corpus is not None:
        for passage in full_corpus:
            row = corpus_record(passage["title"], passage["text"])
            corpus.setdefault(row["id"], row)
    questions: list[dict[str, Any]] = []
    for record in selected:
        pooled = [corpus_record(p["title"], p["paragraph_text"]) for p in record["paragraphs"]]
        if full_corpus is None:
            for row in pooled:
                corpus.setdefault(row["id"], row)
        supporting = supporting_ids(record)
        missing = [sid for sid in supporting if sid not in corpus]
        if missing:
            raise ValueError(f"question {record.get('id')}: supporting {missing} not in corpus")
        questions.append(
            {
                "id": record.get("id"),
                "question": record["question"],
                "supporting": supporting,
                "answer": record.get("answer"),
                "aliases": list(record.get("answer_aliases") or []),
                "hops": len(record.get("question_decomposition") or []) or len(supporting),
            }
        )
    return list(corpus.values()), questions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="MuSiQue -> indexable corpus JSONL + questions JSONL for `tacit eval`."
    )
    parser.add_argument(
        "input", nargs="?", type=Path, default=DEFAULT_INPUT, help="MuSiQue questions JSON file"
    )
    parser.add_argument("--corpus", type=Path, required=True, help="corpus JSONL to write")
    parser.add_argument("--questions", type=Path, required=True, help="questions JSONL to write")
    parser.add_argument(
        "--limit", type=int, default=None, help="only the first N answerable questions"
    )
    parser.add_argument(
        "--full-corpus",
        action="store_true",
        help=f"write every passage of the shared corpus ({CORPUS_FILE_NAME} beside INPUT) "
        "instead of only the selected questions' paragraphs",
    )
    parser.add_argument(
        "--corpus-file", type=Path, default=None, help="the shared corpus for --full-corpus"
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        records = json.loads(args.input.read_text(encoding="utf-8"))
        full = None
        if args.full_corpus or args.corpus_file:
            corpus_path = args.corpus_file or args.input.with_name(CORPUS_FILE_NAME)
            full = json.loads(corpus_path.read_text(encoding="utf-8"))
        corpus, questions = convert(records, args.limit, full)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot convert: {exc}", file=sys.stderr)
        return 1
    write_outputs(args.corpus, corpus, args.questions, questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
