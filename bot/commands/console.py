"""`tacit console`: the web console against this machine's data home, on 127.0.0.1 only.

It runs what `tacit serve` runs (the console needs the live stores, and an embedded store
admits one process), so stop a running `tacit serve` on the same home first. Without an
`[console] admin_token`, a one-time token is made for this run and printed.
"""

from __future__ import annotations

import secrets
import webbrowser
from typing import Annotated

import typer
from pydantic import SecretStr

from bot.cli_base import app, command, err, settings
from core.errors import ConfigError


@app.command("console")
@command
async def console(
    port: Annotated[int, typer.Option("--port", help="Listen port on 127.0.0.1.")] = 8080,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the console in the web browser.")
    ] = True,
) -> None:
    """Open the web console (decisions, knowledge, graph, playground, gate) on this machine."""
    from bot.commands.serve import Service, _server, uvicorn_config
    from bot.runtime import open_runtime

    config = settings()
    configured = bool(config.console.admin_token.get_secret_value())
    token = config.console.admin_token.get_secret_value() or secrets.token_urlsafe(18)
    config = config.model_copy(
        update={
            "console": config.console.model_copy(
                update={"enabled": True, "admin_token": SecretStr(token)}
            )
        }
    )
    async with open_runtime(config) as runtime:
        service = Service(config, runtime)
        server = _server(uvicorn_config(service.app, config, "127.0.0.1", port))
        url = f"http://127.0.0.1:{port}/console/"
        shown = "(from [console] admin_token)" if configured else token
        err.print(
            f"tacit console on {url} — admin token: {shown}  (Ctrl-C stops it)",
            markup=False,
            highlight=False,
            soft_wrap=True,  # never break the token across lines
        )
        if open_browser:
            webbrowser.open(url)
        await server.serve()
        if not server.started:
            raise ConfigError(f"could not listen on 127.0.0.1:{port} (see the log above)")
