"""`tacit gate fit|eval` and the gate in `tacit ask`, driven as a user drives them."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.language.wording import NOT_COVERED
from tests.conftest import last_json
from tests.core.gate.test_gate import BAD, DOCS, GOOD


@pytest.fixture
def labelled(tmp_path: Path) -> tuple[Path, Path]:
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(GOOD) + "\n\n", encoding="utf-8")
    bad.write_text("\n".join(BAD) + "\n", encoding="utf-8")
    return good, bad


@pytest.fixture
def indexed(cli, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    code, out, _ = cli("index", str(root), "--kb", "ops", "--json")
    assert code == 0, out


def test_fit_eval_and_ask_through_the_gate(cli, indexed, labelled) -> None:
    good, bad = labelled
    code, out, _ = cli("gate", "eval", "--good", str(good), "--bad", str(bad), "--kb", "ops")
    assert code == 1 and "no fitted gate" in out + _

    code, out, _ = cli(
        "gate",
        "fit",
        "--good",
        str(good),
        "--bad",
        str(bad),
        "--kb",
        "ops",
        "--folds",
        "3",
        "--json",
    )
    assert code == 0, out
    fit = last_json(out)
    assert (fit["good"], fit["bad"]) == (len(GOOD), len(BAD))
    for key in ("precision", "recall", "f1", "threshold"):
        assert isinstance(fit[key], float)

    code, out, _ = cli(
        "gate",
        "eval",
        "--good",
        str(good),
        "--bad",
        str(bad),
        "--kb",
        "ops",
        "--json",
        "--errors",
    )
    assert code == 0, out
    stored = last_json(out)
    assert stored["mode"] == "stored fit" and stored["threshold"] == fit["threshold"]
    assert stored["fitted_examples_seen"] == len(GOOD) + len(BAD)
    c = stored["confusion"]
    assert c["tp"] + c["fn"] == len(GOOD) and c["fp"] + c["tn"] == len(BAD)
    assert len(stored["errors"]) == c["fp"] + c["fn"]

    code, out, _ = cli(
        "gate",
        "eval",
        "--good",
        str(good),
        "--bad",
        str(bad),
        "--kb",
        "ops",
        "--folds",
        "3",
    )
    assert code == 0, out
    assert "3-fold cross-validation" in out and "baseline" in out

    code, out, _ = cli(
        "ask", "How long does the session cache keep entries?", "--kb", "ops", "--json"
    )
    assert code == 0, out
    answered = last_json(out)
    assert answered["refused"] is False
    assert answered["gate"]["action"] == "answer"
    assert answered["gate"]["scores"]["probability"] >= answered["gate"]["scores"]["threshold"]

    code, out, _ = cli("ask", "lol my cat is so fat haha", "--kb", "ops", "--json")
    assert code == 0, out
    refused = last_json(out)
    assert refused["refused"] is True and refused["mode"] == "refused"
    assert refused["answer"] == NOT_COVERED["en"]
    assert refused["citations"] == []
    assert (refused["gate"]["action"], refused["gate"]["stage"]) == ("decline", "refusal")

    code, out, err = cli("ask", "lol my cat is so fat haha", "--kb", "ops")
    assert code == 0 and NOT_COVERED["en"] in out and "gate: refusal" in err


def test_gate_commands_report_bad_input_without_tracebacks(cli, labelled, tmp_path) -> None:
    good, bad = labelled
    code, out, _ = cli(
        "gate", "fit", "--good", str(good), "--bad", str(bad), "--kb", "empty", "--json"
    )
    assert code == 1
    assert "is empty" in last_json(out)["error"]
    code, out, _ = cli(
        "gate", "fit", "--good", str(tmp_path / "nope.txt"), "--bad", str(bad), "--json"
    )
    assert code == 1 and "no such file" in last_json(out)["error"]
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    code, out, _ = cli("gate", "eval", "--good", str(blank), "--bad", str(bad), "--json")
    assert code == 1 and "has no messages" in last_json(out)["error"]
    assert "Traceback" not in out


def test_fit_from_feedback_merges_the_chats_labels(cli, indexed, labelled, home: Path) -> None:
    import asyncio

    from adapters.state import RedisStateStore
    from bot.gate_labels import GateLabels

    good, bad = labelled
    code, out, err = cli("gate", "fit", "--kb", "ops")
    assert code != 0 and "nothing to fit on" in out + err
    code, out, _ = cli(
        "gate", "fit", "--good", str(good), "--bad", str(bad), "--kb", "ops", "--folds", "3"
    )
    assert code == 0, out

    chat = {
        "How do I write a Python decorator?": "silent",
        "How do I center a div in CSS?": "silent",
        "What's the difference between TCP and UDP?": "silent",
        "the gateway port for metrics?": "answer",
    }

    async def label() -> None:
        store = await RedisStateStore.embedded(home / "state.rdb")
        try:
            labels = GateLabels(store)
            for n, (text, kind) in enumerate(chat.items()):
                await labels.mark(
                    kb="ops",
                    trace_id=f"t{n}",
                    text=text,
                    label=kind,  # type: ignore[arg-type]
                    strength="admin",
                    by="U",
                )
        finally:
            await store.aclose()

    asyncio.run(label())
    # no --good/--bad: the examples of the last file fit are merged with the chat's labels
    code, out, _ = cli("gate", "fit", "--from-feedback", "--kb", "ops", "--folds", "3", "--json")
    assert code == 0, out
    report = last_json(out)
    assert report["from_chat"] == len(chat)
    assert report["examples"] == len(GOOD) + len(BAD) + len(chat)
    assert report["stored"] is True
    for when in ("before", "after"):
        assert set(report[when]) >= {"precision", "recall", "f1"}
