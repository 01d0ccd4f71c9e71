"""Knowledge-base names: used in file names, collection filters and NebulaGraph spaces."""

from __future__ import annotations

import re

# \Z, not $: $ also matches before a trailing newline, and "ops\n" passed as a KB name (a KB
# folder, a state-store key and a decision-log index with a newline in it)
_KB_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")


def validate_kb_name(name: str) -> str:
    """A KB name is lower-case letters, digits and underscores, starting with a letter."""
    if not _KB_NAME.match(name):
        raise ValueError(
            f"knowledge base name {name!r} must be 1-48 characters of a-z, 0-9 and _, "
            "starting with a letter"
        )
    return name
