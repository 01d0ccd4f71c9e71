"""The kept snapshot files under the home (adapters/vector/snapshot_files.py) against a file put
there by someone else: reading one never runs code (no pickle is read, nor an array that holds
objects), and a file of another shape reads as none, so the postings are built again."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from adapters.vector.snapshot_files import VALUES, SnapshotFiles
from core.gate.kb_terms import KbTerms
from core.vector_cache import SavedParts

TEXTS = ("Deploys > Rollback\nRun deployctl rollback.", "发布 回滚 步骤", "Backups run nightly.")


class Marker:
    """What a hostile pickle runs when loaded: it writes a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (self.path, "ran"))  # type: ignore[return-value]


def test_the_term_postings_come_back_as_data(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    terms = KbTerms.build(TEXTS, ("c0", "c1", "c2"))
    files.save_object("kb_terms", "ops", "v1", terms.to_parts())
    assert not list(tmp_path.rglob("*.pickle"))
    kept = files.load_object("kb_terms", "ops", "v1")
    assert kept is not None
    back = KbTerms.from_parts(kept)
    assert back.postings.keys() == terms.postings.keys()
    assert all(np.array_equal(back.postings[k], terms.postings[k]) for k in terms.postings)
    assert (back.chunks, back.texts, back.languages, back.rows, back.heads, back.by_prefix) == (
        terms.chunks, terms.texts, terms.languages, terms.rows, terms.heads, terms.by_prefix,
    )  # fmt: skip


def test_a_hostile_file_in_the_snapshot_folder_runs_nothing(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    files.save_object("kb_terms", "ops", "v1", KbTerms.build(TEXTS).to_parts())
    (kept,) = [p for p in tmp_path.rglob("kb_terms-*") if not p.name.startswith(".")]
    ran = tmp_path / "ran"
    hostile = pickle.dumps(Marker(ran))
    # the file replaced by a pickle, at the name it has and at the name of the format before
    kept.write_bytes(hostile)
    kept.with_suffix(".pickle").write_bytes(hostile)
    assert files.load_object("kb_terms", "ops", "v1") is None
    # an .npz whose member is a pickled object array
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        member = io.BytesIO()
        np.save(member, np.array([Marker(ran)], dtype=object), allow_pickle=True)
        archive.writestr("postings.npy", member.getvalue())
        values = io.BytesIO()
        np.save(values, np.frombuffer(json.dumps({}).encode(), dtype=np.uint8))
        archive.writestr(f"{VALUES}.npy", values.getvalue())
    kept.write_bytes(buffer.getvalue())
    assert files.load_object("kb_terms", "ops", "v1") is None
    assert not ran.exists()


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"keys": ["a"], "chunks": 1, "texts": ["a"], "languages": ["en"]},
        {"keys": ["a"], "chunks": 1, "texts": ["a"], "languages": ["xx"], "by_prefix": {},
         "rows": {}, "heads": {}},
        {"keys": ["a"], "chunks": 5, "texts": ["a"], "languages": ["en"], "by_prefix": {},
         "rows": {}, "heads": {}},
    ],
)  # fmt: skip
def test_parts_of_another_shape_are_refused(values: dict[str, object]) -> None:
    arrays = {"postings": np.array([0], dtype=np.int32), "offsets": np.array([0, 1])}
    with pytest.raises(ValueError):
        KbTerms.from_parts(SavedParts(values, arrays))


def test_a_posting_past_the_passages_is_refused() -> None:
    parts = KbTerms.build(TEXTS).to_parts()
    parts.arrays["postings"][0] = 99
    with pytest.raises(ValueError):
        KbTerms.from_parts(parts)
