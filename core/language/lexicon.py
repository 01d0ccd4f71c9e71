"""Tacit's word lists, in one place: every closed class of words a rule or a signal reads.

A word list here is an input to a signal (what a request opens with, what frames a question,
what a question word asks for), never a verdict on one message. Each class is written once and
every reader derives its patterns from it, so two readers of "a question word" cannot disagree:
the gate's request finder (core.gate.request), a message's terms (core.language.terms), the
planner's test for a part that asks (core.reason.needs_plan), a thread's first message as a
question (core.thread_qa), retrieval's keywords and names (core.retrieve), and the key phrases
of the index (core.language.phrases).

Two classes stay apart on purpose, because they are different words: the verbs a request to
the bot opens with ("write", "translate": it asks for something to be produced) and the verbs a
document's instruction opens with ("Run …", "Set …": not part of the term that follows); and
the auxiliaries that open a yes-or-no question (the gate's, with "is") and the modal
auxiliaries a subject follows (retrieval's, without "be": "Is the alert threshold …" is
followed by a noun phrase).

The fitted request prior (core.gate.prior) and the fitted gate's cues (core.gate.features)
keep their own patterns where they differ from these lists: their weights were fitted on those
exact patterns, and a changed pattern would be read with weights fitted on another (the prior's
"any wh-word" cue is WH_WORDS, the same pattern).
"""

from __future__ import annotations


def words(text: str) -> frozenset[str]:
    """A word list written as text, one space between words."""
    return frozenset(text.split())


def alternation(choices: frozenset[str] | tuple[str, ...]) -> str:
    """A regex alternation of literal words, the longest first (so 为什么 wins over 什么)."""
    return "|".join(sorted(choices, key=lambda w: (-len(w), w)))


# --- how common a word is --------------------------------------------------------------------

# Zipf frequency (wordfreq's log scale) above which a word says nothing about a topic (≈ once in
# 300k words): never looked up.
STOP_ZIPF = 5.5
# Above this a word only frames a question or joins a phrase (what 6.4, is, the 7.7, of 7.4,
# 怎么, 的): a request of such words has no topic of its own, and a subject or predicate is
# matched on its other words. "why" 5.9, "own" 5.7 and "owner" 4.8 are under it.
FUNCTION_ZIPF = 6.0

# --- what a question opens with ---------------------------------------------------------------

WH_WORDS = words("what who whom whose which where when why how")
# The auxiliaries that open a yes-or-no question (and "any", "anyone": "any idea?").
AUXILIARIES = words(
    "is are was were am can could should would will do does did may might shall has have any anyone"
)
# The modal auxiliaries after which a question's subject comes, then its verb ("does
# lumen-gateway listen on", "can loom-ingest scale to"); no form of "be".
MODALS = words("do does did can could will would should shall may might must")
# Verbs a request to the bot opens with: it asks for something to be produced or said.
REQUEST_VERBS = words(
    "write tell give translate recommend explain list show make compose summarize summarise "
    "describe find create generate suggest draft sing name compare calculate define"
)
# Verbs a document's instruction opens with ("Run …", "Set max_batch_size …"): no part of the
# term after them.
INSTRUCTION_VERBS = words(
    """
    add apply build call change check choose click configure copy create delete deploy
    disable download edit enable ensure enter export fill follow import install launch list
    load make modify open pass press read refer remove rename replace restart run save select
    set specify start stop try type update upgrade verify visit
    """
)
# Chinese question words: a clause holding one asks.
CJK_QUESTION_WORDS = words(
    "什么 怎么 怎样 如何 为什么 为啥 为何 哪 谁 几 多少 多久 多长 啥 咋 干嘛 是否 能否"
)
# Sentence-final particles that make a statement a question.
CJK_PARTICLES = words("吗 呢 么")

# --- what frames a question -------------------------------------------------------------------

# Words of the question's frame: frequent enough to say nothing, not always above STOP_ZIPF.
FRAME = words(
    "does do did can could should would will may might shall please thanks thank anyone "
    "someone somebody hi hello hey ok okay default mean means happen happens know tell "
    "use used using get got need needs want wants like"
)
CJK_FRAME = words(
    "什么 怎么 怎样 怎么办 怎么样 怎么回事 如何 为什么 为啥 哪个 哪些 哪里 "
    "是否 能否 可以 能不 不能 有没 没有 请问 "
    "一下 这个 那个 是什 么样 多少 几点 需要 应该 我们 你们 他们 咱们 的话 时候 现在 "
    "一般来说 一般而言 通常来说"
)
# Phrasal verbs that ask what "mean" asks ("What does GHQ stand for?", "What is GHQ short for?",
# "What does GHQ refer to?"): the first word is the frame, like "mean"; as content, "stand"
# would be the ask, and a glossary's "GHQ — GPU-Hour Quota" answers it without the word.
FRAME_PHRASES = frozenset(
    {("stand", "for"), ("stands", "for"), ("short", "for"), ("refer", "to"), ("refers", "to")}
)
# Words that ask what a named thing is there for: a setting's purpose ("What does
# LUMEN_MAX_ATTEMPTS control?", "LUMEN_SPOOL_DIR 控制什么？", 作用, 用途), or whether to turn to a
# person with a problem ("有问题可以找赵慧玲吗？"). The passage that names the thing says it in
# whatever words it uses: a KB rarely writes "control" of its keys, and the embedder does not
# translate it into what their lines say. Stemmed keys.
ROLE_ASKS = words("control purpos 控制 作用 用途 找")
# Asking words wordfreq puts just under FUNCTION_ZIPF ("why" 5.9, "help" 5.8, "idea" 5.4):
# "…, why?", "… help?", "…, any idea?" ask about the words before them, as "what now?" does.
ASKING_ONLY = WH_WORDS | AUXILIARIES | words("help idea ideas")
# Words that point back at what was said before them ("is that bad?", 这个怎么办).
REFERRING = words("it its that this these those they them there such")

# --- what a question asks for -----------------------------------------------------------------

# The words of a question phrase that ask for the value itself ("what time", "release dates",
# "which weekday"): not terms to find.
VALUE_ASKS = words(
    "when time times hour hours day days date dates weekday weekdays month months deadline "
    "deadlines due long who whom whose"
)
# What 几点 counts when it is "a few points" (有几点建议), not "what time": kinds of remark.
CJK_POINTS_OF = words("建议 注意 要求 说明 意见 原因 问题")
# What 几号 numbers when it is "which number" (几号楼, 几号机, 几号端口), not "which day": things
# numbered in a building, a ward, a lab or a network.
CJK_NUMBERED = words("楼 机 线 床 窗 位 门 口 病区 模块 端口 仪器 房 车 箱")
# Words of a question that ask rather than name: never keywords on their own.
KEYWORD_QUESTION_WORDS = WH_WORDS | words(
    "many much is are was were does did do name named called known older younger first last "
    "same both"
)

# --- function words -----------------------------------------------------------------------------

# Function words and the vaguest content words of technical prose: where key phrases break.
ENGLISH_STOP_WORDS = words(
    """
    a about above across after again against all almost along already also although always am
    among an and another any anyone anything are around as at be became because become been
    before being below between both but by can cannot could did do does doing done down during
    each either else enough etc even ever every few first for from further get gets getting
    given gives go goes had has have having he her here hers him his how however i if in into
    is it its itself just last least less let like likely made make makes many may me might
    more most much must my need needs neither never new next no nor not now of off often on
    once one only or other others our out over own per please rather really same see several
    shall she should since so some something such than that the their them then there these
    they this those though through thus to too under until up upon us use used uses using very
    via was we well were what when where whether which while who whom whose why will with
    within without would yet you your yours e.g i.e eg ie vs example examples following follows
    note please way ways want wants able following default true false none null yes
    """
)
PRONOUNS = words("i you we they he she it")
DETERMINERS = words("the a an this that these those each every my our your its their")
# What follows a verb at the end of a subject ("does Jonas Berg own?" vs "does lumenctl skip
# do?"): a preposition or a particle.
PREPOSITIONS = words(
    """
    to on in at for from with about over up down out off of by into onto back away around
    through after before per under within without across
    """
)
VERB_PARTICLES = words("back away")
# Words an English sentence does not end on (an article, a possessive, a conjunction, a
# preposition that needs its object): a text that stops on one was cut off.
CANNOT_END = words(
    "the a an my our your their its every each and or but nor than as of to for with from by "
    "into onto whether because"
)
# Lowercase words that may sit inside a name: "Prime Minister of Australia", "Kiss and Tell".
NAME_CONNECTORS = words("of the de la le du des von van der den di da del y and for")
# Words a sentence or a question capitalises by grammar, never a name's first word.
SENTENCE_OPENERS = WH_WORDS | words(
    """
    in on at for from by with after before during his her its their our this that these those
    there here it he she they we you while although though however
    """
)
