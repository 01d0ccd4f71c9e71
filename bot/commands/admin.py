"""`tacit config show`, `tacit config docs`, `tacit doctor`, `tacit demo`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.cli_base import JsonOption, app, command, err, out, settings
from core.errors import InputError

config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
@command
async def config_show(
    as_json: JsonOption = False,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Put what each setting decides above it, as a comment."),
    ] = False,
) -> None:
    """Print the effective configuration (file + environment), secrets masked."""
    data = settings().masked()
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
        return
    _print_toml(data, _descriptions() if explain else {})


@config_app.command("docs")
@command
async def config_docs(
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Put the reference into this Markdown file between its markers, keeping the "
            "prose around them (e.g. docs/configuration.md).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Every setting as Markdown: key, type, default, environment variable, what it decides."""
    from bot import settings_docs

    if write is None:
        text = settings_docs.render()
        if as_json:
            print(json.dumps({"markdown": text}, ensure_ascii=False))
        else:
            print(text, end="")
        return
    if not write.parent.is_dir():
        raise InputError(f"{write.parent} is not a folder")
    changed = settings_docs.write(write)
    if as_json:
        print(json.dumps({"file": str(write), "changed": changed}, ensure_ascii=False))
    else:
        err.print(f"{write}: {'updated' if changed else 'already up to date'}")


def _descriptions() -> dict[tuple[str, ...], str]:
    """What each key decides, by its path, from the same source as docs/configuration.md."""
    from bot import settings_docs

    return {doc.path: doc.description for doc in settings_docs.settings()}


def _print_toml(data: dict[str, Any], explained: dict[tuple[str, ...], str]) -> None:
    """The settings as a tacit.toml would write them; unset values as comments.

    With `explained`, each key's description goes above it as a comment, wrapped."""

    def show(path: tuple[str, ...], value: Any) -> None:
        if path in explained:
            for text in textwrap.wrap(explained[path], width=88):
                out.print(f"# {text}", markup=False)
        key = path[-1]
        out.print(
            f"# {key} = (unset)"
            if value is None
            else f"{key} = {json.dumps(value, ensure_ascii=False)}",
            markup=False,
        )

    for key, value in data.items():
        if not isinstance(value, dict):
            show((key,), value)
    for name, table in data.items():
        if isinstance(table, dict):
            out.print(f"\n[{name}]", markup=False)
            for key, value in table.items():
                show((name, key), value)


@app.command()
@command
async def doctor(as_json: JsonOption = False) -> None:
    """Check each store, endpoint and KB of the home; say what is wrong and how to fix it."""
    from bot.doctor import run_checks
    from bot.local_endpoint import connect

    config = settings()
    server = await connect(config)
    via = None
    if server is not None:
        # the home is held by a running `tacit serve`: it checks the stores it holds open
        async with server:
            via = server.name
            checks = await server.doctor()
    else:
        checks = await run_checks(config)
    ok = all(c.ok for c in checks)
    if as_json:
        data: dict[str, Any] = {"ok": ok, "checks": [c.as_dict() for c in checks]}
        if via is not None:
            data["via"] = via
        print(json.dumps(data, ensure_ascii=False))
    else:
        if via is not None:
            out.print(f"checked by {via}", markup=False)
        for check in checks:
            mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
            out.print(f"{mark} {check.name}: {check.detail}", markup=True)
            if not check.ok and check.fix:
                out.print(f"       fix: {check.fix}", markup=False)
    if not ok:
        raise typer.Exit(1)


@app.command()
@command
async def demo(
    as_json: JsonOption = False,
    trace: Annotated[
        bool,
        typer.Option("--trace", help="Show each answering stage and the gate's measured reasons."),
    ] = False,
) -> None:
    """Index the bundled demo knowledge base and answer a few questions from it."""
    from bot.demo import run_demo

    result = await run_demo(settings(), echo=not as_json, out=out, err=err, trace=trace)
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
