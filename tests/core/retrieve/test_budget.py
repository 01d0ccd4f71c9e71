"""core/retrieve/budget.py: the best-first prefix that fits a token budget, counted exactly,
without loading the tokenizer when every item's byte length fits already."""

from __future__ import annotations

import pytest

from core.language.text import count_tokens
from core.models import Entity, Relation
from core.retrieve import budget
from core.retrieve.budget import entity_tokens, fit_graph, relation_tokens
from core.retrieve.context import ScoredEntity, ScoredRelation

TEXTS = [
    "kubectl -n $NAMESPACE describe pod $POD",
    "告警触发后，先排查节点的磁盘压力，再扩容。",
    "emoji 🚀🔥 and accents: naïve café Łódź",
    "<|im_start|>system<|im_end|> a special token spelt in a document",
    "    def f(x):\n        return x ** 2  # code\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_texts_bytes_bound_its_tokens(text: str) -> None:
    assert count_tokens(text) <= budget._most_tokens(text)


def graph(size: int) -> tuple[list[ScoredEntity], list[ScoredRelation]]:
    entities = [
        ScoredEntity(
            Entity(f"e{i}", f"Entity {i}", "thing", (f"described {i} " * 5,), ()), 1 - i / 100
        )
        for i in range(size)
    ]
    relations = [
        ScoredRelation(
            Relation(f"e{i}", f"e{i + 1}", "links", (f"relation {i} " * 4,), ()), 0.9 - i / 100
        )
        for i in range(size)
    ]
    return entities, relations


def test_a_context_whose_bytes_fit_is_kept_whole_without_the_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entities, relations = graph(5)
    total = sum(entity_tokens(e.entity) for e in entities) + sum(
        relation_tokens(r.relation) for r in relations
    )

    def no_tokenizer(text: str) -> int:
        raise AssertionError("counted with the tokenizer")

    monkeypatch.setattr(budget, "_tokens", no_tokenizer)
    kept = fit_graph(entities, relations, budget=10_000)
    assert kept == (tuple(entities), tuple(relations))
    assert total < 10_000


def test_a_context_past_its_budget_is_cut_by_exact_counts() -> None:
    entities, relations = graph(30)
    costs = sorted(
        [(e.score, 1, entity_tokens(e.entity)) for e in entities]
        + [(r.score, 0, relation_tokens(r.relation)) for r in relations],
        reverse=True,
    )
    limit = sum(cost for _, _, cost in costs[:17])  # exactly 17 items fit, by tokens
    kept_entities, kept_relations = fit_graph(entities, relations, budget=limit)
    assert len(kept_entities) + len(kept_relations) == 17
