"""Malformed markdown in evidence: the extractive answer's sentence shaping neither fails nor
shows markup as an answer (core/answer/extractive.py)."""

from __future__ import annotations

from core.answer.extractive import _sentences


def test_ragged_and_headless_tables_are_shown_as_written() -> None:
    text = (
        "| Component | Owner |\n|---|---|\n"
        "| lumen-mailer | Aisha Okafor | extra cell |\n"  # more cells than the header
        "| lone |\n"  # fewer
        "|---|---|\n"  # a rule with no header above it
        "|||\n"
    )
    # A row that does not fit its header is shown and scored as written, not mislabelled.
    assert _sentences(text) == ["| lumen-mailer | Aisha Okafor | extra cell |"]


def test_a_chain_of_questions_does_not_join_into_one_unbounded_line() -> None:
    text = "Why? How? What?\n" * 50 + "Who?"
    sentences = _sentences(text)
    assert len(sentences) > 1 and all(len(s) <= 400 for s in sentences)
    assert sentences[-1].endswith("Who?")
    assert _sentences("") == [] and _sentences("|\n|\n") == []


def test_a_question_stuffed_with_names_bounds_the_rows_it_matches() -> None:
    from core.answer.extractive import asked_of, named_and_asked
    from core.language.rows import MAX_PHRASE_WORDS, MAX_PHRASES

    question = " ".join(f"svc-{i}" for i in range(500)) + " owner?"
    names, asked = named_and_asked(question)
    assert len(names) == 500 and asked == ["owner"]
    pattern = asked_of(names, asked)
    # At most MAX_PHRASES anchors of at most MAX_PHRASE_WORDS words each, whatever was asked.
    assert len(pattern.anchors) <= MAX_PHRASES
    assert all(len(anchor) <= MAX_PHRASE_WORDS for anchor in pattern.anchors)
    row = "| Component | Owner |\n|---|---|\n| svc-3 | Aisha Okafor |\n"
    assert pattern.anchored(row) == ["| component | owner |\n| svc-3 | aisha okafor |"]
    # Only markup, or a name with nothing asked of it: no pattern to hold.
    assert named_and_asked("||| ??? ---") == ([], [])
    assert named_and_asked("svc-3?")[1] == []


def test_a_row_with_empty_cells_is_one_line_and_leads_nothing_in() -> None:
    # Rows are shown with their column names; an empty cell is left out, and a row whose last
    # cell ends like a lead-in ("?", ":") does not swallow the row after it.
    text = (
        "| Component | Owner | Backup |\n|---|---|---|\n"
        "| loom-ingest | Oluwaseun Adeyemi | |\n"
        "| warehouse-loader | Kaito Nakamura | who? |\n"
        "| schema-keeper | Priya Raghunathan | Sven Lindqvist |\n"
    )
    assert _sentences(text) == [
        "Component: loom-ingest; Owner: Oluwaseun Adeyemi",
        "Component: warehouse-loader; Owner: Kaito Nakamura; Backup: who?",
        "Component: schema-keeper; Owner: Priya Raghunathan; Backup: Sven Lindqvist",
    ]


def test_hostile_lines_for_what_a_question_asks_for_score_in_bounds() -> None:
    import numpy as np

    from core.answer.extractive import _overlap, _spelled_out
    from core.models import ChunkRecord
    from core.retrieve.context import ScoredChunk

    run = "Persistent Volume " * 5000  # capitalized words with no end, initials never "PVC"
    assert _spelled_out(["pvc"], run) == run
    assert _spelled_out(["pvc"], "`PersistentVolumeClaim`") == "`pvc PersistentVolumeClaim`"
    lines = [
        run,
        "9" * 5000 + " s",  # a duration of a number with no end
        "Zq Xv " * 2000,  # rare capitalized pairs without end, as many "people"
        "谁谁谁" * 1000,
        "",
    ]
    evidence = [ScoredChunk(ChunkRecord("c", "d.md", 0, "\n".join(lines), heading="PVC"), 0.5)]
    candidates = [(1, i, line) for i, line in enumerate(lines)]
    question = "How long does the PVC last, and who owns the PVC?"
    shares = _overlap(question, evidence, candidates, np.zeros(len(lines), dtype=bool))
    assert shares.shape == (len(lines),)
    assert np.all(np.isfinite(shares)) and np.all((shares >= 0) & (shares <= 1))
