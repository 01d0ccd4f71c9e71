"""Is a message a question or a request at all? The prior Tacit ships for a gate with no fit.

A team's first hour has no labelled messages, so the unfitted gate cannot learn what this chat's
questions look like. This prior is a small logistic regression fitted once, by
bench/fit_request_prior.py, on public chat messages (the BYU Chit-Chat corpus, English, and
ChatterBot's Chinese conversations; MIT and BSD-3-Clause licensed, named in that script). Its
label is the author's own question mark: a message is a question when the person
who wrote it marked it as one. The marks are removed from what the model sees, so it learns
what questions look like without them ("anyone know how to restart the spool", "怎么配置"),
and a message whose author did mark it is a question by that definition.

What the marks cannot teach: a plea for help written as a statement ("please help, the
dispatcher keeps crashing", "求助") carries no question mark, and the Chinese lines are few, so
unmarked Chinese questions ("告警怎么配") score low. A message therefore also counts as a request
when it has a request's written form — the coverage rule's request finder (a wh-word, an
auxiliary or imperative opener, a Chinese question word: core.gate.request.find_request), a
plea for help (_PLEA) or a fault report (_FAULT: an error as a program prints it, pasted into
chat, or a tool said to be broken). The learned score decides the rest: messages with no form of
asking at all, which is where chatter lives ("lol that deploy was wild", "+1", "哈哈哈").

Only the fitted weights ship (core/gate/data/request_prior.json.gz, plain JSON: no pickle);
the data stays with its packages. Features are sparse and binary — character 1–4-grams of the
whole message with its start and end marked, Latin words, word pairs, the first and last words,
a length bucket and a few cues shared by both languages (_CUES) — so scoring is a dictionary
look-up per feature (a fraction of a millisecond), the same function at fit and at run time.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.gate.model import logistic
from core.language.lexicon import WH_WORDS, alternation
from core.language.text import CJK_CHAR
from core.language.words import normalise

WEIGHTS = Path(__file__).parent / "data" / "request_prior.json.gz"
FORMAT = 1
MAX_CHARS = 300  # longer messages are judged on their beginning: that is where asking starts

_MARKS = re.compile(r"[?？¿؟]")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_'’\-]*")
_START, _END = "\x02", "\x03"
_LENGTHS = (1, 2, 3, 5, 8, 13, 21)
_PLEA = re.compile(
    r"\b(help|anyone know|does anyone|can someone|could someone|can anyone|could anyone)\b|"
    r"求助|帮忙|请教|救命|求解"
)
# A fault report is a plea for help: in a team's chat an error line pasted on its own
# ("KilnAdmissionError: pending job limit reached (50)", "forge: error: token expired") or a
# tool said to be broken asks what to do about it, and chat corpora have no such lines for the
# learned score to know them by (it scores them as chatter). The error as a program prints it —
# a word ending in "error" or "exception" followed by ":", "(" or "[" — not the word "error" in
# a sentence ("that error was wild"). Whether the KB covers it is still the coverage rule's.
_FAULT = re.compile(
    r"\b[a-z0-9_.]*(error|exception)\s*[:(\[]|\berrno\b|traceback \(most recent call last\)|"
    r"\b(is|are|seems|keeps)\s+(broken|crashing|failing)\b|报错|出错了"
)

# A few cues shared by both languages. Chinese chat lines are scarce in licence-clean public
# data and English ones plentiful, so a cue that fires for "how …" and for "怎么 …" alike
# carries what the English messages teach over to Chinese. Only the cues are written here:
# their weights, like every other feature's, are fitted.
_CUES = {
    "wh_start": re.compile(
        r"^(what|what's|whats|who|who's|whom|whose|which|where|where's|when|why|how|how's)\b"
    ),
    "wh_any": re.compile(
        rf"\b({alternation(WH_WORDS)})\b|"
        r"怎么|怎样|如何|为什么|为啥|什么|哪|谁|多少|几[个点时天]"
    ),
    "aux_start": re.compile(
        r"^(is|are|was|were|do|does|did|can|could|should|would|will|has|have|any)\b|"
        r"是不是|能不能|可不可以|有没有|是否|能否|会不会|要不要"
    ),
    "particle_end": re.compile(r"(吗|呢|么|嘛|吧)[\s。.!！~～]*$"),
    "help": re.compile(
        r"\b(help|anyone|anybody|someone|somebody|please|pls|plz)\b|请问|求助|帮忙|请教|求大佬"
    ),
    "ask_start": re.compile(
        r"^(tell|explain|show|give|list|describe|help|find|recommend)\b|^(请|帮我|告诉我|求)"
    ),
}


def marked(text: str) -> bool:
    """The author marked the message as a question."""
    return _MARKS.search(text) is not None


def asks(text: str) -> bool:
    """The message has a request's written form: an asking clause, a plea for help or a fault
    report."""
    from core.gate.request import find_request  # the one request finder of the gate

    folded = normalise(text)
    if _PLEA.search(folded) is not None or _FAULT.search(folded) is not None:
        return True
    return find_request(text[:MAX_CHARS]).cue


def prepared(text: str) -> str:
    """What the model reads: NFKC, case-folded, question marks removed, spaces collapsed."""
    folded = normalise(text)
    return _SPACE.sub(" ", _MARKS.sub(" ", folded)).strip()[:MAX_CHARS]


def features(text: str) -> list[str]:
    """The message's distinct features (the fit and the scorer both call this)."""
    seen = prepared(text)
    found: set[str] = set()
    padded = f"{_START}{seen}{_END}"
    for n in range(1, 5):
        found.update(padded[i : i + n] for i in range(len(padded) - n + 1))
    words = _WORD.findall(seen)
    found.update(f"w:{w}" for w in words)
    found.update(f"b:{a} {b}" for a, b in itertools.pairwise(words))
    if words:
        found.add(f"f:{words[0]}")
        found.add(f"l:{words[-1]}")
    if len(words) > 1:
        found.add(f"f2:{words[0]} {words[1]}")
    found.update(f"cue:{name}" for name, cue in _CUES.items() if cue.search(seen))
    size = len(words) + len(CJK_CHAR.findall(seen)) // 2
    found.add(f"n:{next((b for b in _LENGTHS if size <= b), 'more')}")
    return sorted(found)


@dataclass(frozen=True, slots=True)
class PriorScore:
    probability: float  # P(question or request) from the words alone, marks removed
    marked: bool  # the author put a question mark on it
    threshold: float
    asks: bool = False  # it has a request's written form (see the module's docstring)

    @property
    def is_request(self) -> bool:
        return self.marked or self.asks or self.probability >= self.threshold

    def describe(self) -> str:
        learned = f"prior P(request) {self.probability:.2f}"
        if self.marked:
            return f"marked as a question ({learned})"
        if self.asks and self.probability < self.threshold:
            return f"asks in so many words ({learned} < {self.threshold:.2f})"
        relation = "≥" if self.is_request else "<"
        return f"{learned} {relation} {self.threshold:.2f}"


@dataclass(frozen=True, slots=True)
class RequestPrior:
    weights: dict[str, float]
    intercept: float
    threshold: float
    meta: dict[str, Any]

    def probability(self, text: str) -> float:
        z = self.intercept + sum(self.weights.get(f, 0.0) for f in features(text))
        return float(logistic(z))

    def score(self, text: str, *, threshold: float | None = None) -> PriorScore:
        cut = self.threshold if threshold is None else threshold
        return PriorScore(self.probability(text), marked(text), cut, asks(text))

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **self.meta,
            "intercept": self.intercept,
            "threshold": self.threshold,
            "weights": self.weights,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestPrior:
        if data.get("format") != FORMAT:
            raise ValueError(f"request prior format {data.get('format')!r}, expected {FORMAT}")
        meta = {k: v for k, v in data.items() if k not in ("intercept", "threshold", "weights")}
        return cls(
            weights={str(k): float(v) for k, v in data["weights"].items()},
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            meta=meta,
        )


def save_prior(prior: RequestPrior, path: Path = WEIGHTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(prior.as_json(), ensure_ascii=False, separators=(",", ":"))
    # mtime=0: the same fit gives the same bytes
    path.write_bytes(gzip.compress(body.encode("utf-8"), mtime=0))


def read_prior(path: Path) -> RequestPrior:
    return RequestPrior.from_json(json.loads(gzip.decompress(path.read_bytes())))


@lru_cache(maxsize=1)
def shipped_prior() -> RequestPrior:
    """The prior shipped with Tacit, read once per process (OSError or ValueError when the
    package data is missing or damaged: the gate then says so in every decision's reason)."""
    return read_prior(WEIGHTS)


__all__ = [
    "WEIGHTS",
    "PriorScore",
    "RequestPrior",
    "asks",
    "features",
    "marked",
    "prepared",
    "read_prior",
    "save_prior",
    "shipped_prior",
]
