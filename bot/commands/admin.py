"""`tacit config show`, `tacit doctor`, `tacit demo`."""

from __future__ import annotations

import json
from typing import Any

import typer

from bot.cli_base import JsonOption, app, command, err, out, settings

config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
@command
async def config_show(as_json: JsonOption = False) -> None:
    """Print the effective configuration (file + environment), secrets masked."""
    data = settings().masked()
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
        return
    _print_toml(data)


def _print_toml(data: dict[str, Any]) -> None:
    """The settings as a tacit.toml would write them; unset values as comments."""

    def line(key: str, value: Any) -> str:
        return (
            f"# {key} = (unset)"
            if value is None
            else f"{key} = {json.dumps(value, ensure_ascii=False)}"
        )

    for key, value in data.items():
        if not isinstance(value, dict):
            out.print(line(key, value), markup=False)
    for name, table in data.items():
        if isinstance(table, dict):
            out.print(f"\n[{name}]", markup=False)
            for key, value in table.items():
                out.print(line(key, value), markup=False)


@app.command()
@command
async def doctor(as_json: JsonOption = False) -> None:
    """Check each configured store and endpoint; say what is wrong and how to fix it."""
    from bot.doctor import run_checks

    checks = await run_checks(settings())
    ok = all(c.ok for c in checks)
    if as_json:
        print(json.dumps({"ok": ok, "checks": [c.as_dict() for c in checks]}, ensure_ascii=False))
    else:
        for check in checks:
            mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
            out.print(f"{mark} {check.name}: {check.detail}", markup=True)
            if not check.ok and check.fix:
                out.print(f"       fix: {check.fix}", markup=False)
    if not ok:
        raise typer.Exit(1)


@app.command()
@command
async def demo(as_json: JsonOption = False) -> None:
    """Index the bundled demo knowledge base and answer a few questions from it."""
    from bot.demo import run_demo

    result = await run_demo(settings(), echo=not as_json, out=out, err=err)
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
