"""`tacit demo` on the embedded defaults: answers cite the expected files; chatter is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.demo import demo_questions


def test_demo_answers_and_refuses(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--home", str(home), "demo", "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["index"]["documents_indexed"] >= 8
    assert report["index"]["documents_failed"] == 0

    expected = demo_questions()
    answers = {a["question"]: a for a in report["answers"]}
    for item in expected["answerable"]:
        answer = answers[item["question"]]
        assert not answer["refused"], answer
        cited = [c["source"].rsplit("/", 1)[-1] for c in answer["citations"]]
        assert item["expect_source"] in cited, (item["question"], cited)
    for text in expected["refused"]:
        assert answers[text]["refused"], answers[text]

    # A second run finds everything unchanged.
    again = CliRunner().invoke(app, ["--home", str(home), "demo", "--json"])
    rerun = json.loads(again.stdout.strip().splitlines()[-1])
    assert rerun["index"]["documents_indexed"] == 0


def test_the_demo_is_quiet_and_says_why_in_plain_words(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # It once printed "… checking the knowledge base…" once per question and the coverage
    # rule's jargon ("0% in one passage (need 70%)") for every decline.
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--home", str(home), "demo"])
    assert result.exit_code == 0, result.stdout + result.stderr
    shown = result.stdout + result.stderr
    assert "checking the knowledge base" not in shown
    assert "(need " not in shown and "similarity" not in shown
    declined = len(demo_questions()["refused"])
    assert shown.count("(not covered by the knowledge base: Tacit would stay silent") == declined

    traced = CliRunner().invoke(app, ["--home", str(home), "demo", "--trace"])
    assert traced.exit_code == 0, traced.stdout + traced.stderr
    assert "checking the knowledge base" in traced.stderr
    assert "(need " in traced.stderr  # the gate's measured reasons, for whoever asks
