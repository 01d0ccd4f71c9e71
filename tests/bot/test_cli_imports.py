"""`tacit <command>` imports the module of that command only: `tacit ask` answered by a
running server must not pay for importing the server, the gate's fitting or the evaluation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import command_name

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI's entry point as `tacit` does, then reports which command modules it loaded.
PROBE = """
import json, sys
sys.argv = ["tacit", *json.loads(sys.argv[1])]
from bot.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("bot.commands."))))
"""


def run_probe(probe: str, args: list[str], tmp_path: Path) -> list[str]:
    """The JSON list the probe prints last, run in a fresh interpreter with `args`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TACIT_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    printed: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return printed


def loaded_commands(args: list[str], tmp_path: Path) -> list[str]:
    return run_probe(PROBE, args, tmp_path)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ask", "why?"], "ask"),
        (["--home", "/tmp/h", "ask", "why?"], "ask"),
        (["--config", "t.toml", "--home", "/h", "gate", "fit"], "gate"),
        (["--help"], None),
        (["--home", "/tmp/h"], None),
        ([], None),
    ],
)
def test_the_command_is_the_first_word_that_is_no_root_option(
    argv: list[str], expected: str | None
) -> None:
    assert command_name(argv) == expected


def test_ask_imports_no_other_command(tmp_path: Path) -> None:
    assert loaded_commands(["ask", "--help"], tmp_path) == ["bot.commands.ask"]


def test_the_root_help_lists_every_command(tmp_path: Path) -> None:
    loaded = loaded_commands(["--help"], tmp_path)
    assert {"bot.commands.serve", "bot.commands.ask", "bot.commands.eval"} <= set(loaded)


def test_the_app_of_bot_cli_has_every_command() -> None:
    from typer.main import get_command

    from bot.cli import app

    names = set(get_command(app).commands)  # type: ignore[attr-defined]
    assert {"ask", "serve", "index", "gate", "eval", "doctor", "kb", "sources"} <= names


def test_the_client_of_a_running_server_imports_no_numpy(tmp_path: Path) -> None:
    """What `tacit ask` imports before it finds a running server (the settings, the local
    endpoint's client): neither numpy nor the indexing pipeline, which only a command that
    does the work itself needs."""
    probe = (
        "import json, sys\n"
        "import bot.cli_base, bot.commands.ask, bot.local_endpoint, bot.settings\n"
        "print(json.dumps(sorted(m for m in ('numpy', 'core.index.pipeline')"
        " if m in sys.modules)))\n"
    )
    assert run_probe(probe, [], tmp_path) == []
