"""core.language.markup: Markdown and inline HTML read as the words a page shows."""

from __future__ import annotations

import pytest

from core.language.markup import prompt_text, reading_text, without_tags


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("see [the Deputy role](../before/roles.md/#deputy).", "see the Deputy role."),
        ('the [docs](https://example.com/a "Docs") say', "the docs say"),
        ("before ![016](../../assets/slide.016.jpeg) after", "before  after"),
        ("[![build](https://ci/badge.svg)](https://ci) passing", " passing"),
        ('<code class="text-nowrap">--limit</code> flag', "--limit flag"),
        ("text<br/>more", "textmore"),
        ("a <!-- hidden\nnote --> b", "a  b"),
        ("go to <https://example.com> now", "go to  now"),
        ('[id]: https://example.com "T"\nbody', "\nbody"),
        ('a link{:target="_blank"} here', "a link here"),
        ("R&amp;D &lt;3", "R&D <3"),
    ],
)
def test_reading_text_keeps_what_the_page_shows(written: str, shown: str) -> None:
    assert reading_text(written) == shown


def test_code_spans_are_kept_as_written() -> None:
    text = "run `[a](b) <b>x</b> &amp;` then [c](d)"
    assert reading_text(text) == "run `[a](b) <b>x</b> &amp;` then c"


def test_a_placeholder_written_like_a_tag_is_a_word() -> None:
    # vault://<namespace>/<issuer-name> is what an operator types, not HTML.
    assert without_tags("vault://<namespace>/<issuer-name>") == "vault://<namespace>/<issuer-name>"
    assert reading_text("use <namespace> and <b>bold</b>") == "use <namespace> and bold"
    assert without_tags("<DIV ALIGN=center>x</Div>") == "x"


def test_a_prompt_shows_a_source_without_front_matter_page_links_or_images() -> None:
    text = (
        "---\ntitle: Toolbox\nweight: 3\n---\n\n"
        "See the [Quickstart Guide](../Getting-Started/quickstart.md) and [Ceph's docs]"
        "(https://docs.ceph.com/).\n![diagram](../images/arch.png)\n<!-- todo -->\n"
        "```console\n[a](b.md) <!-- kept -->\n```\n"
        'then `[c](d.md)`{:target="_blank"}'
    )
    assert prompt_text(text) == (
        "\nSee the Quickstart Guide and [Ceph's docs](https://docs.ceph.com/).\n\n\n"
        "```console\n[a](b.md) <!-- kept -->\n```\n"
        "then `[c](d.md)`"
    )


def test_a_rule_is_not_front_matter_unless_it_opens_the_page() -> None:
    text = "Intro.\n\n---\n\nkey: value\n---\n"
    assert prompt_text(text) == text
