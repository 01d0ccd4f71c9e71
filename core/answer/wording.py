"""Fixed user-facing sentences (not prompts): what Tacit says when it will not, or cannot fully,
answer — and the limit on what it will read as a question."""

from __future__ import annotations

MAX_QUESTION_CHARS = 4000

NOT_COVERED = {
    "en": "The knowledge base does not cover this.",
    "zh": "知识库里没有这个问题的答案。",
}
CUT_SHORT = {
    "en": "(The answer was cut short: the language model stopped responding.)",
    "zh": "（回答不完整：语言模型中途失去响应。）",
}
