"""Turn a HotpotQA file into a corpus `tacit index` reads and questions `tacit eval retrieval`
scores.

    python bench/convert_hotpotqa.py --corpus /tmp/hotpot/corpus.jsonl \\
        --questions /tmp/hotpot/questions.jsonl [--limit 50] [INPUT]

INPUT defaults to ../shared/data/hotpotqa/hotpot_dev_distractor_v1_first100.json. Both the
Hugging Face layout ({"context": {"title": [...], "sentences": [[...]]}, "supporting_facts":
{"title": [...], "sent_id": [...]}}) and the original one ({"context": [[title, [sentences]]],
"supporting_facts": [[title, sent_id]]}) are read.

- corpus JSONL: one record per paragraph, {"id", "title", "text"}. A Wikipedia title names one
  paragraph in HotpotQA, so the id is the title; the paragraphs of all selected questions are
  pooled and each title is written once (the distractors of one question become candidates for
  all of them, as in a real shared knowledge base).
- questions JSONL: {"id", "question", "supporting": [paragraph ids], "answer", "type", "level"}.

Once indexed, a paragraph's source id is "<corpus file name>#<id>"; `tacit eval retrieval`
matches supporting ids against that suffix.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_INPUT = (
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "data"
    / "hotpotqa"
    / "hotpot_dev_distractor_v1_first100.json"
)


def paragraphs(record: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(title, text) of every context paragraph of one question, in either layout."""
    context = record["context"]
    if isinstance(context, dict):
        pairs: Iterable[tuple[str, list[str]]] = zip(
            context["title"], context["sentences"], strict=True
        )
    else:
        pairs = ((title, sentences) for title, sentences in context)
    for title, sentences in pairs:
        # HotpotQA keeps the space between sentences at the start of the next one.
        yield title, "".join(sentences).strip()


def supporting_titles(record: dict[str, Any]) -> list[str]:
    """The supporting paragraphs' titles, first mention first, each once."""
    facts = record["supporting_facts"]
    titles = facts["title"] if isinstance(facts, dict) else [title for title, _ in facts]
    return list(dict.fromkeys(titles))


def convert(
    records: list[dict[str, Any]], limit: int | None = None
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """(corpus records, question records) for the first `limit` questions (all when None)."""
    selected = records if limit is None else records[:limit]
    corpus: dict[str, dict[str, str]] = {}
    questions: list[dict[str, Any]] = []
    for number, record in enumerate(selected):
        for title, text in paragraphs(record):
            if title not in corpus and text:
                corpus[title] = {"id": title, "title": title, "text": text}
        supporting = supporting_titles(record)
        missing = [title for title in supporting if title not in corpus]
        if missing:
            raise ValueError(f"question {number + 1}: supporting {missing} not in its context")
        questions.append(
            {
                "id": record.get("id") or record.get("_id") or str(number),
                "question": record["question"],
                "supporting": supporting,
                "answer": record.get("answer"),
                "type": record.get("type"),
                "level": record.get("level"),
            }
        )
    return list(corpus.values()), questions


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_outputs(
    corpus_path: Path,
    corpus: list[dict[str, Any]],
    questions_path: Path,
    questions: list[dict[str, Any]],
) -> None:
    """Write the corpus and questions JSONL files and say what went where."""
    paragraphs_written = write_jsonl(corpus_path, corpus)
    questions_written = write_jsonl(questions_path, questions)
    print(
        f"{questions_written} questions -> {questions_path}; "
        f"{paragraphs_written} paragraphs -> {corpus_path}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="HotpotQA -> indexable corpus JSONL + questions JSONL for `tacit eval`."
    )
    parser.add_argument(
        "input", nargs="?", type=Path, default=DEFAULT_INPUT, help="HotpotQA JSON file"
    )
    parser.add_argument("--corpus", type=Path, required=True, help="corpus JSONL to write")
    parser.add_argument("--questions", type=Path, required=True, help="questions JSONL to write")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        records = json.loads(args.input.read_text(encoding="utf-8"))
        corpus, questions = convert(records, args.limit)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot convert {args.input}: {exc}", file=sys.stderr)
        return 1
    write_outputs(args.corpus, corpus, args.questions, questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
