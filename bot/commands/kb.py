"""`tacit kb list`: every knowledge base of the home, and what the settings bind to each."""

from __future__ import annotations

import json
import time

import typer
from rich.table import Table

from bot.cli_base import JsonOption, app, command, out, settings

kb_app = typer.Typer(help="The knowledge bases of the data home.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")


@kb_app.command("list")
@command
async def kb_list(as_json: JsonOption = False) -> None:
    """List every knowledge base: documents, chunks, last indexed, size, bound channels."""
    from bot.knowledge_bases import home_files, list_kbs

    config = settings()
    rows = await list_kbs(config)
    files = home_files(config.home)
    if as_json:
        data = {
            "home": str(config.home),
            "kbs": [row.as_dict() for row in rows],
            "home_bytes": sum(files.values()),
            "home_files": files,
        }
        print(json.dumps(data, ensure_ascii=False))
        return
    table = Table(title=f"knowledge bases in {config.home}", title_justify="left")
    for column in ("kb", "documents", "chunks", "last indexed", "text size", "channels"):
        table.add_column(column, justify="right" if column in ("documents", "chunks") else "left")
    for row in rows:
        channels = ", ".join(row.channels)
        if row.default:
            channels = ", ".join(filter(None, [channels, "every channel bound to no kb"]))
        table.add_row(
            row.kb,
            str(row.documents),
            str(row.chunks),
            _when(row.last_indexed),
            "unknown" if row.text_bytes is None else _size(row.text_bytes),
            channels or "-",
        )
    out.print(table)
    if files:
        stores = ", ".join(f"{name} {_size(size)}" for name, size in files.items())
        out.print(
            f"on disk: {_size(sum(files.values()))} for every kb together ({stores})",
            markup=False,
        )
    empty = [row.kb for row in rows if not row.documents]
    if empty:
        out.print(
            f"no documents in {', '.join(repr(kb) for kb in empty)}: "
            f"index them with tacit index PATH --kb {empty[0]}",
            markup=False,
        )


def _when(moment: float | None) -> str:
    if moment is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment))


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
