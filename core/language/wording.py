"""Fixed user-facing sentences (not prompts), en/zh, in one place: what Tacit says when it will
not, or cannot fully, answer (the gate, the answerer and the chat alike), what the chat shows
while it works (one line per stage), and the limit on what it will read as a question."""

from __future__ import annotations

from typing import Literal

MAX_QUESTION_CHARS = 4000

# What a user is told when the knowledge base does not cover a question, whichever part found
# it: the gate (core.gate), the answerer (core.answer.pipeline) or the chat assistant (bot).
NOT_COVERED = {
    "en": "Sorry, I can only answer questions that my knowledge base covers, and this one "
    "doesn't seem to be among them.",
    "zh": "抱歉，我只能回答知识库覆盖的问题，这个问题似乎不在其中。",
}
# What an addressed message is told when its knowledge base has no documents at all (none
# indexed yet, or a channel bound to a KB nobody indexed): "not covered" would blame the
# question. {kb} is the KB's name, or NAME when it is not a valid one.
KB_EMPTY = {
    "en": "My knowledge base {kb} has no documents yet, so I have nothing to answer from. "
    "An admin can add them: `tacit index PATH --kb {kb}`",
    "zh": "知识库 {kb} 还没有文档，我暂时无法回答。"
    "管理员可以这样添加：`tacit index PATH --kb {kb}`",
}
# The polite decline a refused message gets when the bot was addressed (overheard messages
# that are refused get silence instead): not a question, or a topic it does not answer.
DECLINE_NOT_A_QUESTION = {
    "en": "Hi! I answer technical questions about the documents I know. What would you like "
    "to ask?",
    "zh": "你好！我负责回答知识库文档相关的技术问题，请问有什么想问的？",
}
DECLINE_UNSAFE = {
    "en": "Sorry, I can't help with that topic.",
    "zh": "抱歉，这个话题我无法回答。",
}
# The chat's own replies: too many questions at once, or an answer that failed.
SLOW_DOWN = {
    "en": "I'm getting more questions than I can answer right now; please ask again in a minute.",
    "zh": "现在提问太多了，请一分钟后再问。",
}
FAILED = {
    "en": "Sorry, something went wrong while answering; please try again later.",
    "zh": "抱歉，回答时出错了，请稍后再试。",
}
CUT_SHORT = {
    "en": "(The answer was cut short: the language model stopped responding.)",
    "zh": "（回答不完整：语言模型中途失去响应。）",
}
# The first line of a no-model answer to a Chinese question from an English section
# (core.answer.shaped): what follows and where it is from, not a translation of it.
SECTION_IN_ENGLISH = {
    "zh": "以下是英文文档 {section} 中的相关内容：",
}
# A language's name as a prompt in each language writes it (the keywords prompt names the
# KB's language when a question is in another).
LANGUAGE_NAME: dict[str, dict[str, str]] = {
    "en": {"en": "English", "zh": "Chinese"},
    "zh": {"en": "英文", "zh": "中文"},
}
Stage = Literal["checking", "planning", "answering", "widening", "fallback"]
# What the chat shows while a stage runs ("Thinking…" with the stage's name).
STAGE_STATUS: dict[Stage, dict[str, str]] = {
    "checking": {"en": "checking the knowledge base…", "zh": "正在检查知识库…"},
    "planning": {"en": "planning…", "zh": "正在规划解答步骤…"},
    "answering": {"en": "writing the answer…", "zh": "正在撰写回答…"},
    "widening": {
        "en": "looking further in the knowledge base (round {round})…",
        "zh": "正在知识库中进一步查找（第 {round} 轮）…",
    },
    "fallback": {
        "en": "the language model failed; answering from the evidence…",
        "zh": "语言模型出错，改为直接引用资料回答…",
    },
}
