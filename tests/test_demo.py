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
