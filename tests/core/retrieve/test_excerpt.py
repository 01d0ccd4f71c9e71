"""core.retrieve.excerpt: what the judge reads of a cited passage."""

from __future__ import annotations

from core.retrieve.excerpt import ELIDED, excerpt, words

RUNBOOK = """# Disaster recovery

## Snapshotting the keyspace

etcd stores its data in the data directory given by --data-dir.
Take a snapshot with `etcdctl snapshot save backup.db` on any member.
The snapshot holds the whole keyspace, revision and all.
Older etcd releases wrote snapshots in another format.
Snapshots are not encrypted: keep them in a private bucket.
Compaction does not affect an existing snapshot.
Defragmentation frees the space compaction leaves behind.

```shell
ETCDCTL_API=3 etcdctl --endpoints $ENDPOINT snapshot save snapshot.db
ETCDCTL_API=3 etcdutl --write-out=table snapshot status snapshot.db
```

| Flag | Default | Meaning |
|------|---------|---------|
| --snapshot-count | 100000 | committed transactions before a snapshot to disk |
| --max-wals | 5 | WAL files kept |
| --max-snapshots | 5 | snapshot files kept |
"""


def near(*texts: str) -> frozenset[str]:
    return words("\n".join(texts))


def test_lines_without_the_question_or_answer_words_are_elided() -> None:
    cut = excerpt(RUNBOOK, near("Are the snapshots encrypted?", "No, they are not [1]."))
    assert "Snapshots are not encrypted: keep them in a private bucket." in cut
    assert "Defragmentation" not in cut and "data directory" not in cut
    assert ELIDED in cut
    assert len(cut) < len(RUNBOOK) * 0.85


def test_headings_are_kept_so_a_line_is_read_under_its_section() -> None:
    cut = excerpt(RUNBOOK, near("are snapshots encrypted"))
    assert "# Disaster recovery" in cut and "## Snapshotting the keyspace" in cut


def test_a_matched_code_block_is_kept_whole() -> None:
    cut = excerpt(RUNBOOK, near("How do I check a snapshot's status with etcdutl?"))
    assert "```shell\nETCDCTL_API=3 etcdctl --endpoints $ENDPOINT snapshot save" in cut
    assert "snapshot status snapshot.db\n```" in cut


def test_a_matched_table_row_keeps_its_header() -> None:
    cut = excerpt(RUNBOOK, near("What is the default of --snapshot-count?", "100000 [1]"))
    assert "| Flag | Default | Meaning |\n|------|---------|---------|" in cut
    assert "| --snapshot-count | 100000 |" in cut
    assert "--max-wals" not in cut


def test_a_word_on_most_lines_marks_none_of_them() -> None:
    # "snapshot" is on most lines of the section: it alone picks nothing, so an answer that
    # shares only it with the passage leaves the passage whole
    assert excerpt(RUNBOOK, near("tell me about snapshots")) == RUNBOOK


def test_an_answer_in_another_language_reads_the_whole_passage() -> None:
    assert excerpt(RUNBOOK, near("快照加密了吗？", "没有加密 [1]。")) == RUNBOOK


def test_a_short_passage_or_one_mostly_kept_is_read_whole() -> None:
    short = "Snapshots are not encrypted.\nKeep them in a private bucket.\n"
    assert excerpt(short, near("are snapshots encrypted")) == short
    # every line but one holds a word of the question: the excerpt would save too little
    asked = "snapshot data directory etcdctl revision format encrypted compaction defragmentation"
    assert excerpt(RUNBOOK, near(asked, "--max-wals --snapshot-count --max-snapshots")) == RUNBOOK


def test_numbers_and_identifiers_match_whole() -> None:
    keys = words("--max-wals is 5 and the port is 2379 for etcd.io/v3")
    assert {"--max-wals".strip("-"), "2379", "etcd.io/v3"} <= keys
    assert "5" not in keys  # one digit is on too many lines to pick one out


def test_chinese_words_match_as_written() -> None:
    lines = ["使用快照备份数据，快照包含所有键值和修订号。", "压缩不会影响已经保存的快照。"] * 12
    text = "\n".join(["# 备份", *lines, "碎片整理释放压缩留下的空间。"])
    cut = excerpt(text, near("怎么释放空间？"))
    assert "碎片整理释放压缩留下的空间。" in cut and "使用快照备份数据" not in cut
