"""Kept copies on disk (adapters/vector/snapshot_files.py): one version per name and KB, whole
files or none."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adapters.vector.snapshot_files import SnapshotFiles
from core.vector_cache import SavedParts, SavedRows


def rows(n: int) -> SavedRows:
    matrix = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    ids = tuple(f"c{i}" for i in range(n))
    return SavedRows(matrix, ids, tuple(f"text {i} 中文" for i in range(n)), ("a.md",) * n)


def parts(n: int) -> SavedParts:
    return SavedParts({"x": n, "words": ["中文"]}, {"postings": np.arange(n, dtype=np.int32)})


def same(a: SavedParts | None, b: SavedParts) -> bool:
    return (
        a is not None
        and a.values == b.values
        and a.arrays.keys() == b.arrays.keys()
        and all(np.array_equal(a.arrays[k], b.arrays[k]) for k in b.arrays)
    )


def test_rows_come_back_as_saved_for_their_version_only(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    files.save_rows("chunks", "ops", "v1", rows(3))
    back = files.load_rows("chunks", "ops", "v1")
    assert back is not None
    assert np.array_equal(back.matrix, rows(3).matrix)
    assert (back.ids, back.texts, back.sources) == (rows(3).ids, rows(3).texts, rows(3).sources)
    assert files.load_rows("chunks", "ops", "v2") is None
    assert files.load_rows("chunks", "other", "v1") is None
    assert files.load_rows("entities", "ops", "v1") is None


def test_a_new_version_replaces_the_old_one(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    files.save_rows("chunks", "ops", "v1", rows(3))
    files.save_object("terms", "ops", "v1", parts(1))
    files.save_rows("chunks", "ops", "v2", rows(2))
    assert files.load_rows("chunks", "ops", "v1") is None
    assert same(files.load_object("terms", "ops", "v1"), parts(1))  # another name: kept
    assert len(list(tmp_path.rglob("chunks-*"))) == 2  # v2's .npy and .json


def test_a_file_cut_short_reads_as_none(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    files.save_rows("chunks", "ops", "v1", rows(3))
    files.save_object("terms", "ops", "v1", parts(100))
    for path in tmp_path.rglob("*-v1*"):
        if path.suffix in (".npy", ".npz"):
            path.write_bytes(path.read_bytes()[:40])
    assert files.load_rows("chunks", "ops", "v1") is None
    assert files.load_object("terms", "ops", "v1") is None
