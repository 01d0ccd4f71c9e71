"""`tacit remove`: take documents out of a knowledge base."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, settings
from bot.commands.index import print_index_report, report_json
from core.errors import InputError


@app.command()
@command
async def remove(
    sources: Annotated[
        list[str],
        typer.Argument(help="Source ids as `tacit index` stored them (e.g. docs/faq.md)."),
    ],
    kb: KbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove documents, with every chunk, entity and relation that only they supported."""
    from bot.local_endpoint import connect
    from bot.wiring import open_services

    config = settings()
    name = kb_name(kb, config)
    server = await connect(config)
    if server is not None:
        # the home is held by a running `tacit serve`: its indexer removes them
        async with server:
            err.print(f"[dim]removed by {server.name}[/]", markup=True)
            report, before = await server.remove(name, sources)
    else:
        async with open_services(config) as services:
            before = await services.graph.stats(name)
            report = await services.indexer(name).remove(name, sources)
            await services.keep_copies(name)  # as `tacit index` does
    if report.documents_removed == 0:
        # Nothing matched: most likely a path given instead of the stored source id.
        raise InputError(
            f"no document {', '.join(map(repr, sources))} in knowledge base '{name}'",
            hint="source ids are relative to the indexed folder's parent, e.g. docs/faq.md",
        )
    if as_json:
        data = report_json(report, before)
        if server is not None:
            data["via"] = server.name
        print(json.dumps(data, ensure_ascii=False))
    else:
        print_index_report(report, before, removing=True)
