"""Graph facts as the answer prompt numbers them (core.retrieve.context_text): each sentence
once, no front matter, markup or bare name, in a passage's language, with its source file."""

from __future__ import annotations

from core.models import ChunkRecord, Entity, Relation
from core.retrieve.context import (
    Keywords,
    RetrievedContext,
    ScoredChunk,
    ScoredEntity,
    ScoredRelation,
)
from core.retrieve.context_text import cited, knowledge_lines, numbered_facts

PASSAGE = ChunkRecord(id="p1", source="runbooks/lag.md", ordinal=0, text="Replica lag alerts.")


def context_of(
    entities: list[Entity],
    relations: list[Relation] = (),  # type: ignore[assignment]
    passage: ChunkRecord = PASSAGE,
    fact_sources: tuple[tuple[str, str], ...] = (),
    keywords: Keywords | None = None,
) -> RetrievedContext:
    return RetrievedContext(
        chunks=(ScoredChunk(passage, 0.9),),
        entities=tuple(ScoredEntity(e, 0.8 - i / 100) for i, e in enumerate(entities)),
        relations=tuple(ScoredRelation(r, 0.5) for r in relations),
        fact_sources=fact_sources,
        keywords=keywords,
    )


def test_one_sentence_filed_under_several_terms_is_one_fact() -> None:
    said = "The recover sub-command rebuilds a replica from the primary."
    context = context_of(
        [
            Entity("custom bootstrap", "custom bootstrap", "term", (said,), ("c9",)),
            Entity("custom replica", "custom replica", "term", (said,), ("c9",)),
            Entity("recover", "recover sub-command", "term", (said, "It takes --force."), ("c9",)),
        ],
        [Relation("custom bootstrap", "custom replica", "", (said,), ("c9",))],
    )
    texts = [f.text for f in numbered_facts(context)]
    assert texts == [
        f"custom bootstrap (term): {said}",
        "recover sub-command (term): It takes --force.",  # only what was not said before
    ]


def test_front_matter_markup_and_a_bare_name_are_no_facts() -> None:
    context = context_of(
        [
            Entity("title", "oncall title", "term", ("title: Being On-Call",), ("c9",)),
            Entity("cover", "cover image", "term", ("cover: assets/img/oncall.png",), ("c9",)),
            Entity("sev-4", "SEV-4", "code", ('<td class="sev-4">SEV-4</td>',), ("c9",)),
            Entity("kube", "Kube", "system", (), ("c9",)),
            Entity("backup ic", "backup IC", "term", ("This pages the backup IC too.",), ("c9",)),
        ]
    )
    assert [f.name for f in numbered_facts(context)] == ["backup IC"]


def test_a_sentence_cut_off_and_a_name_said_again_are_no_facts() -> None:
    context = context_of(
        [
            Entity("change", "change affects", "term", ("This change affects the",), ("c9",)),
            Entity("imaging", "replica imaging", "term", ("Replica imaging.",), ("c9",)),
            Entity("wait", "--wait", "code", ("Waits until the restart is done with",), ("c9",)),
            Entity("pause", "patronictl pause", "code", ("It stops automatic failover.",), ("c9",)),
            Entity("scale", "replica scaling", "term", ("Scale the replicas back up",), ("c9",)),
        ]
    )
    # a sentence may end on a particle ("back up"), never on an article or "with"
    assert [f.name for f in numbered_facts(context)] == ["patronictl pause", "replica scaling"]


def test_a_fact_in_a_language_no_passage_is_written_in_is_left_out() -> None:
    entities = [
        Entity("团队", "值班团队", "term", ("值班团队负责处理所有告警。",), ("c9",)),
        Entity("pager", "PagerDuty", "system", ("PagerDuty pages the on-call.",), ("c9",)),
    ]
    assert [f.name for f in numbered_facts(context_of(entities))] == ["PagerDuty"]
    chinese = ChunkRecord(id="p2", source="zh/oncall.md", ordinal=0, text="值班告警的处理流程。")
    both = [f.name for f in numbered_facts(context_of(entities, passage=chinese))]
    assert both == ["值班团队"]


def test_a_fact_names_its_file_and_its_citation_leads_there() -> None:
    context = context_of(
        [Entity("ttl", "ttl", "setting", ("The leader key expires after ttl seconds.",), ("c9",))],
        fact_sources=(("c9", "docs/dcs.rst"),),
    )
    (line,) = knowledge_lines(context)
    assert line == {"n": 2, "text": "ttl (setting): The leader key expires after ttl seconds. "
                    "(docs/dcs.rst)"}  # fmt: skip
    (citation,) = cited("The key expires after ttl [2].", context)
    assert citation.source == "docs/dcs.rst"


def test_a_fact_that_writes_no_searched_keyword_is_left_out_and_the_rest_numbered_on() -> None:
    entities = [
        Entity("cluster", "cluster consists", "term", ("Cluster consists of members.",), ("c9",)),
        Entity("ctl", "application controller", "code", ("It shards by replicas.",), ("c9",)),
    ]
    relations = [
        Relation("cluster", "member", "", ("A cluster has an odd number of members.",), ("c9",)),
        Relation("cluster", "endpoint", "", ("The defrag runs per endpoint.",), ("c9",)),
    ]
    searched = Keywords(
        high=("memory growth",), low=("application-controller", "defrag"), source="llm"
    )
    facts = numbered_facts(context_of(entities, relations, keywords=searched))
    # hyphens and spaces are one separator; a relation is kept by its description too
    assert [(f.n, f.name) for f in facts] == [
        (2, "application controller"),
        (3, "cluster consists — endpoint"),
    ]
    # found without keywords (a plan's lookup by id): nothing to judge the facts by
    assert len(numbered_facts(context_of(entities, relations))) == 4
