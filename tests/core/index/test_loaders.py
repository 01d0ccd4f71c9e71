"""Loaders: every supported format, corpora with field mappings, broken files never fatal."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import pytest

from core.index.loaders import (
    CorpusFields,
    LoadError,
    discover,
    load,
    load_file,
    rst_to_markdown_headings,
    source_prefix,
)
from core.index.nlp_extract import NLPExtractor
from core.index.split import RecursiveSplitter, split_document
from core.models import ChunkRecord
from tests.conftest import SHARED_DATA


def minimal_pdf(lines: list[str], title: str = "") -> bytes:
    """A one-page PDF showing `lines` in Helvetica (written by hand: no PDF writer needed)."""
    text_ops = " ".join(f"({line}) Tj 0 -14 Td" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {text_ops} ET".encode()
    info = f"<< /Title ({title}) >>" if title else "<< >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        info.encode(),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def test_rst_section_titles_become_heading_paths(tmp_path: Path) -> None:
    path = tmp_path / "guide.rst"
    path.write_text(
        "=========\nUser Guide\n=========\n\nIntro text.\n\n"
        "Installation\n------------\n\nRun pip install.\n\n"
        "From source\n~~~~~~~~~~~\n\nClone it.\n\n"
        "Usage\n-----\n\nCall it.\n"
    )
    document = load(path, "docs/guide.rst")
    assert document.title == "User Guide" and document.markdown
    chunks = split_document(document.text, markdown=True, splitter=RecursiveSplitter(64, 8))
    assert [(c.heading, c.text) for c in chunks] == [
        ("User Guide", "Intro text."),
        ("User Guide > Installation", "Run pip install."),
        ("User Guide > Installation > From source", "Clone it."),
        ("User Guide > Usage", "Call it."),
    ]


def test_rst_adornment_shorter_than_its_text_is_not_a_heading() -> None:
    assert rst_to_markdown_headings("A long line of text\n---\n") == "A long line of text\n---"


def _rst_terms(tmp_path: Path, text: str) -> tuple[str, dict[str, str]]:
    """The text an .rst file is indexed as, and the NLP extractor's terms of it with their
    descriptions."""
    path = tmp_path / "page.rst"
    path.write_text(text)
    document = load(path, "page.rst")
    terms: dict[str, str] = {}
    for ordinal, piece in enumerate(
        split_document(document.text, markdown=True, splitter=RecursiveSplitter(512, 0))
    ):
        chunk = ChunkRecord(f"c{ordinal}", "page.rst", ordinal, piece.text, piece.heading, 1)
        for entity in NLPExtractor().extract_sync(chunk).entities:
            terms.setdefault(entity.name, entity.description)
    return document.text, terms


def test_rst_directive_markup_is_no_term_and_its_code_stays_as_fenced_text(
    tmp_path: Path,
) -> None:
    text, terms = _rst_terms(
        tmp_path,
        "CLI 参考\n--------\n\n.. code-block:: bash\n\n   labctl specimen show <barcode>\n\n"
        "``labctl specimen lost`` 的结果每天早上自动发到企业微信群。\n\n"
        ".. toctree::\n   :maxdepth: 2\n   :caption: Get Started\n\n   intro.md\n\n"
        ".. note::\n   Keep the Sysmex analyzer online during the upgrade.\n",
    )
    # The code and the note are chunk text as before; only the markers are gone.
    assert "```bash\nlabctl specimen show <barcode>\n```" in text
    assert "Keep the Sysmex analyzer online" in text and "intro.md" in text
    assert ".. " not in text and "::" not in text and ":maxdepth:" not in text
    noise = {"code", "code-block", "toctree", "maxdepth", "caption", "note"}
    assert not noise & {t.casefold() for t in terms}
    assert not [d for d in terms.values() if "::" in d or ":maxdepth:" in d or ":caption:" in d]


def test_rst_roles_fields_targets_and_comments_read_as_their_text(tmp_path: Path) -> None:
    text, terms = _rst_terms(
        tmp_path,
        ":负责人: 王磊 (Wang Lei)\n:param timeout: Seconds before the RetryQueue gives up.\n\n"
        ".. _retry-queue:\n\n.. this comment is not rendered\n   nor is this line\n\n"
        "See :ref:`the retry guide <retry-queue>` and :class:`~mmcv.cnn.ConvModule`, or"
        " `Grafana <https://grafana.example>`_ for the dashboards.\n\n"
        "Run it like this::\n\n    retry --max 3\n\n"
        "``pack_to_max_length`` 用于配置是否进行\\ :ref:`数据集拼接 <pack_to_max_length>` \\ 。\n",
    )
    assert "``pack_to_max_length`` 用于配置是否进行数据集拼接 。" in text
    assert "负责人: 王磊 (Wang Lei)" in text
    assert "\ntimeout: Seconds before the RetryQueue gives up." in text
    assert "See the retry guide and ``mmcv.cnn.ConvModule``, or Grafana for the dashboards." in text
    assert "Run it like this:\n```\nretry --max 3\n```" in text
    assert "comment" not in text and "_retry-queue" not in text and ":ref:" not in text
    assert "RetryQueue" in terms and any("ConvModule" in term for term in terms)
    assert not {"ref", "class", "param"} & {t.casefold() for t in terms}
    assert not [d for d in terms.values() if ":ref:" in d or ":class:" in d or "<https" in d]


def test_rst_adornment_inside_code_is_no_heading() -> None:
    text = "Title\n=====\n\n```\nresult\n------\n```\n"
    assert rst_to_markdown_headings(text) == "# Title\n\n```\nresult\n------\n```"


def test_html_keeps_headings_and_drops_scripts(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>Ops Wiki</title><style>p{}</style></head><body>"
        "<script>alert(1)</script><h1>Runbook</h1><p>Check <b>disk</b> usage.</p>"
        "<h2>Cleanup</h2><ul><li>Rotate logs</li></ul></body></html>"
    )
    document = load(path, "wiki/page.html")
    assert document.title == "Ops Wiki"
    assert "alert" not in document.text and "p{}" not in document.text
    chunks = split_document(document.text, markdown=True, splitter=RecursiveSplitter(64, 8))
    assert [c.heading for c in chunks] == ["Runbook", "Runbook > Cleanup"]
    assert "disk" in chunks[0].text and "Rotate logs" in chunks[1].text


def test_pdf_text_and_title(tmp_path: Path) -> None:
    path = tmp_path / "manual.pdf"
    path.write_bytes(minimal_pdf(["TurboMind serves models.", "Port 8443."], title="Manual"))
    document = load(path, "manual.pdf")
    assert document.title == "Manual"
    assert "TurboMind serves models." in document.text and "Port 8443." in document.text


def test_docx_paragraphs_headings_and_tables(tmp_path: Path) -> None:
    word = docx.Document()
    word.add_heading("Deploy Guide", level=1)
    word.add_paragraph("Freeze deploys on Friday.")
    word.add_heading("Rollback", level=2)
    word.add_paragraph("Run deployctl rollback.")
    table = word.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "port"
    table.rows[0].cells[1].text = "8443"
    path = tmp_path / "guide.docx"
    word.save(str(path))
    document = load(path, "guide.docx")
    assert document.title == "Deploy Guide" and document.markdown
    chunks = split_document(document.text, markdown=True, splitter=RecursiveSplitter(64, 8))
    assert [c.heading for c in chunks] == ["Deploy Guide", "Deploy Guide > Rollback"]
    assert "port | 8443" in chunks[1].text


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("broken.pdf", b"%PDF-1.4\nthis is not a pdf at all", "broken PDF"),
        ("empty.pdf", minimal_pdf([]), "PDF without extractable text"),
        ("broken.docx", b"PK\x03\x04 not really a zip", "broken Word document"),
        ("latin1.txt", "café".encode("latin-1"), "not UTF-8 text"),
        ("blank.md", b"  \n\n", "empty file"),
        ("image.png", b"\x89PNG", "unsupported file type .png"),
        ("bad.json", b"{not json", "invalid JSON at line 1"),
        ("nothing.jsonl", b'{"other": 1}\n', "no readable record (no text field)"),
    ],
)
def test_broken_files_raise_load_error(tmp_path: Path, name: str, content: bytes, reason) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(LoadError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        load_file(path, name)


def test_jsonl_corpus_with_ids_titles_and_bad_records(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"id": "a1", "title": "Cork", "text": "The city is in Munster."}),
                "not json",
                json.dumps({"id": "a2", "text": "No title here."}),
                json.dumps({"id": "a1", "text": "A repeated id."}),
                json.dumps({"id": "a3", "title": "Empty", "text": "  "}),
                "",
            ]
        )
    )
    result = load_file(path, "data/corpus.jsonl")
    assert [(d.source, d.title) for d in result.documents] == [
        ("data/corpus.jsonl#a1", "Cork"),
        ("data/corpus.jsonl#a2", "a2"),
    ]
    # The title is the heading of every chunk of the record: a passage keeps its subject.
    chunks = split_document(
        result.documents[0].text, markdown=True, splitter=RecursiveSplitter(64, 8)
    )
    assert [(c.heading, c.text) for c in chunks] == [("Cork", "The city is in Munster.")]
    assert [(f.source, f.reason) for f in result.failed] == [
        ("data/corpus.jsonl#line 2", "not a JSON object"),
        ("data/corpus.jsonl#a1", "repeated id (line 4)"),
        ("data/corpus.jsonl#line 5", "no text field"),
    ]


def test_field_mapping_reads_other_shapes(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    path.write_text(json.dumps({"data": [{"qid": 7, "question": "Q?", "answer": "A."}]}))
    fields = CorpusFields(id=("qid",), title=("question",), text=("answer",))
    [document] = load_file(path, "faq.json", fields).documents
    assert (document.source, document.title) == ("faq.json#7", "Q?")


def test_the_shared_benchmark_corpora_load() -> None:
    seed = SHARED_DATA / "seedbench" / "corpus.jsonl"
    musique = SHARED_DATA / "musique" / "musique_train_corpus.json"
    if not (seed.exists() and musique.exists()):
        pytest.skip("shared data not present")
    seeds = load_file(seed, "corpus.jsonl")
    assert len(seeds.documents) == 279 and not seeds.failed
    assert seeds.documents[0].source == "corpus.jsonl#0"
    passages = load_file(musique, "musique.json")
    assert len(passages.documents) == 1890 and not passages.failed
    assert passages.documents[0].title == "Journal of Mathematical Physics"


def test_source_ids_and_prefixes(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.md").write_text("# A\n")
    (root / ".hidden.md").write_text("# H\n")
    assert [s for _, s in discover([root])] == ["kb/sub/a.md"]
    assert source_prefix(root) == "kb/"
    assert source_prefix(root / "sub" / "a.md") == "a.md"


def test_a_markdown_runbook_without_an_extension_is_read_as_markdown(tmp_path: Path) -> None:
    # Runbook folders name files after their alert; such a file was once skipped as
    # "unsupported file type (none)".
    path = tmp_path / "PrometheusOperatorSyncFailed"
    path.write_text(
        "---\ntitle: Prometheus Operator Sync Failed\n---\n\n# PrometheusOperatorSyncFailed\n\n"
        "## Meaning\nThe operator failed to sync a resource.\n\n## Mitigation\nCheck its logs.\n"
    )
    document = load(path, "runbooks/PrometheusOperatorSyncFailed")
    assert document.markdown and document.title == "PrometheusOperatorSyncFailed"
    chunks = split_document(document.text, markdown=True, splitter=RecursiveSplitter(64, 8))
    assert "PrometheusOperatorSyncFailed > Mitigation" in [c.heading for c in chunks]


def test_plain_text_without_an_extension_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "NOTES"
    path.write_text("Deploys freeze every Friday after 15:00 UTC.\nAsk #ops first.\n")
    document = load_file(path, "NOTES").documents[0]
    assert not document.markdown and document.title == "NOTES"
    assert "Friday" in document.text


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary content (no file extension, and not text)"),
        ("café".encode("latin-1") + b" au lait", "no file extension, and not UTF-8 text"),
        (
            b"\x1b\x02\x03\x04\x05\x06\x07\x08abc",
            "binary content (no file extension, and not text)",
        ),
    ],
)
def test_a_binary_file_without_an_extension_is_skipped_saying_why(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "tool"
    path.write_bytes(content)
    with pytest.raises(LoadError) as raised:
        load_file(path, "tool")
    assert str(raised.value) == reason
