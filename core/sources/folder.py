"""A folder on this machine as a source: every sync lists it whole (a full change set), and the
content hashes make unchanged files cost a read and a hash, nothing more."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from core.index.loaders import OUTSIDE_TREE, SkippedFile, discover
from core.sources.sync import ChangeSet, SourceError


class FolderSnapshot:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def changes(self, since: str | None) -> ChangeSet:
        import asyncio

        return await asyncio.to_thread(self._scan)

    def _scan(self) -> ChangeSet:
        if not self.root.is_dir():
            raise SourceError(f"folder {self.root} does not exist or is not a folder")
        skipped: list[SkippedFile] = []
        # discover() passes over hidden files and refuses symlinks out of the folder; its ids
        # are "<folder name>/<path>", so the path in the folder is what follows the first "/".
        paths = [source.split("/", 1)[1] for _, source in discover([self.root], skipped)]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        changes = ChangeSet(root=self.root.resolve(), revision=stamp, changed=paths, full=True)
        for problem in skipped:
            path = problem.source.split("/", 1)[-1]
            if problem.reason == OUTSIDE_TREE:
                # A link out of the folder is never read: its document, if any, goes.
                changes.failed[path] = problem.reason
            else:
                # Unreadable this time (permissions...): listed, so its read fails and is
                # reported, and its earlier version stays, as `tacit index` keeps it.
                changes.changed.append(path)
        return changes


class FolderNaming:
    """`<source name>/<path>`, as `tacit index` names a folder's files by the folder."""

    def __init__(self, name: str) -> None:
        self.name = name

    def source_id(self, path: str, revision: str) -> str:
        return f"{self.name}/{path}"

    def metadata(self, path: str, revision: str) -> dict[str, Any]:
        return {"sync_source": self.name, "kind": "folder"}
