"""One reader for what a chat model writes back: every parser of model output goes through here.

Real models (Qwen2.5-7B, Llama-3-8B, DeepSeek-R1-style reasoners, GPT-4o-mini) wrap what was
asked for in things nobody asked for:

- reasoning blocks — `<think>…</think>` (also `<thinking>`, `<reasoning>`, `<thought>`, Kimi's
  `◁think▷…◁/think▷`), sometimes never closed (the token limit fell inside), sometimes with
  the opening tag in the chat template so only `</think>` shows. A reasoning block often holds
  a draft of the answer; nothing inside one is ever read (strip_reasoning).
- JSON inside ```json fences, after prose, several objects (a draft, then the final one),
  trailing commas, single quotes, Python's True/False/None, comments, full-width punctuation
  (`｛“key”：1，｝`). Repaired locally — the `json_repair` library, only for an object whose
  braces balance: a truncated object is not guessed at — before anyone pays for a repair call;
  the LAST object that fits the schema wins (parse_json_reply).
- yes/no as "Yes.", "**No**", "是/否", "Answer: no", after a paragraph of reasoning, or the
  options echoed back ("是否", "yes/no"), which says neither (read_verdict).
- scores on a scale of the model's own ("4/5", "8/10", "80%"), read against the scale the
  prompt names (read_score).
- refusals ("I cannot help with that.", "抱歉，我无法…") and empty replies, which are not
  answers to anything (is_refusal).

Pure: no client library, no I/O; the stream filter works on any async iterator of text.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

SchemaT = TypeVar("SchemaT", bound=BaseModel)


class UnreadableReply(ValueError):
    """A reply that holds nothing of the asked shape; the message says why (a repair prompt
    quotes it, so it is written for the model to act on)."""


# --- reasoning blocks ---------------------------------------------------------------------------

_TAG_NAMES = r"think|thinking|reasoning|thought|reflection"
_OPEN = re.compile(rf"<\s*(?:{_TAG_NAMES})\s*>|◁think▷", re.IGNORECASE)
_CLOSE = re.compile(rf"<\s*/\s*(?:{_TAG_NAMES})\s*>|◁/think▷", re.IGNORECASE)
# Longest tag text, for how much of a stream's tail may be the start of a tag.
_MAX_TAG = len("< / reflection >")


# Chat-template tokens a server sometimes lets through at the end of a reply.
_SPECIAL_TOKENS = re.compile(
    r"<\|(?:im_end|im_start|eot_id|end_of_text|endoftext|end|eos)\|>|</s>$", re.IGNORECASE
)


def strip_reasoning(text: str) -> str:
    """`text` without its reasoning blocks, stripped.

    A closed block goes; an unclosed one takes the rest of the reply with it (the answer never
    came); a closing tag without an opening one (the chat template opened the block) takes
    everything before it. Leaked chat-template tokens (`<|im_end|>`, `<|eot_id|>`) go too.
    """
    out: list[str] = []
    position = 0
    while True:
        opened = _OPEN.search(text, position)
        closed = _CLOSE.search(text, position)
        if closed is not None and (opened is None or closed.start() < opened.start()):
            # An orphan closing tag: what came before it was reasoning.
            out.clear()
            position = closed.end()
            continue
        if opened is None:
            out.append(text[position:])
            break
        out.append(text[position : opened.start()])
        end = _CLOSE.search(text, opened.end())
        if end is None:
            break
        position = end.end()
    return _SPECIAL_TOKENS.sub("", "".join(out).strip()).strip()


def reasoning_only(text: str) -> bool:
    """Whether a non-empty reply held nothing but reasoning (a block cut by the token limit)."""
    return bool(text.strip()) and not strip_reasoning(text) and bool(_OPEN.search(text))


async def without_reasoning(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """A streamed reply with its reasoning blocks removed, as it arrives.

    Text is held back only while it may be the start of a tag ("<thi…"), or while inside a
    block; whitespace at the start and right after a block is dropped. An unclosed block
    swallows the rest of the stream. (A closing tag without an opening one cannot be handled
    in a stream: the reasoning before it has been shown by then. strip_reasoning handles it in
    the full text.)
    """
    buffer = ""
    inside = False
    started = False  # something visible has been yielded
    async for chunk in chunks:
        buffer += chunk
        while buffer:
            if inside:
                closed = _CLOSE.search(buffer)
                if closed is None:
                    buffer = buffer[-_MAX_TAG:]
                    break
                buffer = buffer[closed.end() :]
                inside = False
                if not started:
                    buffer = buffer.lstrip()
                continue
            if not started:
                buffer = buffer.lstrip()
                if not buffer:
                    break
            opened = _OPEN.search(buffer)
            if opened is not None:
                visible = buffer[: opened.start()]
                if visible:
                    started = True
                    yield visible
                buffer = buffer[opened.end() :]
                inside = True
                continue
            keep = _partial_tag_suffix(buffer)
            visible = buffer[: len(buffer) - keep]
            if visible:
                started = True
                yield visible
            buffer = buffer[len(buffer) - keep :]
            break
    if not inside and buffer:
        yield buffer


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest tail of `text` that could begin an opening tag."""
    start = max(0, len(text) - _MAX_TAG)
    for index in range(start, len(text)):
        tail = text[index:]
        if tail[0] not in "<◁":
            continue
        if _could_open(tail):
            return len(text) - index
    return 0


_TAG_WORDS = ("think", "thinking", "reasoning", "thought", "reflection")


def _could_open(tail: str) -> bool:
    if tail.startswith("◁"):
        return "◁think▷".startswith(tail)
    word = tail[1:].lstrip().lower()
    return any(w.startswith(word) or word.startswith(w) for w in _TAG_WORDS) and ">" not in tail


# --- JSON ---------------------------------------------------------------------------------------

_OPENERS = {"{": "}", "[": "]", "｛": "｝", "［": "］"}
_STRING_QUOTES = {'"': '"', "“": "”", "'": "'"}


def parse_json_reply(text: str, schema: type[SchemaT]) -> tuple[SchemaT, Any]:
    """The last JSON value in `text` (outside reasoning) that validates against `schema`, and
    that value; UnreadableReply saying what was wrong when none does.

    Values are tried as written first, then locally repaired (only when their brackets close).
    Only top-level values count: an object nested in another is part of it, not a candidate.
    """
    visible = strip_reasoning(text)
    if not visible:
        if reasoning_only(text):
            raise UnreadableReply(
                "the reply was only reasoning: the <think> block never closed and no JSON "
                "followed it"
            )
        raise UnreadableReply("the reply was empty")
    # An object none of whose keys the schema knows is not an answer to it, even when every
    # field has a default ({"source": 1} is no sub-answer).
    fields = set(schema.model_fields)
    candidates = [
        v
        for v in json_values(visible)
        if not isinstance(v, dict) or not v or not fields or fields & set(v)
    ]
    last_error: str | None = None
    for value in reversed(candidates):
        try:
            return schema.model_validate(value), value
        except ValidationError as error:
            if last_error is None:
                last_error = _describe(error)
    if last_error is not None:
        raise UnreadableReply(f"the JSON does not match the schema ({last_error})")
    raise UnreadableReply("the reply contains no JSON object")


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array in `text`, in order, repaired where needed.

    `text` should already be without reasoning (see strip_reasoning).
    """
    values: list[Any] = []
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict | list):
        return [whole]
    position = 0
    while position < len(text):
        start = _next_opener(text, position)
        if start is None:
            break
        end = _balanced_end(text, start)
        if end is None:  # never closes: truncated, or a stray brace in prose
            position = start + 1
            continue
        value = _load(text[start:end], strict_only=not _looks_like_json(text[start:end]))
        if value is None:
            position = start + 1  # not JSON; an object may start inside it ("{see {…}}")
            continue
        values.append(value)
        position = end
    return values


def _next_opener(text: str, position: int) -> int | None:
    best: int | None = None
    for opener in _OPENERS:
        found = text.find(opener, position)
        if found != -1 and (best is None or found < best):
            best = found
    return best


def _balanced_end(text: str, start: int) -> int | None:
    """Index after the bracket closing the one at `start`, skipping strings; None if none."""
    depth = 0
    quote: str | None = None
    index = start
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote or (quote == "”" and char == '"'):
                quote = None
        elif char in _STRING_QUOTES and _opens_string(text, index):
            quote = _STRING_QUOTES[char]
        elif char in "{[｛［":
            depth += 1
        elif char in "}]｝］":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _opens_string(text: str, index: int) -> bool:
    """A quote opens a string unless it is an apostrophe inside a word ("it's")."""
    if text[index] != "'":
        return True
    before = text[index - 1] if index else " "
    return not before.isalnum()


def _looks_like_json(fragment: str) -> bool:
    """Worth repairing: a quoted key and a colon ({name} or [1] in prose are not JSON)."""
    return any(q in fragment for q in "\"'“") and any(c in fragment for c in ":：")


def _load(fragment: str, *, strict_only: bool = False) -> Any:
    try:
        value: Any = json.loads(fragment)
    except ValueError:
        if strict_only:
            return None
        try:
            value = json_repair.loads(_ascii_structure(fragment))
        except (ValueError, RecursionError):
            return None
    if isinstance(value, dict) and value:
        return value
    if isinstance(value, list) and value:
        return value
    return None


_FULL_WIDTH = {"｛": "{", "｝": "}", "［": "[", "］": "]", "：": ":", "，": ","}


def _ascii_structure(fragment: str) -> str:
    """Full-width brackets, colons, commas and curly quotes that structure the JSON made ASCII;
    the same characters inside strings (Chinese text) are left alone."""
    out: list[str] = []
    quote: str | None = None
    index = 0
    while index < len(fragment):
        char = fragment[index]
        if quote is not None:
            if char == "\\":
                out.append(fragment[index : index + 2])
                index += 2
                continue
            if char == quote or (quote == "”" and char == '"'):
                out.append('"' if quote == "”" else char)
                quote = None
            elif char == '"' and quote != '"':
                out.append('\\"')
            else:
                out.append(char)
        elif char in _STRING_QUOTES and _opens_string(fragment, index):
            quote = _STRING_QUOTES[char]
            out.append('"' if char == "“" else char)
        else:
            out.append(_FULL_WIDTH.get(char, char))
        index += 1
    return "".join(out)


def _describe(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in error.errors()[:10]
    )


# --- verdicts -----------------------------------------------------------------------------------

# Leading labels models put before the verdict ("Answer: yes", "答：是", "**Verdict**: no").
_LABEL = re.compile(
    r"^(?:(?:so|thus|therefore|hence|overall|in conclusion),?\s*)?(?:the\s+)?(?:my\s+)?"
    r"(?:final\s+answer|answer|verdict|result|judg(?:e)?ment|decision|output|reply|conclusion)\b"
    r"(?:\s+is)?\s*[:：]?\s*|^(?:最终答案|答案|回答|答|结论|判断|结果|输出)(?:是|为)?\s*[:：]?\s*"
)
_DECORATION = re.compile(r"[*_`#>\"'“”‘’「」『』【】\[\]()（）]")
# The options echoed back: a verdict that is not one.
_ECHO = re.compile(
    r"^(?:yes\s*(?:/|or|\||,)\s*no|no\s*(?:/|or|\||,)\s*yes|y\s*/\s*n|"
    r"是\s*(?:/|或|还是|或者|\||、)?\s*否|否\s*(?:/|或|还是|或者|\||、)?\s*是)(?![a-z])"
)
_EN_YES = frozenset(
    (
        *("yes", "yeah", "yep", "true", "supported", "support", "supports", "correct"),
        *("sufficient", "enough", "pass", "passed", "ok", "okay", "affirmative"),
    )
)
_EN_NO = frozenset(
    (
        *("no", "nope", "false", "not", "unsupported", "insufficient", "cannot", "can't"),
        *("cant", "incorrect", "fail", "failed", "negative", "none"),
    )
)
# Chinese verdicts start the reply; negatives first, since most contain a positive ("不能" ⊃ "能").
_ZH_NO = ("不能", "不可以", "不可", "不支持", "不足以", "不足", "不够", "不是", "不对", "不正确",
          "不需要", "无法", "没有", "还没有", "否", "不")  # fmt: skip
_ZH_YES = ("可以", "能够", "能", "支持", "足够", "充分", "是", "对", "正确", "有", "还有", "需要")
_EN_WORD = re.compile(r"[a-z][a-z']*")
# Anywhere in a longer line, only these are unambiguous.
_EN_STRICT = re.compile(r"\b(yes|no|true|false)\b")
_ZH_STRICT = re.compile(
    r"(?:答案|结论|判断|回答|结果)(?:是|为)?\s*[:：]?\s*(不能|不可以|不支持|不足|否|是|能|可以|支持|足够)"
)


def read_verdict(text: str) -> bool | None:
    """True for yes, False for no, None when the reply says neither, says both, or echoes the
    options back.

    The first line decides when it starts with a verdict (a short reply, or "Yes, because…");
    otherwise the last line that holds one (a reasoning model concludes at the end). A JSON
    object's verdict-like field counts too ({"supported": true}).
    """
    visible = unicodedata.normalize("NFKC", strip_reasoning(text)).strip().lower()
    if not visible:
        return None
    if visible.startswith(("{", "```")):
        from_json = _json_verdict(visible)
        if from_json is not None:
            return from_json
    lines = [line for line in (_bare(raw) for raw in visible.splitlines()) if line]
    if not lines:
        return None
    first = _line_verdict(lines[0], leading_only=True)
    if first is not None or _ECHO.match(lines[0]):
        return first
    for line in reversed(lines):
        verdict = _line_verdict(line, leading_only=False)
        if verdict is not None:
            return verdict
    return None


def _bare(line: str) -> str:
    normal = _DECORATION.sub("", line).strip()
    for _ in range(3):  # labels can nest: "**Answer**: Verdict: yes"
        stripped = _LABEL.sub("", normal, count=1).strip()
        if stripped == normal:
            break
        normal = stripped
    return normal.lstrip("-•:：. ").strip()


def _line_verdict(line: str, *, leading_only: bool) -> bool | None:
    if _ECHO.match(line):
        return None
    for word in _ZH_NO:
        if line.startswith(word):
            return False
    for word in _ZH_YES:
        if line.startswith(word):
            return True
    first = _EN_WORD.match(line)
    if first:
        word = first.group(0)
        if word in _EN_YES:
            return True
        if word in _EN_NO:
            return False
        if word in ("y", "n") and len(line.rstrip(".!")) == 1:
            return word == "y"
    if leading_only:
        return None
    zh = _ZH_STRICT.findall(line)
    if zh:
        return not zh[-1].startswith(("不", "否"))
    found = {m.group(1) for m in _EN_STRICT.finditer(line)}
    positive = bool(found & {"yes", "true"})
    negative = bool(found & {"no", "false"})
    if positive != negative:
        return positive
    return None


def _json_verdict(text: str) -> bool | None:
    for value in reversed(json_values(text)):
        if not isinstance(value, dict):
            continue
        for key in ("verdict", "answer", "supported", "support", "passed", "result", "ok"):
            field = value.get(key)
            if isinstance(field, bool):
                return field
            if isinstance(field, str):
                return read_verdict(field)
    return None


# --- scores -------------------------------------------------------------------------------------

_NUMBER = r"-?\d+(?:\.\d+)?"
_FRACTION = re.compile(rf"({_NUMBER})\s*(?:/|out\s+of|of)\s*({_NUMBER})", re.IGNORECASE)
_FULL_MARKS = re.compile(rf"满分\s*({_NUMBER})")
_PERCENT = re.compile(rf"({_NUMBER})\s*(?:%|percent)", re.IGNORECASE)
_BARE = re.compile(_NUMBER)


def read_score(value: Any, scale: float = 1.0) -> float:
    """A score as a number in [0, 1], read on the scale the prompt names (0..`scale`).

    "4/5", "8 out of 10", "4分（满分5分）" and "80%" say their own scale; a bare number is on
    the prompt's. A bare number off that scale (a 1–5 "4" when the prompt names 0–1) cannot be
    read — 4 of what? — and raises ValueError, which the JSON repair turn quotes to the model.
    """
    if scale <= 0:
        raise ValueError("the scale must be positive")
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return _on_scale(float(value), scale, str(value))
    if not isinstance(value, str):
        raise ValueError(f"no score in {value!r}")
    text = unicodedata.normalize("NFKC", value).strip()
    fraction = _FRACTION.search(text)
    if fraction is not None:
        denominator = float(fraction.group(2))
        if denominator > 0:
            return _on_scale(float(fraction.group(1)), denominator, value)
    full = _FULL_MARKS.search(text)
    numbers = _BARE.findall(text)
    if full is not None and numbers:
        others = [n for n in numbers if n != full.group(1)] or numbers
        return _on_scale(float(others[0]), float(full.group(1)), value)
    percent = _PERCENT.search(text)
    if percent is not None:
        return _on_scale(float(percent.group(1)), 100.0, value)
    if not numbers:
        raise ValueError(f"no score in {value!r}")
    return _on_scale(float(numbers[0]), scale, value)


def _on_scale(number: float, scale: float, written: str) -> float:
    if math.isnan(number) or math.isinf(number):
        raise ValueError("the score is not a number")
    if number < 0 or number > scale + 1e-9:
        top = f"{scale:g}"
        raise ValueError(
            f"{written!r} is outside the scale 0 to {top}: give the score as a number "
            f"from 0 to {top}"
        )
    return number / scale


# --- refusals and plain-text replies ----------------------------------------------------------

_REFUSAL = re.compile(
    r"^(?:i\s*(?:'m|am)\s+(?:sorry|afraid|unable|not\s+able)|sorry\b|i\s+apologi[sz]e|"
    r"i\s+(?:cannot|can\s*not|can't|won't|will\s+not|am\s+not\s+able\s+to|do\s+not\s+have|"
    r"don't\s+have)\b|unfortunately,?\s+i\b|as\s+an\s+ai\b|i'?m\s+an\s+ai\b|"
    r"抱歉|对不起|很抱歉|不好意思|我无法|我不能|我没法|我没有办法|无法回答|无法提供|作为(?:一个)?\s*ai)"
)


def is_refusal(text: str) -> bool:
    """Whether a reply declines instead of doing what was asked — or says nothing at all."""
    visible = unicodedata.normalize("NFKC", strip_reasoning(text)).strip()
    if not visible:
        return True
    bare = visible.replace("’", "'").lstrip("*_#>\"'“”「」【 \t").lower()
    return bool(_REFUSAL.match(bare))


_FENCE_LINE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


# A model's politeness around an answer: an opening line that acknowledges the request ("Sure,
# here is what could be going on.") and a closing one that offers more ("Let me know if …").
# Neither cites a source nor holds a fact, and a chat would show them as part of the answer.
_PREAMBLE = re.compile(
    r"\A\s*(?:sure|certainly|of course|absolutely|great question|good question|happy to help"
    r"|好的|当然|没问题)(?![a-z])[^\n\[]{0,160}(?:\n|\Z)",
    re.IGNORECASE,
)
_SIGN_OFF = re.compile(
    r"(?:\A|\n)\s*(?:let me know|hope (?:this|that) helps|i hope this|feel free"
    r"|如有(?:其他|任何)?(?:问题|疑问)|希望(?:这些|以上)?(?:内容)?(?:能)?对你有(?:所)?帮助)"
    r"[^\n\[]{0,200}\s*\Z",
    re.IGNORECASE,
)


_POLITE_OPENING = re.compile(
    r"\A\s*(?:sure|certainly|of course|absolutely|great question|good question|happy to help"
    r"|好的|当然|没问题)(?![a-z])",
    re.IGNORECASE,
)


def opens_politely(text: str) -> bool:
    """Whether the text starts with a word an acknowledging first line starts with."""
    return bool(_POLITE_OPENING.match(text))


def without_preamble(text: str) -> str:
    """The text without an acknowledging first line (one that cites nothing)."""
    return _PREAMBLE.sub("", text, count=1)


def without_pleasantries(text: str) -> str:
    """An answer without the model's acknowledging first line and offering last line (lines
    that cite nothing); the text as it was when nothing else would remain."""
    trimmed = _SIGN_OFF.sub("", _PREAMBLE.sub("", text, count=1), count=1).strip()
    return trimmed if trimmed else text


def clean_text_reply(text: str) -> str:
    """A plain-text reply without reasoning blocks and code-fence lines, stripped."""
    return _FENCE_LINE.sub("", strip_reasoning(text)).strip()


__all__ = [
    "UnreadableReply",
    "clean_text_reply",
    "is_refusal",
    "json_values",
    "opens_politely",
    "parse_json_reply",
    "read_score",
    "read_verdict",
    "reasoning_only",
    "strip_reasoning",
    "without_pleasantries",
    "without_preamble",
    "without_reasoning",
]
