"""The in-memory copies of a KB's vectors (core/vector_cache.py) and what is derived from them
(the coverage rule's term postings), kept in files so that a new process reads them in a
fraction of a second instead of reading every row out of the vector store again.

Why: each `tacit ask` and each `tacit serve` start read a KB's rows out of Milvus Lite (a
Python loop per row) and cut every chunk into terms again, although nothing had changed: most
of their start on a KB of thousands of chunks.

Layout: `<root>/<KB digest>/<name>-<version digest>.{npy,json,npz}`, one generation per
name and KB: saving a new version removes the older ones. Files are written to a temporary
name and renamed, so a reader sees a whole file or none. The version digest is the one the
cache checks (core.vector_cache.documents_version, a digest of the KB's documents and their
content hashes): a file of another version is never read, so a KB changed by indexing or
removal is read from the store again, never from the files of before.

Every file is data that reading cannot run: JSON, and numeric arrays read with
`allow_pickle=False` (what is derived comes as core.vector_cache.SavedParts). No pickle: a
pickle is code, so anyone who could write one file into the snapshot folder would run code as
every later `tacit`; a hostile or broken file here reads as none, and the store is read again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.vector_cache import SavedParts, SavedRows

# Written into every file's name: a change of what a file holds changes this, and the files
# of before are then never read.
FORMAT = 2
# The member of an object's .npz that holds its JSON values (the others are its arrays).
VALUES = "__values__"


class SnapshotFiles:
    """core.vector_cache.SnapshotFiles on a folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- vectors ------------------------------------------------------------------------------

    def load_rows(self, name: str, kb: str, version: str) -> SavedRows | None:
        base = self._path(name, kb, version)
        try:
            matrix: npt.NDArray[np.float32] = np.load(base.with_suffix(".npy"))
            with open(base.with_suffix(".json"), encoding="utf-8") as file:
                ids, texts, sources = json.load(file)
        except (OSError, ValueError):  # missing, or cut short by a crash before the rename
            return None
        if matrix.ndim != 2 or not len(ids) == len(texts) == len(sources) == matrix.shape[0]:
            return None
        return SavedRows(matrix, tuple(ids), tuple(texts), tuple(sources))

    def save_rows(self, name: str, kb: str, version: str, rows: SavedRows) -> None:
        base = self._path(name, kb, version)
        base.parent.mkdir(parents=True, exist_ok=True)
        # the texts first, the matrix last: load_rows reads the matrix first and needs both
        self._write(
            base.with_suffix(".json"),
            json.dumps([rows.ids, rows.texts, rows.sources], ensure_ascii=False).encode(),
        )
        self._write(base.with_suffix(".npy"), _npy(rows.matrix))
        self._forget_others(name, kb, version)

    # -- derived objects ----------------------------------------------------------------------

    def load_object(self, name: str, kb: str, version: str) -> SavedParts | None:
        try:
            path = self._path(name, kb, version).with_suffix(".npz")
            with np.load(path, allow_pickle=False) as members:
                arrays = {key: members[key] for key in members.files}
            values = json.loads(arrays.pop(VALUES).tobytes().decode("utf-8"))
        except (OSError, ValueError, KeyError, UnicodeDecodeError, zipfile.BadZipFile):
            return None  # missing, cut short, or not what save_object writes
        if not isinstance(values, dict):
            return None
        return SavedParts(values, arrays)

    def save_object(self, name: str, kb: str, version: str, value: SavedParts) -> None:
        path = self._path(name, kb, version).with_suffix(".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        values = json.dumps(value.values, ensure_ascii=False).encode()
        buffer = io.BytesIO()
        members: dict[str, Any] = {**value.arrays, VALUES: np.frombuffer(values, dtype=np.uint8)}
        np.savez(buffer, allow_pickle=False, **members)
        self._write(path, buffer.getvalue())
        self._forget_others(name, kb, version)

    # -- internals ----------------------------------------------------------------------------

    def _path(self, name: str, kb: str, version: str) -> Path:
        folder = hashlib.sha256(kb.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return self.root / folder / f"{name}-v{FORMAT}-{version}"

    def _forget_others(self, name: str, kb: str, version: str) -> None:
        keep = self._path(name, kb, version).name
        for path in self._path(name, kb, version).parent.glob(f"{name}-*"):
            if path.stem != keep and not path.name.startswith("."):
                with contextlib.suppress(OSError):
                    path.unlink()

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _npy(matrix: npt.NDArray[np.float32]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
    return buffer.getvalue()
