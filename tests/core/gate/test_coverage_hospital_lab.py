"""The coverage rule's readings that the hospital lab team's chat called for
(tests/data/teams/hospital_lab/: team chat in Chinese, English and both, some with "@bot",
greetings or typos): a mention is no term, nor a contraction's stem; 啥意思 / 这边 / "N 是多少"
read as asking, 能不能 as a question; Chinese questions strung with a comma are one request; a
bare 怎么排查 leans on the clause before it; a measure word after a number; words looked for
across scripts in the nearest passages. Pure: no embedder (a fake one where the rule needs
vectors); the gate on the team's whole KB is test_coverage_teams.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from core.gate.coverage import Coverage, CoverageRule, judge
from core.gate.kb_terms import KbTerms
from core.gate.prior import asks
from core.gate.request import analyse, answer_kinds, find_request
from core.language.terms import content_terms
from core.models import VectorHit
from core.vector_cache import Snapshot

# --- the fixes the hospital lab KB called for, one by one -------------------------------

LAB = [
    "Glossary > Delta check\nA delta check compares a patient's result with their previous "
    "one within AUTOVERIFY_DELTA_CHECK_HOURS; a large change holds the result for review.",
    "autoverify > 原因代码\n| 代码 | 含义 |\n| AV-12 | delta check 超限，与上次结果差异过大 |",
    "值班制度 > 事件分级\n| 级别 | 定义 | 响应时间 |\n| P2 | 一个楼层无法传结果 | 15 分钟内响应 |",
    "Release process > Cadence\nHotfixes may go out outside the window, but never between "
    "08:00 and 11:00 (早上 peak blood draws).",
    "标签打印 > 打印机\n补打条码：护士在 HIS 的采血界面点「补打」。标签打印机不出纸或者打出来是"
    "空白：先看打印机是否缺碳带。",
    "his-bridge > 新增检验项目\nHIS 新增检验项目时，先在 lis-core 建项目字典，再在 his-bridge "
    "配置项目映射。",
]


def _surfaces(text: str) -> set[str]:
    return {t.surface for t in content_terms(text)}


def _judged(text: str, dense: float = 0.2) -> Coverage:
    return judge(text, dense_max=dense, request_dense=0.2, kb=KbTerms.build(LAB))


def test_an_at_mention_addresses_the_bot_and_is_not_a_term() -> None:
    assert "bot" not in _surfaces("@bot what is a delta check")
    assert "bot" not in _surfaces("@bot GW-307 是什么错误？怎么处理")
    assert find_request("@bot what is a delta check").whole
    assert _judged("@bot what is a delta check").covered
    # an address in mail is not a mention, and what follows a mention is still judged
    assert "example.org" in _surfaces("mail lab@example.org about it")
    assert not _judged("@bot what is the capital of France").covered


def test_an_english_contraction_is_not_a_term() -> None:
    surfaces = _surfaces("if primary and secondary both don't answer who gets paged next")
    assert "don" not in surfaces and {"primary", "secondary"} <= surfaces
    assert not {"isn", "won", "ll", "re"} & _surfaces("it isn't paged, we won't, we'll, you're")


def test_chinese_asking_words_are_not_what_the_passage_must_hold() -> None:
    # 啥意思 is 什么意思: jieba writes 啥 with its noun
    assert "啥意思" not in _surfaces("autoverify 的 AV-12 是啥意思")
    assert "意思" in answer_kinds("autoverify 的 AV-12 是啥意思")
    assert _judged("autoverify 的 AV-12 是啥意思").covered
    # the noun before 是 and a question word is what is asked for: a 要求 given as a time
    assert "要求" in answer_kinds("P2 事件的响应时间要求是多少")
    assert _judged("P2 事件的响应时间要求是多少").covered
    # 这边 ("our side") points, as 这个 does
    assert "这边" not in _surfaces("HIS 新增了一个检验项目，我们这边要做什么")


def test_a_verb_said_twice_around_not_asks() -> None:
    for text in ("LIS_DB_POOL_SIZE 能不能调到 80", "lis-core 是不是挂了", "analyzer-gw 要不要重启"):
        assert find_request(text).cue, text
        assert asks(text), text
    assert not find_request("发布完成了").cue
    assert not find_request("不能重启").cue


def test_chinese_questions_strung_with_a_comma_are_one_request() -> None:
    request = find_request("autoverfy 现在是哪个版本，最近改了啥")
    assert request.whole and "autoverfy" in request.text
    assert analyse("HIS 新增了一个检验项目，我们这边要做什么").empty
    # an English question before a comma is not joined: it asks a thing of its own
    assert not find_request("What does the job check, and what difference is acceptable?").whole
    # nor are words that ask nothing ("KB words, then an off-topic question")
    assert not find_request("危急值那块先放一放，法国的首都是哪里").whole
    # nor a preface before a request with words of its own (请问 asks nothing there)
    request = find_request("请问下mmcv的new config，自定义字段可以使用class作为value吗")
    assert request.text.startswith("自定义字段")


def test_a_measure_word_after_a_number_is_not_joined_to_the_next_word() -> None:
    # jieba: 点发 (not in its dictionary) in "9 点发吗"; 分钟 is a word it lists
    assert "点发" not in _surfaces("hotfix 可以早上 9 点发吗")
    assert _judged("hotfix 可以早上 9 点发吗").covered
    assert "分钟" in _surfaces("告警 5 分钟没人确认")


def test_a_bare_how_to_asks_about_the_clause_before_it() -> None:
    text = "护士站标签打印机打出来是空白的，怎么排查"
    assert analyse(text).empty and not analyse("怎么排查").empty
    assert _judged(text, dense=0.47).covered
    # the clause before it still has to be the KB's, and the verb counts: an off-topic "how"
    assert analyse("his-bridge 挂了，怎么做饭").empty
    assert not _judged("his-bridge 挂了，怎么做饭", dense=0.3).covered


class _Bilingual:
    """An embedder that knows the release page's translations (a word and its translation share
    a vector, every other text gets one of its own)."""

    name = "bilingual"
    dim = 64
    SAME: ClassVar[dict[str, str]] = {
        "周四": "thursday",
        "变更": "change",
        "最晚": "late",
        "发布": "release",
        "超高速": "高速",
    }

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [
            np.random.default_rng(sum(map(ord, self.SAME.get(t, t)))).normal(size=self.dim)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32)


class _Ranked:
    """The KB's chunks, every message nearest them in the order given (the gate's in-memory
    copy, as the rule reads it)."""

    def __init__(self, texts: Sequence[str], scores: Sequence[float]) -> None:
        self.current = Snapshot(
            version=1,
            loaded_at=0.0,
            matrix=np.zeros((len(texts), _Bilingual.dim), dtype=np.float32),
            ids=tuple(f"c{i}" for i in range(len(texts))),
            texts=tuple(texts),
        )
        self.scores = scores

    async def snapshot(self, collection: str, kb: str) -> Snapshot:
        return self.current

    async def search(
        self, collection: str, kb: str, vectors: np.ndarray, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        order = sorted(range(len(self.scores)), key=lambda i: -self.scores[i])[:limit]
        ranked = [VectorHit(f"c{i}", self.scores[i], self.current.texts[i]) for i in order]
        return [ranked for _ in range(len(np.atleast_2d(vectors)))]


async def test_a_word_is_looked_for_across_scripts_in_the_few_nearest_passages() -> None:
    # The nearest passage is a Chinese one and the one saying it is English, nearest but two:
    # 周四 and 最晚 are compared with its "Thursday" and "late"
    pages = [
        "值班制度 > 值班补贴和调休\n值班那周如果夜里被叫起来处理，第二天可以上午调休。",
        "值班制度 > 交接清单\n3. 正在进行的变更 / 下一个发布窗口",
        "Release process > Approvals (CAB)\nOpen the change ticket by Tuesday 17:00 before the "
        "Thursday release. Late tickets move to the next window.",
        "术语表 > 发布\n发布窗口每两周一次。",
    ]
    rule = CoverageRule(embedder=_Bilingual(), snapshots=_Ranked(pages, [0.31, 0.2, 0.24, 0.1]))
    found = await rule.check("hospital_lab", "周四发布的话变更单最晚什么时候提")
    assert found.covered, found.reason
    # an off-topic question near the same pages still finds nothing there
    assert not (await rule.check("hospital_lab", "周四晚上吃什么火锅比较好")).covered


async def test_a_word_the_kb_does_not_write_is_not_read_inside_a_farther_passage() -> None:
    # Only across scripts: within its own script, a compound the KB writes nowhere is read as
    # the KB's word inside it (超高速 as 高速) in the nearest passage only, as before
    pages = [
        "值班制度 > 值班补贴和调休\n值班那周如果夜里被叫起来处理，第二天可以上午调休。",
        "analyzer-gw > 网络\n楼层之间用高速交换机连接。",
    ]
    text = "这些都是超高速的设备吧"
    rule = CoverageRule(embedder=_Bilingual(), snapshots=_Ranked(pages, [0.3, 0.25]))
    assert not (await rule.check("hospital_lab", text)).covered
    nearest = CoverageRule(embedder=_Bilingual(), snapshots=_Ranked(pages, [0.25, 0.3]))
    assert (await nearest.check("hospital_lab", text)).covered
