"""What both chat adapters share: Markdown to mrkdwn/HTML, citation lists, splitting long text,
and the throttled streaming message."""

from __future__ import annotations

import asyncio

import pytest

from adapters.chat.common import RetryLater, StreamingMessage
from adapters.chat.markup import (
    slack_citations,
    split_text,
    telegram_citations,
    to_slack_mrkdwn,
    to_telegram_html,
)
from core.answer.events import Citation
from core.answer.extractive import EvidenceSentence
from core.answer.shaped import shape, with_second_part
from core.models import ChunkRecord
from core.retrieve.context import ScoredChunk


def test_slack_mrkdwn_escapes_and_converts() -> None:
    text = "## Steps\nRun **undo** & see [docs](https://x.test/a?b=1) <not a tag>"
    assert to_slack_mrkdwn(text) == (
        "*Steps*\nRun *undo* &amp; see <https://x.test/a?b=1|docs> &lt;not a tag&gt;"
    )


def test_telegram_html_escapes_and_converts_only_complete_constructs() -> None:
    assert to_telegram_html("**bold** `a<b` [d](https://x.test)") == (
        '<b>bold</b> <code>a&lt;b</code> <a href="https://x.test">d</a>'
    )
    # Half-streamed Markdown stays literal (and valid HTML).
    assert to_telegram_html("Run **kubectl roll") == "Run **kubectl roll"


def test_citations_link_urls_and_name_files() -> None:
    citations = (
        Citation(1, "faq.md", "Disk full", "…"),
        Citation(2, "https://wiki.test/x", "Wiki | page", "…"),
        Citation(3, "notes.md", "", "…"),
    )
    assert slack_citations(citations) == (
        "[1] faq.md — Disk full\n[2] <https://wiki.test/x|Wiki ¦ page>\n[3] notes.md"
    )
    assert telegram_citations(citations) == (
        '[1] faq.md — Disk full\n[2] <a href="https://wiki.test/x">Wiki | page</a>\n[3] notes.md'
    )


def test_split_text_prefers_paragraphs_and_respects_the_limit() -> None:
    text = "a" * 60 + "\n\n" + "b" * 60 + "\n" + "c" * 150
    pieces = split_text(text, 100)
    assert all(len(p) <= 100 for p in pieces)
    assert pieces[0] == "a" * 60
    assert "".join(pieces).replace("\n", "") == text.replace("\n", "")


class Surface:
    """A fake platform message recording writes; optionally refusing some with RetryLater."""

    def __init__(self, refusals: int = 0, wait: float = 0.05) -> None:
        self.writes: list[tuple[str, str, bool]] = []
        self.refusals = refusals
        self.wait = wait

    async def _write(self, kind: str, text: str, final: bool) -> None:
        if self.refusals:
            self.refusals -= 1
            raise RetryLater(self.wait)
        self.writes.append((kind, text, final))

    async def create(self, text: str, final: bool) -> None:
        await self._write("create", text, final)

    async def edit(self, text: str, final: bool) -> None:
        await self._write("edit", text, final)


async def test_stream_shows_newest_text_and_marks_the_final_version() -> None:
    surface = Surface()
    stream = StreamingMessage(surface.create, surface.edit, interval=0.05)
    for i in range(10):
        stream.update(f"v{i}")
        await asyncio.sleep(0.01)
    await stream.finish("v9")  # the same text as last shown: still written once as final
    assert surface.writes[0] == ("create", "v0", False)
    assert surface.writes[-1] == ("edit", "v9", True)
    assert len(surface.writes) < 10, "intermediate versions were skipped, not queued"


async def test_final_version_survives_a_few_refusals_and_fails_after_too_many() -> None:
    patient = Surface(refusals=2, wait=0.01)
    stream = StreamingMessage(patient.create, patient.edit, interval=0.01, max_retries=3)
    await stream.finish("answer")
    assert patient.writes == [("create", "answer", True)]

    hopeless = Surface(refusals=10, wait=0.01)
    stream = StreamingMessage(hopeless.create, hopeless.edit, interval=0.01, max_retries=2)
    with pytest.raises(RetryLater):
        await stream.finish("answer")


async def test_closing_before_any_text_writes_nothing() -> None:
    surface = Surface()
    stream = StreamingMessage(surface.create, surface.edit, interval=0.01)
    stream.update("   ")
    await stream.aclose()
    assert surface.writes == [] and not stream.created


ANSWER_WITH_CODE = (
    "Restart the replica:\n\n```shell\n# stop it first\npatronictl restart main **x** <y>\n```\n\n"
    "- one **step**\n- two\n\n[1] runbooks/pg.md › Mitigation"
)


def test_a_fenced_code_block_is_code_and_nothing_inside_it_is_converted() -> None:
    slack = to_slack_mrkdwn(ANSWER_WITH_CODE)
    # mrkdwn has no language tag; a shell comment is no heading, ** no bold; < still escaped
    assert "```\n# stop it first\npatronictl restart main **x** &lt;y&gt;\n```" in slack
    assert "• one *step*\n• two" in slack
    telegram = to_telegram_html(ANSWER_WITH_CODE)
    assert (
        '<pre><code class="language-shell"># stop it first\n'
        "patronictl restart main **x** &lt;y&gt;</code></pre>"
    ) in telegram
    assert "• one <b>step</b>\n• two" in telegram
    assert telegram.endswith("[1] runbooks/pg.md › Mitigation")


def test_a_half_streamed_code_block_stays_literal() -> None:
    assert to_telegram_html("Run:\n```shell\npatronictl") == "Run:\n```shell\npatronictl"


def test_a_shaped_answer_keeps_its_command_block_list_and_two_sources_in_both_chats() -> None:
    runbook = ScoredChunk(
        ChunkRecord(
            "r#0",
            "runbooks/replica_lag.md",
            0,
            "If the lag keeps growing, restart the replica:\n\n"
            "```shell\npatronictl restart main pg-2 --force\n```\n\n"
            "Then watch it catch up:\n\n- Open the lag dashboard.\n- Wait <5 minutes.\n",
            "Replica lag > Mitigation",
        ),
        0.5,
    )
    limits = ScoredChunk(
        ChunkRecord("l#0", "limits.md", 0, "Lag alerts fire above 30 seconds.\n", "Alerts"), 0.4
    )
    lines = [EvidenceSentence(1, 0, "If the lag keeps growing, restart the replica:", 0.9)]
    shaped = shape(
        "how do I fix lag, and when does it alert?",
        lines,
        [runbook, limits],
        [runbook, limits],
        language="en",
    )
    assert shaped is not None
    second = [EvidenceSentence(2, 1, "Lag alerts fire above 30 seconds.", 0.8)]
    text = with_second_part(
        shaped, "when does it alert", second, [runbook, limits], [runbook, limits]
    ).text

    slack = to_slack_mrkdwn(text)
    assert "```\npatronictl restart main pg-2 --force\n```" in slack  # whole, no "shell" line
    assert "• Open the lag dashboard.\n• Wait &lt;5 minutes." in slack
    assert slack.endswith(
        "Lag alerts fire above 30 seconds. [2]\n\n"
        "[1] runbooks/replica_lag.md › Replica lag › Mitigation\n[2] limits.md › Alerts"
    )
    telegram = to_telegram_html(text)
    assert (
        '<pre><code class="language-shell">patronictl restart main pg-2 --force</code></pre>'
        in telegram
    )
    assert "• Open the lag dashboard.\n• Wait &lt;5 minutes." in telegram
    assert telegram.endswith(
        "[1] runbooks/replica_lag.md › Replica lag › Mitigation\n[2] limits.md › Alerts"
    )


def test_a_code_block_under_a_list_item_of_a_shaped_answer_is_code_in_both_chats() -> None:
    faq = ScoredChunk(
        ChunkRecord(
            "f#0",
            "docs/en/faq.md",
            0,
            "- Under Windows, visualizing fails with the following error:\n"
            "  ```\n  Failed to load library, error code: 193\n  ```\n"
            "  **Cause:** two dlls are on the system path:\n"
            "  ```\n  C:\\Windows\\System32\\**onnxruntime**.dll\n  # <the system one>\n  ```\n"
            "  1. Copy the dll next to the ops dll.\n",
            "FAQ > ONNX Runtime",
        ),
        0.5,
    )
    shaped = shape(
        "sdk inference fails: 'Failed to load library, error code: 193'. how to fix?",
        [EvidenceSentence(1, 0, "Failed to load library, error code: 193", 0.9)],
        [faq],
        [faq],
        language="en",
    )
    assert shaped is not None
    block = "C:\\Windows\\System32\\**onnxruntime**.dll\n# &lt;the system one&gt;"
    slack = to_slack_mrkdwn(shaped.text)
    # The block, dedented from its item, is code: ** stays, # is no heading.
    assert f"```\n{block}\n```" in slack
    assert "*Cause:* two dlls" in slack and "1. Copy the dll next to the ops dll." in slack
    telegram = to_telegram_html(shaped.text)
    assert f"<pre>{block}</pre>" in telegram
    assert "<b>Cause:</b> two dlls" in telegram
    assert "```" not in telegram
    assert telegram.endswith("[1] docs/en/faq.md › FAQ › ONNX Runtime")
