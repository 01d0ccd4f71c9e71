"""Typos read as the KB's own words (core.gate.kb_terms: KbTerms.respell, respelled, and the
one-typo look-up of a name), with rapidfuzz's OSA distance."""

from __future__ import annotations

from core.gate.coverage import judge
from core.gate.kb_terms import KbTerms, respelled
from core.gate.request import analyse

PASSAGES = [
    "# Kafka consumer lag\nWhen the Kafka consumer is lagging again, check the consumer group "
    "with kafka-consumer-groups and restart the stuck consumer.",
    "# Pods\nAll pods run on GKE. Mirela Vasquez owns the cluster.",
]


def test_a_misspelt_word_is_read_as_the_kb_word_it_misspells() -> None:
    kb = KbTerms.build(PASSAGES)
    assert kb.respell("laggin") == "lagging"
    assert kb.respell("kafak") == "kafka"  # two letters swapped: one edit
    assert kb.respell("restrat") == "restart"


def test_a_word_of_its_own_is_not_respelt() -> None:
    kb = KbTerms.build(PASSAGES)
    assert kb.respell("pod") is None  # as common as "pods": a word, not a typo
    assert kb.respell("wat") is None  # too short: one edit from too many words
    assert kb.respell("lunch") is None  # nothing of the KB's one edit away


def test_respelt_terms_are_found_and_weigh_as_the_kb_word() -> None:
    kb = KbTerms.build(["We restart the dispatcher when it hangs, then page the on-call."])
    terms = respelled(analyse("dispatcher hangs, restrat it?").terms, kb)
    restart = [t for t in terms if t.surface == "restart"]
    assert restart and kb.lookup(restart[0]) is not None
    assert all(kb.lookup(t) is not None for t in terms)


def test_a_misspelt_frame_word_is_dropped() -> None:
    # "agian" is one edit from the KB's "again", a word too common to say anything (and too
    # short to be looked up as a name by one typo)
    kb = KbTerms.build(["Restart the dispatcher and check again."])
    terms = respelled(analyse("restart the dispatcher agian").terms, kb)
    assert [t.surface for t in terms if t.surface.startswith("ag")] == []


def test_a_name_one_swap_away_is_found() -> None:
    kb = KbTerms.build(PASSAGES)
    verdict = judge("who is Mirela Vasqeuz?", dense_max=0.2, request_dense=None, kb=kb)
    assert verdict.covered, verdict.reason


def test_a_message_full_of_typos_is_covered() -> None:
    kb = KbTerms.build(PASSAGES)
    verdict = judge("kafak consumer laggin agian wat do", dense_max=0.2, request_dense=None, kb=kb)
    assert verdict.covered, verdict.reason
