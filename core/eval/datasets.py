"""Evaluation data sets read from JSONL, checked line by line with errors that say where.

- choice:    {"question": "...\\nA. …\\nB. …", "answer": "B"} (SeedBench QA-1)
- retrieval: {"question", "supporting": [source ids], "answer"?, "aliases"?} (bench/convert_*)
- refusal:   two text files, one message per line (good = answerable)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core.errors import InputError
from core.eval.scoring import gold_letter


@dataclass(frozen=True, slots=True)
class ChoiceItem:
    id: str
    question: str
    answer: str  # the gold option letter


@dataclass(frozen=True, slots=True)
class RetrievalItem:
    id: str
    question: str
    supporting: tuple[str, ...]
    answers: tuple[str, ...] = field(default=())  # gold answer and its aliases; none: no EM/F1


Item = TypeVar("Item", ChoiceItem, RetrievalItem)


def item_id(record: dict[str, Any], question: str) -> str:
    """The record's own id, else a short hash of its question (stable across runs)."""
    given = record.get("id") or record.get("_id")
    if given not in (None, ""):
        return str(given)
    return hashlib.sha256(question.encode("utf-8")).hexdigest()[:12]


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of each non-blank line; a bad line stops with its number."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text ({exc.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: not a JSON object")
        rows.append((number, record))
    if not rows:
        raise InputError(f"{path} holds no records (JSONL: one JSON object per line)")
    return rows


def _question(path: Path, number: int, record: dict[str, Any]) -> str:
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError(f'{path}:{number}: no "question" text')
    return question.strip()


def read_choice(path: Path, limit: int | None = None) -> list[ChoiceItem]:
    items: list[ChoiceItem] = []
    for number, record in read_jsonl(path)[:limit]:
        question = _question(path, number, record)
        try:
            answer = gold_letter(str(record.get("answer", "")))
        except ValueError:
            raise InputError(
                f'{path}:{number}: "answer" must be an option letter, not {record.get("answer")!r}'
            ) from None
        items.append(ChoiceItem(item_id(record, question), question, answer))
    return _unique(path, items)


def read_retrieval(path: Path, limit: int | None = None) -> list[RetrievalItem]:
    items: list[RetrievalItem] = []
    for number, record in read_jsonl(path)[:limit]:
        question = _question(path, number, record)
        supporting = record.get("supporting")
        if (
            not isinstance(supporting, list)
            or not supporting
            or not all(isinstance(s, str) and s for s in supporting)
        ):
            raise InputError(f'{path}:{number}: "supporting" must be a list of source ids')
        answers: list[str] = []
        if isinstance(record.get("answer"), str) and record["answer"].strip():
            answers.append(record["answer"].strip())
            aliases = record.get("aliases") or record.get("answer_aliases") or []
            answers += [a for a in aliases if isinstance(a, str) and a.strip()]
        items.append(
            RetrievalItem(
                item_id(record, question),
                question,
                tuple(dict.fromkeys(supporting)),
                tuple(dict.fromkeys(answers)),
            )
        )
    return _unique(path, items)


def read_messages(path: Path) -> list[str]:
    """Non-blank lines of a UTF-8 file (the refusal sets)."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text ({exc.reason})") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise InputError(f"{path} has no messages (one per line)")
    return lines


def _unique(path: Path, items: list[Item]) -> list[Item]:
    """Ids identify results across runs: two records with one id would share a cache entry."""
    seen: dict[str, int] = {}
    for position, item in enumerate(items):
        if item.id in seen:
            raise InputError(
                f"{path}: records {seen[item.id] + 1} and {position + 1} share the id {item.id!r}"
            )
        seen[item.id] = position
    return items
