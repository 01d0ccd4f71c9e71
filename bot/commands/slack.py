"""`tacit slack manifest`: the Slack app manifest to paste at api.slack.com/apps ("Create New
App" → "From a manifest"), generated from what the adapter listens to and calls."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.cli_base import JsonOption, app, command, settings
from core.errors import ConfigError

slack_app = typer.Typer(name="slack", help="Set up the Slack app.", no_args_is_help=True)
app.add_typer(slack_app, name="slack")


def manifest_yaml(url: str | None, *, socket_mode: bool, slash_command: str, name: str) -> str:
    """The manifest as YAML, headed by the command that printed it."""
    import yaml

    from adapters.chat.slack_manifest import manifest

    try:
        data = manifest(url=url, socket_mode=socket_mode, slash_command=slash_command, name=name)
    except ValueError as exc:
        raise ConfigError(
            f"{exc}: pass --url https://your-host (or --socket for Socket Mode)"
        ) from None
    how = "--socket" if socket_mode else f"--url {url}"
    header = (
        f"# tacit slack manifest {how}\n"
        "# Paste at https://api.slack.com/apps → Create New App → From a manifest; then install\n"
        "# it and set TACIT_SLACK__BOT_TOKEN (and the signing secret, or the xapp- app token).\n"
    )
    body: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return header + body


@slack_app.command("manifest")
@command
async def slack_manifest(
    url: Annotated[
        str | None,
        typer.Option("--url", help="Public origin serving /slack/events, e.g. https://host."),
    ] = None,
    socket: Annotated[
        bool | None,
        typer.Option(
            "--socket/--http",
            help="Socket Mode (no public URL) or the HTTP Events API; default: slack.mode.",
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The app's name in Slack.")] = "Tacit",
    as_json: JsonOption = False,
) -> None:
    """Print the Slack app manifest: scopes, events, the slash command, interactivity."""
    config = settings().slack
    socket_mode = config.mode == "socket" if socket is None else socket
    if url is not None and not url.startswith(("https://", "http://")):
        raise ConfigError(f"--url must be an http(s) origin, not {url!r}")
    text = manifest_yaml(
        url, socket_mode=socket_mode, slash_command=config.slash_command, name=name
    )
    if as_json:
        from adapters.chat.slack_manifest import manifest

        data = manifest(
            url=url, socket_mode=socket_mode, slash_command=config.slash_command, name=name
        )
        print(json.dumps(data, ensure_ascii=False))
        return
    print(text, end="")
