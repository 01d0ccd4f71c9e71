"""A git revision of this repository unpacked beside the working tree: the benches that run a
baseline revision's code in the same run (bench_firsthour.py, bench_first_hour.py) import or run
it from there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Written last: a tree without it was cut short while unpacking, and is unpacked again.
COMPLETE = ".complete"


def unpack(rev: str, work: Path) -> tuple[str, Path]:
    """REV's commit and its tree under work/rev-<sha>/tree, unpacked once per commit."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = work / f"rev-{sha[:12]}" / "tree"
    if not (tree / COMPLETE).exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        (tree / COMPLETE).write_text(sha, "utf-8")
    return sha, tree
