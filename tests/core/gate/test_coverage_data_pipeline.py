"""The coverage rule's readings that the data-pipeline team's KB called for
(tests/data/teams/data_pipeline/): agent nouns, the KB's own subject, an ask-less similarity,
FAQ headings, and personal questions about a person the KB names. Pure: no embedder; the gate on
the team's whole KB is test_coverage_teams.py."""

from __future__ import annotations

from core.gate.coverage import judge
from core.gate.kb_terms import HEADED_TERMS, SUBJECT_MIN_CHUNKS, KbTerms
from core.language.terms import agent_forms, content_terms

# --- the fixes the data-pipeline KB called for, one by one ------------------------------


def _found(kb: KbTerms, word: str) -> set[int]:
    term = content_terms(word)[0]
    hit = kb.lookup(term)
    return set() if hit is None else {int(i) for i in hit}


def test_a_verb_is_found_where_the_kb_writes_its_agent_noun_and_back() -> None:
    kb = KbTerms.build(
        [
            "| Component | Owner |\n| warehouse-loader | Fatima Haddad |",
            "Sven Lindqvist owns the deploy pipeline.",
            "| 姓名 | 负责 |\n| 赵慧玲 | loom-scheduler |",
        ]
    )
    assert agent_forms("owner") == ("own",) and agent_forms("own") == ("owner",)
    assert agent_forms("负责人") == ("负责",) and agent_forms("warehouse-loader") == ()
    assert _found(kb, "owns") == {0, 1}
    assert _found(kb, "owner") == {0, 1}
    assert _found(kb, "负责人") == {2}
    # a word and its agent noun only: not any word that shares letters
    assert _found(kb, "pipe") == set()
    found = judge("Who owns warehouse-loader?", dense_max=0.2, request_dense=None, kb=kb)
    assert found.covered, found.reason


def test_a_name_in_most_passages_is_the_kbs_subject_and_in_all_of_them() -> None:
    passages = [f"Loom service {i} runs job{i}." for i in range(SUBJECT_MIN_CHUNKS)]
    passages.append("Rolling back\nRoll back a release by reverting the promotion request.")
    kb = KbTerms.build(passages)
    assert _found(kb, "Loom") == set(range(len(passages)))
    found = judge("How do I roll back a Loom release?", dense_max=0.2, request_dense=None, kb=kb)
    assert found.covered, found.reason
    # a name in most passages of a small KB stays where it is written
    small = KbTerms.build([*passages[:2], passages[-1]])
    assert _found(small, "Loom") == {0, 1}
    # a name in only some passages stays where it is written, however large the KB
    few = KbTerms.build([*passages[:3], *[f"other text {i}" for i in range(SUBJECT_MIN_CHUNKS)]])
    assert _found(few, "Loom") == {0, 1, 2}


def test_similarity_the_names_pull_up_does_not_cover_an_ask_the_kb_lacks() -> None:
    kb = KbTerms.build(["schema-keeper stores Avro schemas and answers compatibility checks."])
    text = "schema-keeper schema-keeper 法国的首都是哪里？"
    # the best chunk is close, but only because of the name: without the ask's look-up it covers
    assert judge(text, dense_max=0.39, request_dense=None, kb=kb).covered
    found = judge(text, dense_max=0.39, request_dense=None, kb=kb, ask_dense=0.05)
    assert not found.covered and found.off_request, found.reason
    # the ask near the KB: similarity still counts
    assert judge(text, dense_max=0.39, request_dense=None, kb=kb, ask_dense=0.3).covered


def test_everyday_words_all_in_a_passages_heading_are_covered() -> None:
    kb = KbTerms.build(
        [
            "Loom FAQ > Why is yesterday's number different today?\nLate data reopens partitions.",
            "Loom FAQ > My records are missing. Where did they go?\nTo the dead-letter topic.",
            "Steps\nMerge the change, then wait a day before the release.",
            "常见问题 > 用的什么算法\n默认用 BM25 和向量检索。",
        ]
    )
    for text in (
        "Why is yesterday's number different today?",
        "My records are missing, where did they go?",
    ):
        found = judge(text, dense_max=0.3, request_dense=None, kb=kb)
        assert found.covered, found.reason
    # the same words in a body, not a heading; too few words; a word the heading lacks
    for text in ("why wait a day?", "what are the steps?", "why is the weather different today?"):
        found = judge(text, dense_max=0.3, request_dense=None, kb=kb)
        assert not found.covered, (text, found.reason)
    # a particle (啥, 啊) is in no pair of the heading's characters, so it cannot make up the
    # words' number: on real chat "啥算法啊" was covered by any heading that says 算法
    assert not judge("啥算法啊", dense_max=0.3, request_dense=None, kb=kb).covered
    # a paraphrase that keeps the heading's words is the same question
    assert judge("why is my number different?", dense_max=0.3, request_dense=None, kb=kb).covered
    assert HEADED_TERMS >= 2


# The data-pipeline KB's lines about its manager (tests/data/teams/data_pipeline/kb): a runbook
# passage whose first line says "Older data" and whose last needs her approval, and the Chinese
# onboarding table naming her.
MANAGER = [
    "Backfill runbook > Before you start\n"
    "- The raw zone keeps **14 days**. Older data must be re-sent by the producer team.\n"
    "- Never backfill during a deploy freeze without written approval from Aiyana Whitehorse.",
    "Loom 新成员入职指南 > 团队成员一览\n| 姓名 | 负责 | 所在城市 |\n|---|---|---|\n"
    "| Aiyana Whitehorse | 团队经理 | 阿姆斯特丹 |",
]


def test_a_personal_question_about_a_latin_named_person_is_not_covered() -> None:
    kb = KbTerms.build(MANAGER)
    # "old" is in a line of the runbook that does not name her ("older", its agent form), and
    # the KB writing "old" made the Chinese table naming her hold it too
    for text in ("How old is Aiyana Whitehorse?", "Where does Aiyana Whitehorse live?"):
        found = judge(text, dense_max=0.2, request_dense=None, kb=kb)
        assert not found.covered, (text, found.reason)
    # what a line naming her says is asked of her: her approval, and who she is
    for text in ("What does Aiyana Whitehorse approve?", "Who is Aiyana Whitehorse?"):
        found = judge(text, dense_max=0.2, request_dense=None, kb=kb)
        assert found.covered, (text, found.reason)
    # a table row says what its header names: 负责 is asked of her in the row naming her
    assert judge("Aiyana Whitehorse 负责什么？", dense_max=0.2, request_dense=None, kb=kb).covered
    # not a person: the words of a component are not held line by line
    lines = KbTerms.build(["Spool\nThe dispatcher spool has a PVC.\nIt is called spool-3."])
    text = "What is the PVC of the dispatcher spool called?"
    found = judge(text, dense_max=0.26, request_dense=None, kb=lines)
    assert found.covered, found.reason
