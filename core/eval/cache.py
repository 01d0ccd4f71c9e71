"""Per-question results kept as they are made, so an interrupted evaluation resumes.

One JSONL file, one line per result: {"key", "result"}. The key hashes what the result depends
on — the evaluation kind and variant, the question, and a fingerprint of the settings — so a
changed setting or question is evaluated afresh, and runs of an ablation share one file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def fingerprint(data: Mapping[str, Any]) -> str:
    """A short stable hash of JSON-able data (settings, options)."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def result_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


class ResultCache:
    """Results by key; with a path, every new result is appended (and flushed) at once."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._results: dict[str, dict[str, Any]] = {}
        self.reused = 0
        self._cut_short = False  # the file ends mid-line: start the next result on a new one
        if path is not None and path.is_file():
            text = path.read_text(encoding="utf-8")
            self._cut_short = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                    self._results[entry["key"]] = entry["result"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut short when the run was interrupted

    def __len__(self) -> int:
        return len(self._results)

    def get(self, key: str) -> dict[str, Any] | None:
        result = self._results.get(key)
        if result is not None:
            self.reused += 1
        return result

    def put(self, key: str, result: dict[str, Any]) -> None:
        self._results[key] = result
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"key": key, "result": result}, ensure_ascii=False)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if self._cut_short else "") + line + "\n")
        self._cut_short = False
