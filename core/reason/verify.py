"""HuixiangDou2's retrieval verifier (§7, Algorithm 4): pre-check and post-check.

- precheck: before answering, does the context support an answer? (the default; the paper
  found checking the arguments beats checking the result, 0.75 vs 0.72)
- postcheck: after answering, does the answer follow from the context?

Both are one short chat call whose reply is read by parse_verdict. A reply that is neither yes
nor no fails the check: an unclear verifier must not let an unsupported answer through, and
failing only means the pipeline falls through to dual-level retrieval. An LLM failure is raised
(LLMError) for the caller's stage handling to record.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import prompts
from core.ports import LLM
from core.text import Language

# A verdict is one word; room for "Yes, the context states…" — parse_verdict reads the start.
VERDICT_MAX_TOKENS = 32

# Leading labels models put before the verdict ("Answer: yes", "答：是", "**Verdict**: no").
_LABEL = re.compile(
    r"^(?:final\s+answer|answer|verdict|result|judg(?:e)?ment|decision|output|reply|"
    r"最终答案|答案|回答|答|结论|判断|结果|输出)\s*[:：]\s*"
)
_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)  # reasoning models' preamble
_DECORATION = re.compile(r"[*_`#>\"'“”‘’「」『』【】\[\]()（）]")

_EN_YES = frozenset(
    [
        "yes",
        "yeah",
        "yep",
        "true",
        "supported",
        "support",
        "supports",
        "correct",
        "sufficient",
        "enough",
        "pass",
        "passed",
        "ok",
        "okay",
        "affirmative",
    ]
)
_EN_NO = frozenset(
    [
        "no",
        "nope",
        "false",
        "not",
        "unsupported",
        "insufficient",
        "cannot",
        "can't",
        "cant",
        "incorrect",
        "fail",
        "failed",
        "negative",
        "none",
    ]
)
# Chinese verdicts start the reply; negatives first, since most contain a positive ("不能" ⊃ "能").
_ZH_NO = ("不能", "不可以", "不可", "不支持", "不足以", "不足", "不够", "不是", "不对", "不正确",
          "无法", "没有", "否", "不")  # fmt: skip
_ZH_YES = ("可以", "能够", "能", "支持", "足够", "充分", "是", "对", "正确", "有")
_EN_WORD = re.compile(r"[a-z][a-z']*")
# Anywhere in a longer reply, only these are unambiguous.
_EN_STRICT = re.compile(r"\b(yes|no|true|false)\b")


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    raw: str  # the model's reply, for the trace


def parse_verdict(text: str) -> bool | None:
    """True for yes, False for no, None when the reply says neither (or both).

    Tolerates case, markdown ("**No**"), punctuation ("Yes."), labels ("答：是",
    "Answer: no"), trailing explanations ("Yes, the context lists…"), Chinese and English, and
    a JSON object with a verdict-like field ({"supported": true}).
    """
    normal = unicodedata.normalize("NFKC", _THINKING.sub("", text)).strip().lower()
    if not normal:
        return None
    if normal.startswith("{"):
        from_json = _json_verdict(normal)
        if from_json is not None:
            return from_json
    normal = _DECORATION.sub("", normal).strip()
    for _ in range(3):  # labels can nest: "**Answer**: Verdict: yes"
        stripped = _LABEL.sub("", normal).strip()
        if stripped == normal:
            break
        normal = stripped
    normal = normal.lstrip("-•:：. ").strip()
    if not normal:
        return None
    for word in _ZH_NO:
        if normal.startswith(word):
            return False
    for word in _ZH_YES:
        if normal.startswith(word):
            return True
    first = _EN_WORD.match(normal)
    if first:
        word = first.group(0)
        if word in _EN_YES:
            return True
        if word in _EN_NO:
            return False
        if word in ("y", "n") and len(normal.rstrip(".!")) == 1:
            return word == "y"
    # A reply that explains first ("Based on the context, yes."): only unambiguous words.
    found = {m.group(1) for m in _EN_STRICT.finditer(normal)}
    positive = bool(found & {"yes", "true"})
    negative = bool(found & {"no", "false"})
    if positive != negative:
        return positive
    return None


def _json_verdict(text: str) -> bool | None:
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    for key in ("verdict", "answer", "supported", "support", "passed", "result", "ok"):
        field = value.get(key)
        if isinstance(field, bool):
            return field
        if isinstance(field, str):
            return parse_verdict(field)
    return None


async def precheck(llm: LLM, question: str, context_text: str, language: Language) -> Verdict:
    """Does `context_text` support an answer to `question`? (before answering)"""
    prompt = prompts.render(
        "precheck",
        language,
        context=context_text,
        question=json.dumps(question, ensure_ascii=False),
    )
    reply = await llm.chat(prompt, max_tokens=VERDICT_MAX_TOKENS)
    return Verdict(parse_verdict(reply.text) is True, reply.text)


async def postcheck(
    llm: LLM, question: str, context_text: str, answer: str, language: Language
) -> Verdict:
    """Does `answer` follow from `context_text` and address `question`? (after answering)"""
    prompt = prompts.render(
        "postcheck",
        language,
        context=context_text,
        question=json.dumps(question, ensure_ascii=False),
        answer=json.dumps(answer, ensure_ascii=False),
    )
    reply = await llm.chat(prompt, max_tokens=VERDICT_MAX_TOKENS)
    return Verdict(parse_verdict(reply.text) is True, reply.text)


__all__ = ["Verdict", "parse_verdict", "postcheck", "precheck"]
