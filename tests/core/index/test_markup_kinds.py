"""Entity types and relation names read from a chunk's markup (core/index/markup_kinds.py),
through the NLP extractor that uses them."""

from __future__ import annotations

from core.index.markup_kinds import markup_types, table_rows, term_type
from core.index.nlp_extract import NLPExtractor
from core.models import ChunkRecord, normalise_name

RUNBOOK = """\
If the canary misbehaves, run `lumenctl deploy abort` and check `deployment/lumen`. The alert
`LumenConsumerLagHigh` fires first. Set `LUMEN_LOG_LEVEL=debug` only in staging; the guide is
`deploy-guide.zh.md`. The gateway answers `POST /v1/events`.

| Component | Owner | Port |
|---|---|---|
| Argo CD | Priya Natarajan | 8443 |
| SMTP relay | Aisha Okafor | 587 |
"""


def test_code_spans_say_what_a_term_is() -> None:
    typed = markup_types(RUNBOOK)
    assert typed["lumenctl"] == typed["lumenctl deploy abort"] == "command"
    assert typed["deployment/lumen"] == "code"  # a command's argument that looks like code
    assert "deploy" not in typed and "abort" not in typed  # plain words of a command
    assert typed["lumenconsumerlaghigh"] == "code"
    assert typed["lumen_log_level"] == "config key"
    assert typed["deploy-guide.zh.md"] == "file"
    assert "post" not in typed  # an HTTP method in capitals is no program


def test_a_heading_names_a_topic_and_the_rest_stay_terms() -> None:
    assert term_type("canary", {}, "Runbook > Canary stage") == "topic"
    assert term_type("gateway", {}, "Runbook > Canary stage") == "term"
    assert term_type("lumenctl", {"lumenctl": "command"}, "lumenctl") == "command"


def test_table_rows_carry_their_headers() -> None:
    rows = table_rows(RUNBOOK)
    assert [r.cells for r in rows] == [
        ("Argo CD", "Priya Natarajan", "8443"),
        ("SMTP relay", "Aisha Okafor", "587"),
    ]
    assert {r.headers for r in rows} == {("Component", "Owner", "Port")}
    # A table whose header row is in another chunk gives no rows.
    assert table_rows("| lumen-gateway | Priya Natarajan |\n| a | b |\n") == []


async def test_the_nlp_extractor_types_terms_and_names_table_relations() -> None:
    chunk = ChunkRecord(
        id="c1", source="runbook.md", ordinal=0, text=RUNBOOK, heading="Runbook > Canary"
    )
    result = await NLPExtractor(max_terms=20).extract(chunk)
    types = {e.name: e.type for e in result.entities}
    assert types["lumenctl deploy abort"] == "command"
    assert types["LUMEN_LOG_LEVEL"] == "config key"
    assert types["canary misbehaves"] == "term"  # the heading names "canary", not this
    assert types["LumenConsumerLagHigh"] == "code"
    assert types["Priya Natarajan"] == "term"  # a capitalised name tells no type by itself
    named = {
        (normalise_name(r.source), normalise_name(r.target)): r.keywords
        for r in result.relations
        if r.keywords
    }
    # The row's first cell to each other cell, named by the column's header.
    assert named == {
        ("argo cd", "priya natarajan"): "owner",
        ("smtp relay", "aisha okafor"): "owner",
    }
    # Two terms of one sentence stay related without a name.
    assert any(not r.keywords for r in result.relations)
