"""The no-model answer shaped by the document (core.answer.shaped, core.answer.sections): the
answering line first, then its section's blocks whole, then `file › section`; one source,
cited [1]. Small inline documents; the lines' ranking is given (best_sentences is tested in
test_pipeline_extractive.py and test_extractive_lines.py), except where the whole path is the
point."""

from __future__ import annotations

import re

import pytest

import core.answer.shaped as shaped_module
from core.answer.extractive import EvidenceSentence, best_sentences
from core.answer.sections import blocks, link_only
from core.answer.shaped import (
    BODY_CHARS,
    candidate_sections,
    numbered,
    shape,
    with_second_part,
)
from core.models import ChunkRecord
from core.retrieve.context import ScoredChunk
from tests.fakes.hash_embedder import HashEmbedder


def chunk(source: str, heading: str, text: str, ordinal: int = 0) -> ScoredChunk:
    return ScoredChunk(ChunkRecord(f"{source}#{ordinal}", source, ordinal, text, heading), 0.5)


def ranked(*lines: tuple[int, str]) -> list[EvidenceSentence]:
    """Lines of the evidence (its chunk's number, the line), the best first."""
    return [EvidenceSentence(n, i, text, 1.0 - i / 10) for i, (n, text) in enumerate(lines)]


RUNBOOK = chunk(
    "runbooks/replica_lag.md",
    "Replica lag > Mitigation",
    "If the lag keeps growing, restart the replica:\n\n"
    "```shell\npatronictl restart main pg-2\n```\n\n"
    "Then watch it catch up:\n\n1. Open the lag dashboard.\n2. Wait five minutes.\n",
)
FAQ = chunk(
    "faq.md",
    "FAQ",
    "**How long are backups kept?**\nBackups are kept for 35 days, then deleted.\n\n"
    "**Who owns the ledger?**\nMei Lin owns it.\n",
)


def test_a_section_with_a_code_block_is_kept_whole_and_cited_as_file_and_section() -> None:
    shaped = shape(
        "how do I fix replica lag?",
        ranked((1, "If the lag keeps growing, restart the replica:")),
        [RUNBOOK],
        [RUNBOOK],
        language="en",
    )
    assert shaped is not None
    assert shaped.text == (
        "If the lag keeps growing, restart the replica:\n\n"
        "```shell\npatronictl restart main pg-2\n```\n\n"
        "Then watch it catch up:\n\n1. Open the lag dashboard.\n2. Wait five minutes.\n\n"
        "[1] runbooks/replica_lag.md › Replica lag › Mitigation"
    )
    assert shaped.chunks == (RUNBOOK,)


def test_the_first_line_holds_the_answer_and_is_not_repeated_below() -> None:
    shaped = shape(
        "how long do I wait after restarting?",
        ranked((1, "2. Wait five minutes.")),
        [RUNBOOK],
        [RUNBOOK],
        language="en",
    )
    assert shaped is not None
    lines = shaped.text.splitlines()
    # The line alone, not as the second item of a numbered list.
    assert lines[0] == "Wait five minutes. [1]"
    assert shaped.text.count("Wait five minutes") == 1
    assert "```shell\npatronictl restart main pg-2\n```" in shaped.text  # the section stays


def test_an_faq_question_gives_the_answer_under_it_not_itself() -> None:
    shaped = shape(
        "how long do we keep backups",
        ranked((1, "How long are backups kept?")),
        [FAQ],
        [FAQ],
        language="en",
    )
    assert shaped is not None
    assert shaped.text == (
        "Backups are kept for 35 days, then deleted.\n\n"
        "[1] faq.md › FAQ › How long are backups kept?"
    )  # the entry only: not the next question, nor its answer


def test_a_table_row_is_shown_with_its_header() -> None:
    owners = chunk(
        "owners.md",
        "Owners",
        "Who to call for each service:\n\n"
        "| Service | Owner |\n|---|---|\n| ledger | Mei Lin |\n| gateway | Priya Natarajan |\n",
    )
    shaped = shape(
        "who owns the gateway?",
        ranked((1, "Service: gateway; Owner: Priya Natarajan")),
        [owners],
        [owners],
        language="en",
    )
    assert shaped is not None
    first, *rest = shaped.text.splitlines()
    assert first == "Service: gateway; Owner: Priya Natarajan [1]"
    assert "- Service: ledger; Owner: Mei Lin" in rest  # the other rows, named too
    assert shaped.text.count("Priya Natarajan") == 1


def test_front_matter_never_anchors_nor_shows() -> None:
    page = chunk(
        "about.md",
        "",
        "---\ntitle: Replica lag runbook\ndescription: what to do about lag\n---\n"
        "Replica lag is how far a replica is behind the primary.\n",
    )
    shaped = shape(
        "what is replica lag",
        ranked(
            (1, "title: Replica lag runbook"),
            (1, "Replica lag is how far a replica is behind the primary."),
        ),
        [page],
        [page],
        language="en",
    )
    assert shaped is not None
    assert shaped.text.startswith("Replica lag is how far a replica is behind the primary.")
    assert "---" not in shaped.text and "description:" not in shaped.text


def test_sample_output_is_shown_only_when_asked_for() -> None:
    page = chunk(
        "patroni.md",
        "Checking the cluster",
        "List the members:\n\n```shell\npatronictl list\n```\n\nwhich prints:\n\n"
        "```\n+--------+--------+\n| Member | Role   |\n+--------+--------+\n"
        "| pg-1   | Leader |\n+--------+--------+\n```\n",
    )
    for question, shown in (
        ("how do I list the members", False),
        ("what does the output look like", True),
    ):
        shaped = shape(question, ranked((1, "List the members:")), [page], [page], language="en")
        assert shaped is not None
        assert "patronictl list" in shaped.text
        assert ("| pg-1   | Leader |" in shaped.text) is shown


def test_only_one_source_is_cited_and_marks_follow_a_contexts_numbering() -> None:
    other = chunk("other.md", "Elsewhere", "Backups are also mentioned here.")
    shaped = shape(
        "how long are backups kept",
        ranked(
            (2, "Backups are kept for 35 days, then deleted."),
            (1, "Backups are also mentioned here."),
        ),
        [other, FAQ],
        [other, FAQ],
        language="en",
    )
    assert shaped is not None
    assert set(re.findall(r"\[(\d+)\]", shaped.text)) == {"1"}  # numbered from 1
    assert shaped.chunks == (FAQ,)
    assert "also mentioned" not in shaped.text
    # Where a context keeps its own numbering (a model's failed round), the mark is its place.
    assert "[2] faq.md › FAQ" in numbered(shaped, lambda c: [other, FAQ].index(c) + 1)


def test_a_chinese_question_on_an_english_section_says_what_follows_in_chinese() -> None:
    shaped = shape(
        "复制延迟怎么处理？",
        ranked((1, "If the lag keeps growing, restart the replica:")),
        [RUNBOOK],
        [RUNBOOK],
        language="zh",
    )
    assert shaped is not None
    first, second = shaped.text.split("\n\n")[:2]
    assert first == (
        "以下是英文文档 runbooks/replica_lag.md › Replica lag › Mitigation 中的相关内容："
    )
    assert second == "If the lag keeps growing, restart the replica:"


def test_a_long_section_is_cut_between_blocks_never_inside_a_fence() -> None:
    paragraphs = [f"Step {i} of the long procedure says something useful. " * 4 for i in range(12)]
    code = "```bash\n" + "\n".join(f"echo line {i}" for i in range(8)) + "\n```"
    text = "\n\n".join([*paragraphs[:3], "Run this:", code, *paragraphs[3:]])
    page = chunk("long.md", "Procedure", text)
    shaped = shape(
        "what does the procedure run",
        ranked((1, "Run this:")),
        [page],
        [page],
        language="en",
    )
    assert shaped is not None
    assert shaped.text.startswith("Run this:\n\n```bash\necho line 0")
    assert shaped.text.count("```") % 2 == 0 and "echo line 7\n```" in shaped.text
    body = shaped.text.rsplit("\n\n[1]", 1)[0]
    assert len(body) <= BODY_CHARS + 400  # bounded: the last block that fits, no more
    assert body.endswith("useful.")  # a whole paragraph, not a cut one


def test_a_section_split_over_two_chunks_is_read_whole_without_the_overlap_twice() -> None:
    first = chunk("r.md", "Restart", "To restart a member:\n\n1. Stop it.\n2. Start it.", 0)
    second = chunk(
        "r.md", "Restart", "2. Start it.\n\nThen check its state with `patronictl list`.", 1
    )
    elsewhere = chunk("x.md", "Other", "Unrelated text about restarts.", 0)
    shaped = shape(
        "how do I restart a member",
        ranked((1, "To restart a member:")),
        [first],
        [second, elsewhere, first],  # the pool in retrieval order
        language="en",
    )
    assert shaped is not None
    assert "Then check its state with `patronictl list`." in shaped.text
    assert "Unrelated" not in shaped.text


def test_blocks_keep_lists_and_code_whole() -> None:
    text = (
        "1. Update the incident.\n    * Set the final severity.\n    * Resolve it.\n\n"
        "1. Write the postmortem.\n\n```shell\npatronictl list\n"
    )
    found = blocks(text)
    assert [b.kind for b in found] == ["list", "code"]
    assert len(found[0].items) == 2 and found[0].items[0][2].strip() == "* Resolve it."
    assert found[1].lines[-1] == "```"  # an unclosed fence is closed where the text ends


def test_a_code_blocks_indentation_is_kept_and_a_nested_one_is_dedented_by_its_fence() -> None:
    yaml = "```yaml\nqueue_config:\n  [ max_shards: <int> | default = 50 ]\n```\n"
    (block,) = blocks(yaml)
    assert block.lines[2] == "  [ max_shards: <int> | default = 50 ]"  # YAML's meaning
    indented = "Set the key:\n\n    ```yaml\n    data:\n      key: value\n    ```\n"
    code = blocks(indented)[1]
    assert code.lines == ["```yaml", "data:", "  key: value", "```"]


def test_a_table_of_contents_line_is_about_another_page() -> None:
    assert link_only("* [Severity Levels](before/severity_levels.md) - _What is a SEV-1?_")
    assert not link_only("Page the IC with `!ic page` ([more](../roles.md)).")


async def test_the_whole_path_from_scored_lines_to_a_shaped_answer() -> None:
    evidence = [RUNBOOK, FAQ]
    lines = await best_sentences("How long are backups kept?", evidence, HashEmbedder(), count=12)
    shaped = shape("How long are backups kept?", lines, evidence, evidence, language="en")
    assert shaped is not None
    assert shaped.text.splitlines()[0].startswith("Backups are kept for 35 days")
    assert shaped.text.endswith("[1] faq.md › FAQ › How long are backups kept?")


def test_without_a_section_model_the_section_most_of_the_best_lines_fall_in_is_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The votes decide when the model's file cannot be read (core.answer.section_model).
    monkeypatch.setattr(shaped_module, "shipped_model", lambda: None)
    glossary = chunk(
        "glossary.md",
        "Glossary",
        "Incident Commander: the person who leads an incident.\n\n"
        "Scribe: the person who writes the timeline.\n",
    )
    role = chunk(
        "roles/incident_commander.md",
        "Incident Commander > Duties",
        "The Incident Commander drives the incident to resolution:\n\n"
        "1. Declare the severity.\n2. Delegate the investigation.\n3. Decide when it is over.\n",
    )
    lines = [
        EvidenceSentence(1, 0, "Incident Commander: the person who leads an incident.", 0.80),
        EvidenceSentence(2, 2, "The Incident Commander drives the incident to resolution:", 0.78),
        EvidenceSentence(2, 3, "2. Delegate the investigation.", 0.74),
        EvidenceSentence(2, 4, "3. Decide when it is over.", 0.72),
        EvidenceSentence(1, 1, "Scribe: the person who writes the timeline.", 0.60),
    ]
    shaped = shape(
        "what does the incident commander do",
        lines,
        [glossary, role],
        [glossary, role],
        language="en",
    )
    assert shaped is not None
    assert shaped.chunks == (role,)
    assert "1. Declare the severity.\n2. Delegate the investigation." in shaped.text
    assert "glossary" not in shaped.text
    assert shaped.text.endswith("[1] roles/incident_commander.md › Incident Commander › Duties")
    # A line votes its margin over the weakest ranked: one strong line outweighs several
    # barely ranked ones.
    lines = [
        EvidenceSentence(2, 0, "Backups are kept for 35 days, then deleted.", 0.90),
        EvidenceSentence(1, 1, "If the lag keeps growing, restart the replica:", 0.52),
        EvidenceSentence(1, 2, "Then watch it catch up:", 0.51),
        EvidenceSentence(1, 3, "Wait five minutes.", 0.50),
    ]
    shaped = shape(
        "how long are backups kept", lines, [RUNBOOK, FAQ], [RUNBOOK, FAQ], language="en"
    )
    assert shaped is not None
    assert shaped.chunks == (FAQ,)


PROCESS = chunk(
    "after/post_mortem_process.md",
    "Scheduling",
    "Schedule the postmortem meeting within 3 calendar days of the incident.\n",
)
TEMPLATE = chunk(
    "after/post_mortem_template.md",
    "Action items",
    "Each follow-up ticket gets two tags:\n\n- `sev1_YYYYMMDD`\n- `sev1`\n",
)


def test_a_second_part_answered_in_another_section_is_cited_as_a_second_source() -> None:
    evidence = [TEMPLATE, PROCESS]
    shaped = shape(
        "by when is the meeting, and what tags do the tickets need?",
        ranked((1, "Each follow-up ticket gets two tags:")),
        evidence,
        evidence,
        language="en",
    )
    assert shaped is not None
    both = with_second_part(
        shaped,
        "by when is the meeting",
        ranked((2, "Schedule the postmortem meeting within 3 calendar days of the incident.")),
        evidence,
        evidence,
    )
    assert both.chunks == (TEMPLATE, PROCESS)
    assert both.text == (
        "Each follow-up ticket gets two tags:\n\n- `sev1_YYYYMMDD`\n- `sev1` [1]\n\n"
        "Schedule the postmortem meeting within 3 calendar days of the incident. [2]\n\n"
        "[1] after/post_mortem_template.md › Action items\n"
        "[2] after/post_mortem_process.md › Scheduling"
    )
    # A part whose best line stands in the section already cited adds nothing.
    same = ranked((1, "Each follow-up ticket gets two tags:"))
    assert with_second_part(shaped, "what tags", same, evidence, evidence) is shaped


def test_a_second_part_is_never_a_bare_code_block_and_never_opens_a_fence() -> None:
    metrics = chunk(
        "advance/metrics.md",
        "Usage",
        "```bash\nlmdeploy serve proxy --server-port 8000\n```\n",
    )
    evidence = [TEMPLATE, metrics]
    shaped = shape(
        "what tags do the tickets need, and how do I start the proxy?",
        ranked((1, "Each follow-up ticket gets two tags:")),
        evidence,
        evidence,
        language="en",
    )
    assert shaped is not None
    # The code block's first line is its best line: which page's command it is, no line says.
    code_line = ranked((2, "lmdeploy serve proxy --server-port 8000"))
    part = "how do I start the proxy"
    assert with_second_part(shaped, part, code_line, evidence, evidence) is shaped
    assert "``` [" not in shaped.text


def test_a_line_of_links_to_other_pages_counts_for_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = chunk(
        "index.md",
        "Being On-Call",
        "If you have never been on-call before, these pages describe what it is about.\n\n"
        "* [Being On-Call](oncall/being_oncall.md) - _A guide to being on-call._\n",
    )
    chatops = chunk(
        "chatops.md",
        "Paging everyone",
        "To page every on-call at once, type `!ic page responders` in Slack.\n",
    )
    other = chunk("etiquette.md", "Calls", "Speak one at a time on the call.\n")
    lines = [
        EvidenceSentence(
            2, 0, "To page every on-call at once, type `!ic page responders` in Slack.", 0.36
        ),
        EvidenceSentence(
            1,
            1,
            "If you have never been on-call before, these pages describe what it is about.",
            0.356,
        ),
        EvidenceSentence(
            1, 2, "[Being On-Call](oncall/being_oncall.md) - _A guide to being on-call._", 0.29
        ),
        EvidenceSentence(3, 3, "Speak one at a time on the call.", 0.12),
    ]
    evidence = [index, chatops, other]
    question = "how do I page every on-call at once"
    by_section = {
        c.located.chunk.chunk.source: c.evidence
        for c in candidate_sections(question, lines, evidence, evidence)
    }
    assert by_section["index.md"].lines == 1  # its line of links is no line of the section
    assert by_section["index.md"].votes < by_section["chatops.md"].votes
    monkeypatch.setattr(shaped_module, "shipped_model", lambda: None)
    shaped = shape(question, lines, evidence, evidence, language="en")
    assert shaped is not None
    assert shaped.chunks == (chatops,)


def test_inline_html_is_shown_as_the_page_renders_it_but_code_spans_as_written() -> None:
    slide = chunk(
        "course.md",
        "Uh oh",
        '<input type="checkbox" id="022" /><label for="022">!022</label> _022. Uh oh!_\n\n'
        "Something broke: page the IC with `!ic page` and wait <5 minutes; use `<br/>` here.\n",
    )
    shaped = shape(
        "what do I do when something breaks",
        ranked(
            (
                1,
                "Something broke: page the IC with `!ic page` and wait <5 minutes; "
                "use `<br/>` here.",
            )
        ),
        [slide],
        [slide],
        language="en",
    )
    assert shaped is not None
    assert (
        "<input" not in shaped.text
        and "<label" not in shaped.text
        and "</label>" not in shaped.text
    )
    assert "!022 _022. Uh oh!_" in shaped.text
    assert "wait <5 minutes; use `<br/>` here." in shaped.text


def test_a_placeholder_written_like_a_tag_is_shown_not_taken_for_html() -> None:
    text = (
        "The token's audience is vault://<namespace>/<issuer-name> for an Issuer "
        "and vault://<issuer-name> for a ClusterIssuer.\n"
    )
    section = chunk("vault.md", "Kubernetes auth", text)
    line = text.strip()
    shaped = shape("what audience does the token need", ranked((1, line)), [section], [section],
                   language="en")  # fmt: skip
    assert shaped is not None
    assert "vault://<namespace>/<issuer-name>" in shaped.text


def test_a_second_part_whose_line_introduces_a_list_brings_the_list() -> None:
    agenda = chunk(
        "after/post_mortem_process.md",
        "Postmortem Meeting",
        "A general agenda for the meeting would be something like,\n\n"
        "1. Review the timeline.\n2. Discuss the action items.\n",
    )
    evidence = [TEMPLATE, agenda]
    shaped = shape(
        "what tags do the tickets need, and what is on the meeting's agenda?",
        ranked((1, "Each follow-up ticket gets two tags:")),
        evidence,
        evidence,
        language="en",
    )
    assert shaped is not None
    both = with_second_part(
        shaped,
        "what is on the meeting's agenda",
        ranked((2, "A general agenda for the meeting would be something like,")),
        evidence,
        evidence,
    )
    assert (
        "A general agenda for the meeting would be something like, [2]\n\n"
        "1. Review the timeline.\n2. Discuss the action items.\n\n[1] "
    ) in both.text


def test_a_name_escaped_in_markdown_is_shown_as_the_page_shows_it() -> None:
    # reST rewritten as Markdown escapes a name's underscores; a chat would show backslashes.
    hooks = chunk(
        "docs/yaml_configuration.md",
        "Callbacks",
        "-  **on\\_role\\_change**: run this script when the postgres is being promoted or "
        "demoted.\n-  **on\\_start**: run this script when the postgres starts.\n\n"
        "| Hook | Runs |\n|---|---|\n| on\\_stop | when it stops |\n",
    )
    shaped = shape(
        "is there a hook to run a script when a node is promoted?",
        ranked(
            (
                1,
                "on\\_role\\_change: run this script when the postgres is being promoted or "
                "demoted.",
            )
        ),
        [hooks],
        [hooks],
        language="en",
    )
    assert shaped is not None
    assert "on_role_change" in shaped.text and "on_start" in shaped.text
    assert "Hook: on_stop" in shaped.text
    assert "\\_" not in shaped.text


def test_a_list_items_rest_is_kept_when_its_line_leads_the_answer() -> None:
    faq = chunk(
        "docs/en/faq.md",
        "FAQ > ONNX Runtime",
        "- Under Windows, visualizing fails with the following error:\n"
        "  ```\n  Failed to load library, error code: 193\n  ```\n"
        "  **Cause:** two `onnxruntime.dll` are on the system path.\n"
        "  1. Copy the dll next to `mmdeploy_onnxruntime_ops.dll`.\n"
        "- Another problem.\n",
    )
    shaped = shape(
        "sdk inference fails: 'Failed to load library, error code: 193'. how to fix?",
        ranked((1, "Failed to load library, error code: 193")),
        [faq],
        [faq],
        language="en",
    )
    assert shaped is not None
    # The error leads; the cause and the fix under it in its item follow, the error not twice.
    assert shaped.text.startswith("Failed to load library, error code: 193 [1]")
    assert "**Cause:** two `onnxruntime.dll`" in shaped.text
    assert "mmdeploy_onnxruntime_ops.dll" in shaped.text
    assert shaped.text.count("error code: 193") == 1
    assert "```\n```" not in shaped.text.replace("  ", "")


def test_a_kramdown_attribute_list_is_not_shown() -> None:
    agenda = chunk(
        "after/post_mortem_process.md",
        "Postmortem Meeting",
        "1. Discuss how the problem could've been caught.\n"
        '    * Did it show up in [canary](https://example.test/canary){:target="_blank" }?\n',
    )
    shaped = shape(
        "what do we discuss in the postmortem meeting?",
        ranked((1, "1. Discuss how the problem could've been caught.")),
        [agenda],
        [agenda],
        language="en",
    )
    assert shaped is not None
    assert "[canary](https://example.test/canary)?" in shaped.text
    assert "{:" not in shaped.text


def test_the_section_model_prefers_the_section_that_holds_the_question_over_many_lines() -> None:
    # The hand rule's miss on documents nobody here wrote: a neighbour's several middling
    # lines outvote the section retrieval ranked first, which holds what is asked.
    answering = chunk(
        "upgrade/health.md",
        "Skipping the health checks",
        "Set skipUpgradeChecks to true to upgrade while Ceph reports HEALTH_ERR.\n",
    )
    neighbour = chunk(
        "upgrade/rook-upgrade.md",
        "Upgrading the operator",
        "Watch the operator pod.\n\nWait for every deployment.\n\n"
        "Check the version label.\n\nThen upgrade Ceph.\n",
    )
    weak = chunk("glossary.md", "Terms", "A pool stores objects.\n")
    lines = [
        EvidenceSentence(
            1, 0, "Set skipUpgradeChecks to true to upgrade while Ceph reports HEALTH_ERR.", 0.62
        ),
        EvidenceSentence(2, 1, "Watch the operator pod.", 0.60),
        EvidenceSentence(2, 2, "Wait for every deployment.", 0.59),
        EvidenceSentence(2, 3, "Check the version label.", 0.58),
        EvidenceSentence(2, 4, "Then upgrade Ceph.", 0.57),
        EvidenceSentence(3, 5, "A pool stores objects.", 0.40),
    ]
    evidence = [answering, neighbour, weak]
    question = "ceph says HEALTH_ERR, will the operator still upgrade? what skips the checks"
    votes = {
        c.located.chunk.chunk.source: c.evidence.votes
        for c in candidate_sections(question, lines, evidence, evidence)
    }
    assert votes["upgrade/rook-upgrade.md"] > votes["upgrade/health.md"]  # the rule's choice
    shaped = shape(question, lines, evidence, evidence, language="en")
    assert shaped is not None
    assert shaped.chunks == (answering,)
    assert "skipUpgradeChecks" in shaped.text
