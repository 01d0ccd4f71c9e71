"""Extraction: loop NER call sequences (both variants), record parsing, NLP terms (zh and en)."""

from __future__ import annotations

import pytest

from core.errors import LLMTimeout
from core.index.extract import Extraction, parse_records, says_yes
from core.index.llm_extract import LoopNERExtractor
from core.index.nlp_extract import NLPExtractor, chinese_terms, english_terms
from core.language.text import split_sentences
from core.models import ChunkRecord, normalise_name
from tests.fakes.fake_llm import FakeLLM

EN_CHUNK = ChunkRecord(
    id="c1",
    source="docs/serve.md",
    ordinal=0,
    text="LMDeploy serves InternLM2 with the TurboMind engine.",
    heading="Serving",
)
ZH_CHUNK = ChunkRecord(
    id="c2",
    source="docs/部署.md",
    ordinal=0,
    text="水稻 TAC4 基因调控分蘖角度。分蘖角度影响水稻的株型和产量。",
)

FIRST = (
    "entity<|>LMDeploy<|>product<|>A toolkit that serves language models.\n"
    "entity<|>InternLM2<|>product<|>A language model.\n"
    "relation<|>LMDeploy<|>InternLM2<|>serves<|>LMDeploy serves InternLM2.\n"
)
MORE = "entity<|>TurboMind<|>technology<|>LMDeploy's inference engine.\n"
EVEN_MORE = "relation<|>LMDeploy<|>TurboMind<|>engine<|>LMDeploy runs on TurboMind.\n"


def names(extraction: Extraction) -> list[str]:
    return [e.name for e in extraction.entities]


async def test_base_variant_continues_first_then_asks_whether_to_go_on() -> None:
    llm = (
        FakeLLM()
        .script("extract_entities", FIRST)
        .script("extract_continue", MORE, EVEN_MORE)
        .script("extract_judge", "yes", "no")
    )
    result = await LoopNERExtractor(llm, variant="base", max_loops=3).extract(EN_CHUNK)

    assert llm.templates_called == [
        "extract_entities",
        "extract_continue",
        "extract_judge",
        "extract_continue",
        "extract_judge",
    ]
    assert names(result) == ["LMDeploy", "InternLM2", "TurboMind"]
    assert [(r.source, r.target) for r in result.relations] == [
        ("LMDeploy", "InternLM2"),
        ("LMDeploy", "TurboMind"),
    ]
    assert result.llm_calls == 5 and result.invalid_rows == 0
    assert {m.chunk_id for m in result.entities} | {m.chunk_id for m in result.relations} == {"c1"}
    assert llm.pending() == {}

    # Each call carries the conversation so far: the second continue sees both replies.
    second_continue = llm.calls[3].prompt
    assistant_turns = [m.content for m in second_continue.messages if m.role == "assistant"]
    assert assistant_turns == [FIRST.strip(), MORE.strip()] or assistant_turns == [FIRST, MORE]
    assert "Serving" in second_continue.messages[1].content  # the heading gives context
    # The judge's own answer is not part of the extraction history.
    assert all(m.content not in ("yes", "no") for m in second_continue.messages)


async def test_base_variant_skips_the_judge_that_cannot_change_anything() -> None:
    # Algorithm 3's `base` asks the judge after every continue; after the last one its answer
    # cannot start another loop, so the call is not made (a third of the calls at max_loops=1).
    llm = FakeLLM().script("extract_entities", FIRST).script("extract_continue", MORE)
    result = await LoopNERExtractor(llm, variant="base", max_loops=1).extract(EN_CHUNK)
    assert llm.templates_called == ["extract_entities", "extract_continue"]
    assert result.llm_calls == 2
    assert names(result) == ["LMDeploy", "InternLM2", "TurboMind"]

    llm = (
        FakeLLM()
        .script("extract_entities", FIRST)
        .script("extract_continue", MORE, EVEN_MORE)
        .script("extract_judge", "yes")
    )
    result = await LoopNERExtractor(llm, variant="base", max_loops=2).extract(EN_CHUNK)
    assert llm.templates_called == [
        "extract_entities",
        "extract_continue",
        "extract_judge",
        "extract_continue",
    ]
    assert result.llm_calls == 4 and llm.pending() == {}


async def test_trial_variant_keeps_its_judge_before_every_continue() -> None:
    llm = (
        FakeLLM()
        .script("extract_entities", FIRST)
        .script("extract_judge", "yes")
        .script("extract_continue", MORE)
    )
    result = await LoopNERExtractor(llm, variant="trial", max_loops=1).extract(EN_CHUNK)
    assert llm.templates_called == ["extract_entities", "extract_judge", "extract_continue"]
    assert result.llm_calls == 3


async def test_trial_variant_asks_first() -> None:
    llm = (
        FakeLLM()
        .script("extract_entities", FIRST)
        .script("extract_judge", "Yes.", "no")
        .script("extract_continue", MORE)
    )
    result = await LoopNERExtractor(llm, variant="trial", max_loops=3).extract(EN_CHUNK)
    assert llm.templates_called == [
        "extract_entities",
        "extract_judge",
        "extract_continue",
        "extract_judge",
    ]
    assert names(result) == ["LMDeploy", "InternLM2", "TurboMind"]
    assert llm.pending() == {}


async def test_trial_variant_stops_when_the_model_says_nothing_remains() -> None:
    llm = FakeLLM().script("extract_entities", FIRST).script("extract_judge", "no")
    result = await LoopNERExtractor(llm, variant="trial", max_loops=3).extract(EN_CHUNK)
    assert llm.templates_called == ["extract_entities", "extract_judge"]
    assert result.llm_calls == 2


async def test_zero_loops_is_one_call() -> None:
    llm = FakeLLM().script("extract_entities", FIRST)
    await LoopNERExtractor(llm, max_loops=0).extract(EN_CHUNK)
    assert llm.templates_called == ["extract_entities"]


async def test_templates_follow_the_chunk_language_and_name_the_entity_types() -> None:
    llm = (
        FakeLLM()
        .script("extract_entities", "entity<|>TAC4<|>gene<|>调控分蘖角度的基因。\n")
        .script("extract_judge", "否")
    )
    result = await LoopNERExtractor(
        llm, variant="trial", max_loops=2, entity_types=["gene", "trait"]
    ).extract(ZH_CHUNK)
    system = llm.calls[0].prompt.messages[0].content
    assert "你负责" in system and "gene、trait" in system
    assert "请" not in llm.calls[1].last_user or "是" in llm.calls[1].last_user
    assert "只回答一个词" in llm.calls[1].last_user  # the zh judge template
    assert names(result) == ["TAC4"] and result.entities[0].type == "gene"


async def test_an_llm_failure_propagates_to_the_pipeline() -> None:
    llm = FakeLLM().script("extract_entities", LLMTimeout("timed out after 4 retries"))
    with pytest.raises(LLMTimeout):
        await LoopNERExtractor(llm).extract(EN_CHUNK)


def test_malformed_rows_are_dropped_and_counted() -> None:
    reply = "\n".join(
        [
            "Here are the records:",  # prose: ignored, not counted
            "```",
            "entity<|>LMDeploy<|>product<|>A toolkit.",
            '("entity"<|>TurboMind<|>technology<|>An engine.)',  # LightRAG-style wrapping
            "entity<|>OnlyAName",  # too few fields
            "entity<|><|>product<|>no name",  # empty name
            "entity<|>" + "x" * 200 + "<|>concept<|>a sentence in the name field",
            "relation<|>LMDeploy<|>TurboMind<|>engine<|>Runs on it.",
            "relation<|>LMDeploy<|>lmdeploy<|>self<|>A self-loop.",  # same entity twice
            "relation<|>A<|>B<|>missing a field",
            "relationship<|>LMDeploy<|>InternLM2<|>serves<|>Serves it.",
            "```",
        ]
    )
    result = parse_records(reply, "c9")
    assert [e.name for e in result.entities] == ["LMDeploy", "TurboMind"]
    assert [(r.source, r.target) for r in result.relations] == [
        ("LMDeploy", "TurboMind"),
        ("LMDeploy", "InternLM2"),
    ]
    assert result.invalid_rows == 5


def test_judgements() -> None:
    assert says_yes("Yes") and says_yes("yes, a few") and says_yes("是") and says_yes("有")
    assert not says_yes("No") and not says_yes("否") and not says_yes("没有") and not says_yes("")


async def test_nlp_english_terms_and_sentence_relations() -> None:
    chunk = ChunkRecord(
        id="e1",
        source="a.md",
        ordinal=0,
        text=(
            "The TurboMind engine powers LMDeploy. Set max_batch_size to 64 on the GPU.\n\n"
            "```python\nimport lmdeploy\nself.pipeline = lmdeploy.pipeline()\n```\n"
            "LMDeploy also quantizes weights with AWQ."
        ),
    )
    result = await NLPExtractor().extract(chunk)
    found = {normalise_name(e.name) for e in result.entities}
    assert {"turbomind", "lmdeploy", "max_batch_size", "gpu", "awq"} <= found
    assert "set max_batch_size" not in found  # an imperative verb does not start a term
    assert "self.pipeline" not in found  # fenced code is not mined
    assert "the" not in found and "set" not in found
    by_pair = {(r.source, r.target): r for r in result.relations}
    pair = next(p for p in by_pair if set(map(normalise_name, p)) == {"max_batch_size", "gpu"})
    assert by_pair[pair].description == "Set max_batch_size to 64 on the GPU."
    entity = next(e for e in result.entities if e.name == "AWQ")
    assert entity.description == "LMDeploy also quantizes weights with AWQ."
    assert entity.type == "term" and entity.chunk_id == "e1"


def test_nlp_terms_are_the_words_a_page_shows_not_its_link_targets_images_or_tags() -> None:
    # A handbook page as written: links to other pages, a slide image, inline HTML.
    chunk = ChunkRecord(
        id="m1",
        source="docs/training/deputy.md",
        ordinal=0,
        text=(
            "The Deputy supports the Incident Commander, see [Deputy role]"
            "(../before/different_roles.md/#deputy) for details.\n\n"
            "![016](../../assets/slides/incident_response/incident_response.016.jpeg)\n\n"
            '<input type="checkbox" id="004" /><label for="004">The Deputy tracks elapsed time'
            "</label> and reminds the Incident Commander of task timers."
        ),
    )
    result = NLPExtractor().extract_sync(chunk)
    found = {e.name for e in result.entities}
    assert any("Deputy" in name for name in found)
    shown = " ".join([*found, *(e.description for e in result.entities)])
    for markup in (".md", "assets", ".jpeg", "checkbox", "<label", "](", "016"):
        assert markup not in shown, markup
    described = next(e.description for e in result.entities if "Deputy" in e.name)
    assert described.startswith("The Deputy supports the Incident Commander, see Deputy role")


async def test_nlp_chinese_terms_use_jieba() -> None:
    result = await NLPExtractor().extract(ZH_CHUNK)
    found = {e.name for e in result.entities}
    assert {"TAC4", "分蘖", "水稻"} & found and "角度" in "".join(found)
    assert all(len(name) >= 2 for name in found)
    assert result.relations
    assert all(r.description in split_sentences(ZH_CHUNK.text) for r in result.relations)


def test_nlp_chinese_terms_name_something() -> None:
    # A relay run's answer context listed graph facts named "--" and "---": jieba's keywords
    # of a Chinese chunk with a markdown table include its delimiter row and cells like "90%".
    table = (
        "| 指标 | 阈值 |\n|---|---|\n| 消费组 lumen-dispatch 积压 | 超过 50,000 条持续 10 分钟 |\n"
        "| 磁盘 -- 使用率 | 90% -- 80% |\n"
    )
    terms = chinese_terms(table, 10)
    assert {"积压", "使用率", "lumen"} <= set(terms)
    assert not {"---", "--", "90%", "80%", "50,000"} & set(terms)


def test_nlp_table_rows_are_described_by_their_cells_and_headers_name_nothing() -> None:
    # A relay run's graph described terms by table rows, pipes and all, and made terms of a
    # header's column names ("Backup owner", "Action") described by the header row.
    chunk = ChunkRecord(
        id="t1",
        source="architecture.md",
        ordinal=0,
        text=(
            "Who owns which service.\n\n"
            "| Service | Language / stack | Owner | Backup owner |\n"
            "|---------|:----------------:|-------|--------------|\n"
            "| `lis-core` | Java 17, Spring Boot 3.2 | Zhou Mingyuan | Wang Lei |\n"
            "| `his-bridge` | Mirth Connect 4.4 \\| channels | Chen Siqi | Zhou Mingyuan |\n"
        ),
    )
    result = NLPExtractor().extract_sync(chunk)
    described = {e.name: e.description for e in result.entities}
    row = "`lis-core`; Java 17, Spring Boot 3.2; Zhou Mingyuan; Wang Lei"
    assert described["Spring Boot"] == row
    assert "Mirth Connect" in described
    descriptions = [*described.values(), *(r.description for r in result.relations)]
    assert not [d for d in descriptions if d.startswith("|") or " | " in d]
    assert not {"Backup owner", "Language / stack", "Service"} & set(described)


def test_nlp_terms_leave_out_measures_and_function_words() -> None:
    # The demo KB's graph had facts named "分钟", "小时", "一次", "两周", "本文", "内未" (the
    # HMM's "内" + "未") and "minutes", "days", "MB": units and words that name nothing.
    text = (
        "积压超过 10 分钟时告警。保留时间是 72 小时，超过后消息被删除。"
        "每个分区一次只分配给一个副本。"
        "本文说明发布流程，值班工程师经常查看积压。两周内未续签的证书会过期。"
        "分钟级的积压和小时级的积压都要记录在事故频道。"
    )
    terms = chinese_terms(text, 20)
    assert {"积压", "副本", "证书", "分区"} <= set(terms)
    assert not {"分钟", "小时", "一次", "本文", "两周", "内未"} & set(terms), terms

    sentences = [
        "The breaker opens for 5 minutes after 20 failures.",
        "Retries wait 30 minutes, then 60 minutes; segments are 64 MB, and 64 MB again.",
        "Certificates are renewed 30 days before expiry, 14 days at the latest.",
    ]
    english = {t.casefold() for t in english_terms(sentences, 20)}
    assert {"breaker opens", "retries wait"} <= english
    assert not {"minutes", "mb", "days"} & english, english


def test_english_terms_rank_technical_and_repeated_phrases_first() -> None:
    sentences = [
        "Restart the KafkaConsumer when consumer lag grows.",
        "Consumer lag above 10k means the KafkaConsumer is stuck.",
        "Probably nothing else matters.",
    ]
    terms = english_terms(sentences, 3)
    assert terms[0] == "KafkaConsumer"
    assert "consumer lag" in [t.casefold() for t in terms]
    assert "Probably" not in terms
