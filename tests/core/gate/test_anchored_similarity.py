"""The anchored signal (core.gate.evidence: anchored_similarity, Coverage.signals["anchored"]):
how near the message the passages holding its terms are, each term by its weight."""

from __future__ import annotations

import pytest

from core.gate.coverage import judge
from core.gate.evidence import anchored_similarity
from core.gate.kb_terms import KbTerms
from core.gate.request import analyse

PASSAGES = [
    "# Sync windows\nA deny sync window blocks syncs of a project's apps during a freeze.",
    "# Ecosystem\nOther tools: Flux, argocd-image-updater, Renovate.",
    "# Projects\nA project groups apps and restricts where they deploy.",
]


def test_each_term_counts_the_nearest_passage_that_holds_it() -> None:
    kb = KbTerms.build(PASSAGES)
    terms = analyse("what is a deny sync window?").terms
    # every term is in passage 0, the nearest
    assert anchored_similarity(terms, kb, None, [(0, 0.6), (2, 0.3), (1, 0.1)]) == pytest.approx(
        0.6
    )
    # the same terms held only by a far passage: the KB holds them, not near the message
    far = anchored_similarity(terms, kb, None, [(2, 0.6), (1, 0.5), (0, 0.1)])
    assert far == pytest.approx(0.1)


def test_a_term_held_beyond_the_passages_read_counts_the_last_one_read() -> None:
    kb = KbTerms.build(PASSAGES)
    terms = analyse("does flux renovate work?").terms
    assert anchored_similarity(terms, kb, None, [(0, 0.5), (2, 0.4)]) == pytest.approx(0.4)


def test_a_term_no_passage_holds_counts_nothing() -> None:
    kb = KbTerms.build(PASSAGES)
    held = analyse("deny sync window").terms
    both = analyse("deny sync window terraform").terms
    nearest = [(0, 0.6), (1, 0.2), (2, 0.1)]
    assert anchored_similarity(both, kb, None, nearest) < anchored_similarity(
        held, kb, None, nearest
    )
    assert anchored_similarity(analyse("terraform").terms, kb, None, nearest) == 0.0


def test_the_rule_reports_it_without_changing_its_verdict() -> None:
    kb = KbTerms.build(PASSAGES)
    text = "how do I add a deny sync window to a project?"
    near = judge(text, dense_max=0.5, request_dense=None, kb=kb, nearest=[(0, 0.5), (2, 0.4)])
    far = judge(text, dense_max=0.5, request_dense=None, kb=kb, nearest=[(1, 0.5), (2, 0.1)])
    assert near.signals["anchored"] > far.signals["anchored"] > 0.0
    assert near.covered == far.covered
    assert judge(text, dense_max=0.5, request_dense=None, kb=kb).signals["anchored"] == 0.0
