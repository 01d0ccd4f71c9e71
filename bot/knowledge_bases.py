"""Every knowledge base of a home: what the graph store holds of each, and what the settings
bind to it. Read by `tacit kb list` and `tacit doctor`.

A home's KBs are found in its graph store (one SQLite file serves every KB); a store that cannot
list them (NebulaGraph: a space per KB, named by a prefix other deployments may share) shows
the KBs the settings name. The settings' KBs are always listed, indexed or not: a channel bound
to a KB nobody indexed is exactly what an admin needs to see.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import wiring
from bot.settings import Settings


@dataclass(frozen=True, slots=True)
class KbRow:
    kb: str
    documents: int
    chunks: int
    last_indexed: float | None  # unix time of its latest document; None: none, or not known
    text_bytes: int | None  # its chunk texts' UTF-8 bytes; None: the store does not say
    channels: list[str] = field(default_factory=list)  # channels bound to it in the settings
    default: bool = False  # the `kb` setting: channels bound to no KB answer from it
    configured: bool = False  # named by the settings (default, a channel, kb_sources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kb": self.kb,
            "documents": self.documents,
            "chunks": self.chunks,
            "last_indexed": self.last_indexed,
            "text_bytes": self.text_bytes,
            "channels": self.channels,
            "default": self.default,
            "configured": self.configured,
        }


def configured_kbs(settings: Settings) -> list[str]:
    """The KBs the settings name: the default, every channel's, and those with sources."""
    conversation = settings.conversation
    named = [settings.kb, *(c.kb for c in conversation.channels.values() if c.kb)]
    return list(dict.fromkeys([*named, *conversation.kb_sources]))


def bound_channels(settings: Settings, kb: str) -> list[str]:
    """The channels whose `kb` setting is this KB (`[conversation.channels."slack:T:C"]`)."""
    channels = settings.conversation.channels
    return sorted(channel for channel, config in channels.items() if config.kb == kb)


async def kb_rows(settings: Settings, graph: Any) -> list[KbRow]:
    """Every KB the graph store holds anything of, and every KB the settings name."""
    configured = configured_kbs(settings)
    listing = getattr(graph, "knowledge_bases", None)
    found: dict[str, KbRow] = {}
    if listing is not None:
        for summary in await listing():
            found[summary.kb] = KbRow(
                summary.kb,
                summary.documents,
                summary.chunks,
                summary.last_indexed,
                summary.text_bytes,
            )
    for kb in configured:
        if kb not in found:
            if listing is not None:  # listed every KB it holds: this one has nothing
                found[kb] = KbRow(kb, 0, 0, None, 0)
            else:
                stats = await graph.stats(kb)
                found[kb] = KbRow(kb, stats.documents, stats.chunks, None, None)
    rows = []
    for kb in sorted(found, key=lambda name: (name != settings.kb, name)):
        row = found[kb]
        rows.append(
            KbRow(
                row.kb,
                row.documents,
                row.chunks,
                row.last_indexed,
                row.text_bytes,
                channels=bound_channels(settings, kb),
                default=kb == settings.kb,
                configured=kb in configured,
            )
        )
    return rows


async def list_kbs(settings: Settings) -> list[KbRow]:
    """kb_rows over the settings' graph store, opened for this and closed after. It opens no
    vector store: listing works while `tacit serve` holds the home's Milvus Lite file."""
    graph = wiring.build_graph(settings)
    try:
        return await kb_rows(settings, graph)
    finally:
        await graph.aclose()


def home_files(home: Path) -> dict[str, int]:
    """Bytes on disk of each top-level entry of the home (a folder: everything under it).
    The embedded stores keep every KB in the same files, so a home's size is known as a whole
    and per store, not per KB."""
    sizes: dict[str, int] = {}
    if not home.is_dir():
        return sizes
    for entry in sorted(home.iterdir()):
        sizes[entry.name] = _size(entry)
    return sizes


def _size(path: Path) -> int:
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        total = 0
        for folder, _, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:
                    continue  # removed while counting (a store rewriting its files)
        return total
    except OSError:
        return 0
