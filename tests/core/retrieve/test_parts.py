"""The retriever's pure parts: context merging and traces, fusion, budgets, NLP keywords."""

from __future__ import annotations

import json

import pytest

from core.models import ChunkRecord, Entity, Relation, VectorHit
from core.retrieve.budget import (
    chunk_tokens,
    entity_tokens,
    fit_chunks,
    fit_graph,
    relation_tokens,
)
from core.retrieve.context import (
    Keywords,
    RetrievedContext,
    ScoredChunk,
    ScoredEntity,
    ScoredRelation,
)
from core.retrieve.dual_level import best_hits
from core.retrieve.fusion import fuse, normalised_score_fusion, reciprocal_rank_fusion
from core.retrieve.graph_chunks import names_entity
from core.retrieve.keywords import nlp_keywords


def entity(key: str, text: str = "") -> Entity:
    return Entity(key=key, name=key.title(), type="term", descriptions=(text,) if text else (),
                  chunk_ids=("c1",))  # fmt: skip


def relation(a: str, b: str, text: str = "") -> Relation:
    return Relation(source=a, target=b, keywords="", descriptions=(text,), chunk_ids=("c1",))


def chunk(cid: str, text: str = "some text", tokens: int = 0) -> ChunkRecord:
    return ChunkRecord(id=cid, source=f"{cid}.md", ordinal=0, text=text, tokens=tokens)


def test_merged_dedupes_and_keeps_the_best_score() -> None:
    kw = Keywords(high=("h",), low=("l",), source="nlp")
    one = RetrievedContext(
        entities=(ScoredEntity(entity("a"), 0.5), ScoredEntity(entity("b"), 0.9)),
        relations=(ScoredRelation(relation("a", "b"), 0.4),),
        chunks=(ScoredChunk(chunk("c1"), 0.3, ("dense",)),),
        keywords=kw,
    )
    two = RetrievedContext(
        entities=(ScoredEntity(entity("a"), 0.8),),
        relations=(ScoredRelation(relation("b", "a"), 0.7),),  # the same pair, reversed
        chunks=(ScoredChunk(chunk("c1"), 0.6, ("bm25",)), ScoredChunk(chunk("c2"), 0.1, ("plan",))),
    )
    merged = one.merged(two)
    assert [(e.entity.key, e.score) for e in merged.entities] == [("a", 0.8), ("b", 0.9)]
    assert [r.score for r in merged.relations] == [0.7]
    assert [(c.chunk.id, c.score, c.via) for c in merged.chunks] == [
        ("c1", 0.6, ("dense", "bm25")),
        ("c2", 0.1, ("plan",)),
    ]
    assert merged.keywords == kw and two.merged(one).keywords == kw
    assert RetrievedContext().is_empty() and not merged.is_empty()
    assert RetrievedContext().merged(RetrievedContext()).is_empty()


def test_trace_is_json_safe_and_short() -> None:
    context = RetrievedContext(
        entities=(ScoredEntity(entity("a"), 0.123456),),
        relations=(ScoredRelation(relation("a", "b"), 0.5),),
        chunks=(ScoredChunk(chunk("c1", "x" * 1000), 0.25, ("dense",)),),
        keywords=Keywords(high=("h",), low=(), source="llm"),
    )
    trace = json.loads(json.dumps(context.as_trace()))
    assert trace["entities"] == [{"key": "a", "name": "A", "score": 0.1235}]
    assert trace["relations"][0]["source"] == "a" and trace["relations"][0]["score"] == 0.5
    assert trace["chunks"][0]["via"] == ["dense"] and len(trace["chunks"][0]["text"]) == 160
    assert trace["keywords"] == {"high": ["h"], "low": [], "source": "llm"}


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = fuse([[("a", 9.0), ("b", 1.0)], [("b", 0.9), ("c", 0.8)]], [1.0, 1.0], "rrf")
    assert [i for i, _ in fused] == ["b", "a", "c"]
    weighted = reciprocal_rank_fusion([[("a", 1.0)], [("c", 1.0)]], [1.0, 3.0])
    assert weighted["c"] == pytest.approx(3 * weighted["a"])


def test_score_fusion_scales_each_list() -> None:
    # BM25 scores in the tens and cosines below 1 weigh the same once scaled.
    fused = normalised_score_fusion([[("a", 30.0), ("b", 10.0)], [("b", 0.9), ("c", 0.5)]], [1, 1])
    assert fused == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert normalised_score_fusion([[("x", 0.2)]], [2.0]) == {"x": 2.0}
    assert fuse([[], []], [1.0, 1.0], "score") == []


def test_best_hits_takes_the_best_score_per_id_over_queries() -> None:
    hits = [
        [VectorHit("a", 0.9, ""), VectorHit("b", 0.3, "")],
        [VectorHit("b", 0.6, ""), VectorHit("c", 0.1, "")],
    ]
    assert best_hits(hits, 0.2, 10) == [("a", 0.9), ("b", 0.6)]
    assert best_hits(hits, 0.0, 1) == [("a", 0.9)]


def test_budgets_keep_the_best_prefix() -> None:
    chunks = [ScoredChunk(chunk(f"c{i}", tokens=100), 1.0 - i / 10) for i in range(5)]
    assert [c.chunk.id for c in fit_chunks(chunks, 250)] == ["c0", "c1"]
    assert fit_chunks(chunks, 99) == ()
    assert chunk_tokens(chunk("x", "hello world")) == 2  # counted when the record has none
    high, low = ScoredEntity(entity("a", "word " * 50), 0.9), ScoredEntity(entity("b"), 0.1)
    mid = ScoredRelation(relation("a", "b", "short"), 0.5)
    budget = entity_tokens(high.entity) + relation_tokens(mid.relation)
    entities, relations = fit_graph([high, low], [mid], budget)
    assert entities == (high,) and relations == (mid,)
    assert fit_graph([high, low], [mid], 10) == ((), ())


def test_nlp_keywords_english() -> None:
    kw = nlp_keywords("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert kw.source == "nlp"
    assert {"Scott Derrickson", "Ed Wood", "nationality"} <= set(kw.low)
    assert "same" not in kw.low and "Were" not in kw.low
    assert kw.high[0] == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert set(kw.high[1:]) == {"Scott Derrickson", "Ed Wood"}


def test_nlp_keywords_keep_quoted_titles_whole_and_drop_possessives() -> None:
    kw = nlp_keywords(
        'Who portrayed Corliss Archer in the film "Kiss and Tell", Shirley Temple\'s debut?'
    )
    assert kw.low[0] == "Kiss and Tell"
    assert "Shirley Temple" in kw.low and "Corliss Archer" in kw.low
    assert not {"Kiss", "Tell", "Shirley Temple's"} & set(kw.low)
    assert kw.high[0].endswith("Shirley Temple's debut?")  # the question itself, as written
    single = nlp_keywords("Is the album 'Hot Space' by Queen older than Bowie's?")
    assert single.low[0] == "Hot Space" and "Bowie" in single.low
    assert all("'" not in k for k in single.low)
    assert nlp_keywords("《红楼梦》的作者是谁？").low[0] == "红楼梦"


def test_nlp_keywords_keep_the_questions_verb_out_of_a_name() -> None:
    # The extractor's phrase rule joins every run of content words; in a question the verb
    # lands in the run ("owns loom-ingest"), and the name is then never looked up alone.
    assert nlp_keywords("Who owns loom-ingest?").low == ("loom-ingest",)
    assert nlp_keywords("How do I install lumenctl?").low == ("lumenctl",)
    assert nlp_keywords("Where does Priya Natarajan live?").low == ("Priya Natarajan",)
    scale = nlp_keywords("How many replicas can loom-ingest scale to at most?")
    assert scale.low == ("loom-ingest", "replicas") and scale.high[1:] == ()
    rotation = nlp_keywords("When does the on-call rotation hand over?")
    assert rotation.low == ("on-call rotation",) and rotation.high[1:] == ("on-call rotation",)
    assert set(nlp_keywords("How do I roll back lumen-prod to v3.14.2?").low) == {
        "lumen-prod",
        "v3.14.2",
    }
    # No verb to cut: the next word is the verb, or "is" introduces a noun phrase.
    assert nlp_keywords("What does Jonas Berg own?").low == ("Jonas Berg",)
    assert nlp_keywords("What does lumenctl skip do?").low == ("lumenctl skip",)
    assert "forge submit" in nlp_keywords("What does forge submit --dry-run do?").low
    assert "alert threshold" in nlp_keywords("What is the alert threshold for LagHigh?").low


def test_nlp_keywords_keep_an_identifier_as_its_own_keyword() -> None:
    renew = nlp_keywords("How do I renew the lumen-gateway-tls certificate?")
    assert renew.low[:2] == ("lumen-gateway-tls", "lumen-gateway-tls certificate")
    # A hyphenated word of a name is no identifier; nor is a compound with a function word.
    assert nlp_keywords("Who was Kim Jong-chul's wife?").low == ("Kim Jong-chul", "wife")
    assert "on-call" not in nlp_keywords("Who is the on-call engineer?").low
    # jieba cuts an identifier into its words (as it cut the Chinese pages): the whole goes first.
    assert nlp_keywords("lumen-gateway 监听哪个端口？").low[:3] == (
        "lumen-gateway",
        "lumen",
        "gateway",
    )
    assert nlp_keywords("谁负责lumen-ledger数据库？").low[0] == "lumen-ledger"
    assert nlp_keywords("XINGTU_RETRY_MAX 默认多少？").low[0] == "XINGTU_RETRY_MAX"


def test_nlp_keywords_chinese_and_empty() -> None:
    kw = nlp_keywords("Redis 集群模式下如何配置哨兵？")
    assert "哨兵" in kw.low and "Redis" in kw.low
    assert kw.high == ("Redis 集群模式下如何配置哨兵？",)
    assert nlp_keywords("   ") == Keywords(high=(), low=(), source="nlp")
    assert (
        len(nlp_keywords("alpha beta gamma delta epsilon zeta etaa theta iota", limit=3).low) == 3
    )


def test_a_heading_names_an_entity_despite_case_spacing_and_a_qualifier() -> None:
    assert names_entity("Kiss and Tell (1945 film)", "kiss and tell")
    assert names_entity("  Shirley   TEMPLE ", "shirley temple")
    assert not names_entity("Shirley Temple Black", "shirley temple")
    assert not names_entity("", "shirley temple")


def test_a_heading_names_an_entity_whichever_way_its_diacritics_are_spelt() -> None:
    assert names_entity("Drei Haselnüsse für Aschenbrödel", "drei haselnusse fur aschenbrodel")
    assert names_entity("Tekeze River", "tekezé river")
    assert not names_entity("Tekeze River", "tekezo river")
