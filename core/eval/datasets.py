"""Evaluation data sets read from JSONL, checked line by line with errors that say where.

- choice:    {"question": "...\\nA. …\\nB. …", "answer": "B"} (SeedBench QA-1)
- retrieval: {"question", "supporting": [source ids], "answer"?, "aliases"?} (bench/convert_*)
- refusal:   two text files, one message per line (good = answerable)
- answers:   {"id", "kind": "covered"|"uncovered"|"chatter", "q", "facts": [[alternatives], …],
             "source": [paths]} (the first-hour sets: a chat message and what a right answer
             holds)
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


@dataclass(frozen=True, slots=True)
class AnswerItem:
    """One chat message of a first-hour set and what a right outcome is."""

    id: str
    kind: str  # covered (answer it right) | uncovered | chatter (refuse it)
    q: str
    facts: tuple[tuple[str, ...], ...] = ()  # every group needs one of its strings
    source: tuple[str, ...] = ()  # a citation's source must end with one of these
    expected: str = ""  # the reference answer, shown beside a wrong one


ANSWER_KINDS = ("covered", "uncovered", "chatter")
# One line of an answer set is one chat message and its facts: a line far past that is not
# a chat message (a pasted file, a broken export) and is refused before it is parsed.
MAX_ANSWER_LINE_BYTES = 64 * 1024
# Errors listed at once when a file is refused: enough to fix a batch, not a flood.
_ERRORS_SHOWN = 20

Item = TypeVar("Item", ChoiceItem, RetrievalItem, AnswerItem)


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


def _strings(value: Any) -> tuple[str, ...] | None:
    """A list of non-empty strings as a tuple (stripped), or None when it is anything else."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return tuple(v.strip() for v in value)


def _answer_item(record: dict[str, Any]) -> AnswerItem:
    """The record as an AnswerItem; ValueError says which field is wrong."""
    kind = record.get("kind")
    if kind not in ANSWER_KINDS:
        raise ValueError(f'"kind" must be one of {", ".join(ANSWER_KINDS)}, not {kind!r}')
    q = record.get("q")
    if not isinstance(q, str) or not q.strip():
        raise ValueError('no "q" (the message) text')
    given = record.get("id")
    if not isinstance(given, str | int) or isinstance(given, bool) or not str(given).strip():
        raise ValueError('no "id" (a string naming the message)')
    facts: list[tuple[str, ...]] = []
    raw_facts = record.get("facts", [])
    if not isinstance(raw_facts, list):
        raise ValueError('"facts" must be a list of lists of strings')
    for group in raw_facts:
        strings = _strings(group)
        if not strings:
            raise ValueError('"facts" must be a list of non-empty lists of strings')
        facts.append(strings)
    source = _strings(record.get("source", []))
    if source is None:
        raise ValueError('"source" must be a list of paths')
    if kind == "covered" and not facts and not source:
        # nothing to grade a covered answer by but "not refused": a set's mistake, not a pass
        raise ValueError('a covered message needs "facts" or "source" to grade its answer by')
    expected = record.get("expected", "")
    return AnswerItem(
        str(given).strip(),
        str(kind),
        q.strip(),
        tuple(facts),
        source,
        expected if isinstance(expected, str) else "",
    )


def read_answers(path: Path, limit: int | None = None) -> list[AnswerItem]:
    """A first-hour set, checked whole before anything runs: every bad line (not JSON, a
    missing or mistyped field, a line over MAX_ANSWER_LINE_BYTES) is listed with its number
    and the file is refused, so a run never stops half-way over a bad record. The file is read
    line by line, so an overlong line is skipped without being held in memory."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    items: list[AnswerItem] = []
    errors: list[str] = []
    with path.open("rb") as handle:
        number = 0
        while True:
            raw = handle.readline(MAX_ANSWER_LINE_BYTES + 2)  # the line and its "\r\n"
            if not raw:
                break
            number += 1
            if len(raw.rstrip(b"\r\n")) > MAX_ANSWER_LINE_BYTES:
                size = len(raw.rstrip(b"\r\n"))
                while raw and not raw.endswith(b"\n"):  # the rest of the overlong line
                    raw = handle.readline(1 << 20)
                    size += len(raw.rstrip(b"\r\n"))
                errors.append(
                    f"line {number}: {size:,} bytes, over the {MAX_ANSWER_LINE_BYTES:,} a "
                    "message's line may hold"
                )
                continue
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                errors.append(f"line {number}: not UTF-8 ({exc.reason})")
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(f"line {number}: not JSON ({exc.msg})")
                continue
            if not isinstance(record, dict):
                errors.append(f"line {number}: not a JSON object")
                continue
            try:
                items.append(_answer_item(record))
            except ValueError as exc:
                errors.append(f"line {number}: {exc}")
    if errors:
        shown = "\n".join(f"  {e}" for e in errors[:_ERRORS_SHOWN])
        more = len(errors) - _ERRORS_SHOWN
        raise InputError(
            f"{path}: {len(errors)} bad line(s); nothing was evaluated\n{shown}"
            + (f"\n  … and {more} more" if more > 0 else ""),
            hint='one JSON object per line: {"id", "kind": "covered"|"uncovered"|"chatter", '
            '"q", "facts": [["alt", …], …], "source": [paths]} (docs/eval.md)',
        )
    if not items:
        raise InputError(f"{path} holds no messages (JSONL: one JSON object per line)")
    return _unique(path, items)[:limit]


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
