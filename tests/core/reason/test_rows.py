"""A plan step's passages, those holding its subject and predicate in one row or line first
(core/language/rows.py)."""

from __future__ import annotations

import pytest

from core.language.rows import StepPattern, content_words, rows_first

TABLE = (
    "| Component | Port | Purpose |\n"
    "|:---|---:|---|\n"
    "| lumen-gateway | 8443 | HTTPS ingest API |\n"
    "| lumen-dispatcher | 9102 | Prometheus metrics |"
)


def held(subject: str, predicate: str, text: str) -> bool:
    return StepPattern.of([subject], [predicate]).held_together(text)


@pytest.mark.parametrize("predicate", ["owner", "owners", "owns", "owned", "ownership", "OWNER"])
def test_an_owner_is_held_however_the_relation_is_written(predicate: str) -> None:
    assert held(
        "lumen-dispatcher",
        predicate,
        "| Component | Owner |\n|---|---|\n| lumen-dispatcher | Tomás |",
    )
    assert held(
        "Payments Platform team", predicate, "Lumen is owned by the payments platform team."
    )


def test_a_table_row_is_read_with_its_header_and_only_its_own_table() -> None:
    assert held("lumen-dispatcher", "port", TABLE)
    assert held("LUMEN-GATEWAY", "Purpose", TABLE)  # case folded
    # The header carries no further than its table: a line after it is read alone.
    assert not held("lumen-mailer", "port", TABLE + "\n\nlumen-mailer sends email.")
    assert held("lumen-mailer", "port", TABLE + "\n\nlumen-mailer uses port 587.")


def test_subject_and_predicate_must_share_a_row_or_line() -> None:
    text = "lumen-dispatcher delivers notifications.\nThe owner reviews every change."
    assert not held("lumen-dispatcher", "owner", text)
    # A table row does not lend its subject to another row.
    assert not held("lumen-mailer", "port", TABLE)


def test_an_identifier_matches_whole_and_offers_its_parts() -> None:
    assert held("dispatcher", "port", TABLE)  # a part of lumen-dispatcher
    assert not held(
        "lumen-dispatcher", "port", "| Name | Port |\n|---|---|\n| lumen-dispatcher-canary | 1 |"
    )
    assert held(
        "LUMEN_SPOOL_DIR", "default", "- `LUMEN_SPOOL_DIR` — spool directory, default `/var/lib`."
    )
    assert not held(
        "LUMEN_SPOOL", "default", "- `LUMEN_SPOOL_DIR` — spool directory, default `/var/lib`."
    )


def test_every_subject_word_and_half_the_predicate_words_are_needed() -> None:
    row = (
        "| Component | Replicas (prod) | Memory request / limit |\n|---|---|---|\n"
        "| lumen-mailer | 2 | 256Mi / 512Mi |"
    )
    assert held("lumen-mailer", "number of replicas", row)  # "of" says nothing; "replicas" is half
    assert held("lumen-mailer", "memory limit", row)
    assert not held("lumen-mailer", "disk size limit", row)  # one of three
    assert held("the ledger database", "owner", "| lumen-ledger | database | Mei Lin | owner |")
    assert not held("the ledger database", "owner", "| lumen-ledger | Mei Lin | owner |")


def test_chinese_words_match_as_written_or_by_a_word_inside_them() -> None:
    assert held(
        "lumen-dispatcher", "负责人", "| 组件 | 负责人 |\n|---|---|\n| lumen-dispatcher | 费雷拉 |"
    )
    assert held("lumen-dispatcher", "负责人", "lumen-dispatcher 由费雷拉负责。")
    assert not held(
        "lumen-dispatcher",
        "负责人",
        "| Component | Owner |\n|---|---|\n| lumen-dispatcher | Tomás |",
    )


def test_rows_first_lifts_stably_and_keeps_the_first() -> None:
    texts = [
        "Owner means the reviewer.",  # the retriever's best: stays first
        "lumen-dispatcher pods write a spool.",
        "| Component | Owner |\n|---|---|\n| lumen-dispatcher | Tomás |",
        "lumen-dispatcher replicas scale to 24.",
        "Tell the lumen-dispatcher owner before scaling.",
    ]
    pattern = StepPattern.of(["lumen-dispatcher"], ["owner"])
    assert rows_first(list(range(5)), texts, pattern) == [0, 2, 4, 1, 3]
    # The first item stays first even when it holds nothing and all the others do.
    assert rows_first([0, 1], ["nothing", texts[2]], pattern) == [0, 1]
    nothing = StepPattern.of(["lumen-mailer"], ["owner"])
    assert rows_first(list(range(5)), texts, nothing) == [0, 1, 2, 3, 4]


def test_rows_first_reads_the_given_entries_after_the_rows_that_hold_both() -> None:
    texts = [
        "Owner means the reviewer.",
        "lumen-dispatcher pods write a spool.",
        "| Component | Owner |\n|---|---|\n| lumen-dispatcher | Tomás |",
        "lumen-dispatcher replicas scale to 24.",
        "| 组件 | 端口 |\n|---|---|\n| lumen-dispatcher | 9102 |",
    ]
    pattern = StepPattern.of(["lumen-dispatcher"], ["owner"])
    # The entries come next, best first; one already lifted or first is not read twice.
    assert rows_first(list(range(5)), texts, pattern, then=[4, 2, 0]) == [0, 2, 4, 1, 3]
    # With a predicate no row holds (负责人 against English rows) the entries alone move up.
    chinese = StepPattern.of(["lumen-dispatcher"], ["负责人"])
    assert rows_first(list(range(5)), texts, chinese, then=[3]) == [0, 3, 1, 2, 4]


def test_anchored_units_and_content_words() -> None:
    pattern = StepPattern.of(["lumen-gateway"], [])
    text = TABLE + "\n\nThe lumen-gateway answers 202.\nKafka acknowledges the write."
    units = pattern.anchored(text)
    assert units == [
        "| component | port | purpose |\n| lumen-gateway | 8443 | https ingest api |",
        "the lumen-gateway answers 202.",
    ]
    # The subject's own words, identifiers' separators, numbers and function words are left
    # out; Chinese comes in dictionary words.
    assert content_words(units[0], leaving=["lumen-gateway"]) == [
        "component",
        "port",
        "purpose",
        "https",
        "ingest",
        "api",
    ]
    assert content_words("默认值 of the `LUMEN_SPOOL_DIR`") == ["lumen", "spool", "dir", "默认值"]


@pytest.mark.parametrize(
    ("anchors", "predicates"),
    [([], ["owner"]), (["lumen-dispatcher"], []), (["the"], ["owner"]), (["x"], ["of the"])],
)
def test_a_pattern_without_content_words_changes_nothing(
    anchors: list[str], predicates: list[str]
) -> None:
    pattern = StepPattern.of(anchors, predicates)
    texts = ["a", "| Component | Owner |\n|---|---|\n| x | the |"]
    assert not pattern.usable()
    assert rows_first(["a", "b"], texts, pattern) == ["a", "b"]
