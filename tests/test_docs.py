"""The documentation against the code it describes, after datasette's documentation tests:
every setting is described, docs/configuration.md is what `tacit config docs` generates, and
the README and docs/*.md name only settings, environment variables and `tacit` commands and
options that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import typer.main

from bot import settings_docs
from bot.cli import app
from bot.settings import Settings
from core.errors import ConfigError
from tests.conftest import REPO, CliResult

SETTINGS = list(settings_docs.settings())
KNOWN_PATHS = [s.path for s in SETTINGS]
SECTIONS = sorted({s.path[0] for s in SETTINGS if len(s.path) > 1})

# The documents a user reads, and the notes under docs/notes/: a record of past runs, whose
# commands a reader copies too. A run that names a setting or option removed since keeps its
# text, and the name (or the command line) goes in HISTORICAL under the file; none has yet, as
# removed settings stay, deprecated and ignored, for the files that still set them.
DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs" / "notes").glob("*.md")),
]
HISTORICAL: dict[str, set[str]] = {}
# Files of the data home, and TOML tables of other files, that look like settings.
NOT_SETTINGS = {"graph.sqlite", "state.rdb", "[tool.setuptools.package-data]"}


# --- every setting described, and the reference current ---


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: ".".join(s.path))
def test_every_setting_says_what_it_decides(setting: settings_docs.SettingDoc) -> None:
    assert len(setting.description.split()) >= 3, (
        f"{'.'.join(setting.path)} has no description: give its Field in bot/settings.py a "
        "description= saying what it decides, its unit and when to change it"
    )


DURATION = re.compile(r"timeout|ttl|interval|idle|_every|seconds|window|stream_retry")


@pytest.mark.parametrize(
    "setting",
    [s for s in SETTINGS if DURATION.search(s.key)],
    ids=lambda s: ".".join(s.path),
)
def test_every_duration_names_its_unit(setting: settings_docs.SettingDoc) -> None:
    assert re.search(r"\b(seconds|days)\b", setting.description), setting.description


@pytest.mark.parametrize("section", settings_docs.sections(), ids=lambda s: s.header or "top")
def test_every_section_says_what_it_is_for(section: settings_docs.SectionDoc) -> None:
    assert section.summary, f"give the class of {section.header} a docstring"


def test_configuration_md_is_generated_from_the_settings() -> None:
    path = REPO / "docs" / "configuration.md"
    text = path.read_text(encoding="utf-8")
    assert settings_docs.BEGIN in text and settings_docs.END in text
    assert settings_docs.with_reference(text) == text, (
        f"docs/configuration.md is stale: run `{settings_docs.REGENERATE}`"
    )


def test_the_reference_has_a_row_for_every_key() -> None:
    rendered = settings_docs.render()
    for setting in SETTINGS:
        row = f"| `{setting.key}`" + (f"<br>`{setting.env}`" if setting.env else "")
        assert row in rendered, row
    assert rendered.count("\n| `") == len(SETTINGS)


def test_config_docs_writes_between_the_markers_and_keeps_the_prose(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    target = tmp_path / "configuration.md"
    stale = "| `gone` | string | unset | a setting that no longer exists |\n"
    target.write_text(
        f"# Settings\n\nProse.\n\n{settings_docs.BEGIN}\n{stale}{settings_docs.END}\n\nMore.\n"
    )
    code, _, err = cli("config", "docs", "--write", str(target))
    assert code == 0 and "updated" in err
    text = target.read_text()
    assert text.startswith("# Settings\n\nProse.\n\n") and text.endswith("\n\nMore.\n")
    assert "`gone`" not in text and settings_docs.render() in text
    code, _, err = cli("config", "docs", "--write", str(target))
    # stderr wraps where the path's length puts its breaks: compare with the wrapping undone
    assert code == 0 and "already up to date" in " ".join(err.split())
    code, out, _ = cli("config", "docs")
    assert code == 0 and out == settings_docs.render()


# --- names in the README and docs/*.md ---

CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
TABLE_REF = re.compile(r"^(\[\[?([a-z_][^\]]*)\]\]?)(?:\s+([a-z_][a-z0-9_]*))?")
DOTTED_REF = re.compile(rf'[`"]((?:{"|".join(SECTIONS)})\.[a-z_][a-z0-9_]*)[`"]')
ENV_REF = re.compile(r"\bTACIT_[A-Z0-9_]*[A-Z0-9]\b|\bTACIT_[A-Z0-9_]+__\*")
# `tacit` where a shell command starts, perhaps after VAR=value assignments (not
# `kubectl -n tacit`, `/tacit` or `tacit.toml`).
COMMAND = re.compile(
    r"(?:^\s*|(?:^|\s)\$\s+|(?:&&|;|\||\()\s*)(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(tacit)(?=\s|$)"
)
TEST_VARIABLES = set(
    re.findall(
        r"TACIT_TEST_[A-Z0-9_]+",
        "".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("*.py")),
    )
)


def _is_setting(path: tuple[str, ...]) -> bool:
    """A key, or a table that holds keys; a table of entries takes any name at NAME."""

    def matches(known: tuple[str, ...]) -> bool:
        return len(path) <= len(known) and all(
            k == "NAME" or k == p for k, p in zip(known, path, strict=False)
        )

    return any(matches(known) for known in KNOWN_PATHS)


def _table_path(header: str) -> tuple[str, ...]:
    return tuple(part.strip('"') for part in re.findall(r'"[^"]*"|[^.]+', header))


def setting_names(text: str) -> set[str]:
    """Settings the text names: `[section] key`, `[a.b."c"]`, `section.key`, TACIT_A__B."""
    names: set[str] = set()
    for span in CODE_SPAN.findall(text):
        match = TABLE_REF.match(span)
        if match:
            names.add(match.group(1) + (f" {match.group(3)}" if match.group(3) else ""))
    names.update(DOTTED_REF.findall(text))
    names.update(ENV_REF.findall(text))
    return names


def keys_under_section_headings(text: str) -> set[str]:
    """Bare keys where a heading names their section (`### Milvus server (`[vector]`)`): the
    first column of a `| setting |` table, and a bullet that opens with a key."""
    names: set[str] = set()
    section: str | None = None
    in_table = False
    for line in text.splitlines():
        if line.startswith("#"):
            named = re.search(r"`\[([a-z_.]+)\]", line)
            section = named.group(1) if named else None
        if re.match(r"\|\s*setting\s*\|", line):
            in_table = True
            continue
        in_table = in_table and line.startswith("|")
        keys = re.findall(r"`([a-z_][a-z0-9_]*)`", line.split("|")[1]) if in_table else []
        bullet = re.match(r"- `([a-z_][a-z0-9_]*)(?: = [^`]*)?`", line)
        if section is not None and bullet:
            keys.append(bullet.group(1))
        names.update(f"[{section}] {key}" for key in keys)
    return names


def unknown_setting(name: str) -> bool:
    if name in NOT_SETTINGS or name == "TACIT_CONFIG" or name in TEST_VARIABLES:
        return False
    if name.startswith("TACIT_"):
        path = tuple(p.lower() for p in name.removeprefix("TACIT_").rstrip("*").split("__") if p)
    elif name.startswith("["):
        header, _, key = name.partition(" ")
        path = _table_path(header.strip("[]")) + ((key,) if key else ())
    else:
        path = tuple(name.split("."))
    return not _is_setting(path)


def commands(text: str) -> list[str]:
    """`tacit …` command lines of the text: in code spans and in fenced blocks (one per line,
    backslash continuations joined, shell comments and pipes cut off)."""
    found = []
    pieces = CODE_SPAN.findall(FENCE.sub("", text))
    for block in FENCE.findall(text):
        pieces += block.replace("\\\n", " ").splitlines()[1:-1]
    for piece in pieces:
        for start in COMMAND.finditer(piece):
            line = re.split(r"\s#|\||&&|;|\s&(?:\s|$)", piece[start.start(1) :])[0]
            found.append(" ".join(line.split()))
    return found


def unknown_in_command(line: str) -> str | None:
    """What `line` names that the CLI lacks: a command, or an option of the command.
    (Typer's click is its own vendored copy, so commands are walked by their attributes.)"""
    command = typer.main.get_command(app)
    words = shlex.split(line)[1:]
    named = ["tacit"]
    takes_value = False
    for word in words:
        if takes_value:
            takes_value = False
            continue
        if word.startswith(("…", "...")):
            return None  # the rest is elided
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            if flag == "--help":
                continue
            option = next(
                (
                    p
                    for p in command.params
                    if p.param_type_name == "option" and flag in (*p.opts, *p.secondary_opts)
                ),
                None,
            )
            if option is None:
                return f"`{' '.join(named)}` has no option {flag}"
            takes_value = not getattr(option, "is_flag", False) and "=" not in word
            continue
        subcommands = getattr(command, "commands", None)
        if subcommands is not None:
            sub = subcommands.get(word)
            if sub is None:
                return f"there is no command `{' '.join([*named, word])}`"
            command, named = sub, [*named, word]
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_name_only_settings_that_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    names = setting_names(text) | keys_under_section_headings(text)
    unknown = sorted(n for n in names if unknown_setting(n))
    unknown = [n for n in unknown if n not in HISTORICAL.get(doc.name, set())]
    assert not unknown, f"{doc.name} names settings bot/settings.py does not have: {unknown}"


OVERRIDES = re.compile(r'\{\s*"[a-z_]+\.[a-z_][a-z0-9_]*"\s*=[^}]*\}')


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_settings_overrides_are_valid(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`{ "answer.stages" = "multi" }` as an ablation plan's run takes it (tacit eval ablate)."""
    from bot.commands.eval import _overridden

    for variable in [v for v in os.environ if v.startswith("TACIT_")]:
        monkeypatch.delenv(variable)
    monkeypatch.chdir(REPO / "docs")  # no tacit.toml

    for table in OVERRIDES.findall(doc.read_text(encoding="utf-8")):
        overrides = tomllib.loads(f"settings = {table}")["settings"]
        try:
            _overridden(Settings(), overrides, "docs")
        except ConfigError as exc:
            pytest.fail(f"{doc.name}: {table} is not a valid override: {exc}")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_name_only_commands_and_options_that_exist(doc: Path) -> None:
    lines = commands(doc.read_text(encoding="utf-8"))
    lines = [line for line in lines if line not in HISTORICAL.get(doc.name, set())]
    problems = sorted({f"{p} (in `{line}`)" for line in lines if (p := unknown_in_command(line))})
    assert not problems, f"{doc.name}: {problems}"


# --- the checks themselves ---


def test_the_checks_find_what_they_look_for() -> None:
    text = (
        "Set `[llm] base_url` and `[llm] base_urll`, `[retrieval]`, `[retreival]`,\n"
        '`[conversation.channels."slack:T1:C2"]`, `[[server.tokens]]`, `server.workers`,\n'
        '`server.worker`, settings = { "answer.stages" = "multi" }, TACIT_LLM__BASE_URL,\n'
        "TACIT_LLM__BASEURL, `TACIT_LLM__*`, TACIT_HOME, `graph.sqlite` and `core.gate.fitting`.\n"
        "Run `tacit gate fit --good g.txt --kb ops`, `tacit gate fitt`, `tacit ask --kbb x`,\n"
        "`docker compose run --rm tacit doctor`, `/tacit remember` and `deploy/tacit.toml`.\n"
        "```sh\ntacit index docs/ --kb ops --prune   # comment --nope\n"
        "tacit eval retrieval q.jsonl \\\n    --no-such-flag\n"
        "TACIT_HOME=/tmp/h tacit ask --kbb x   # after an assignment\n```\n"
    )
    assert sorted(n for n in setting_names(text) if unknown_setting(n)) == [
        "TACIT_LLM__BASEURL",
        "[llm] base_urll",
        "[retreival]",
        "server.worker",
    ]
    problems = [p for line in commands(text) if (p := unknown_in_command(line))]
    assert problems == [
        "there is no command `tacit gate fitt`",
        "`tacit ask` has no option --kbb",
        "`tacit eval retrieval` has no option --no-such-flag",
        "`tacit ask` has no option --kbb",
    ]


def test_bare_keys_are_checked_under_a_heading_that_names_their_section() -> None:
    text = (
        "### Milvus (`[vector]`)\n\n| setting | default |\n|---|---|\n"
        '| `uri`, `tokn` | x |\n\n- `timeout` (10 s)\n- `consistency = "Strong"`\n\n'
        "## Sizing\n\n- `anything` goes here\n"
    )
    names = keys_under_section_headings(text)
    assert names == {
        "[vector] uri",
        "[vector] tokn",
        "[vector] timeout",
        "[vector] consistency",
    }
    unknown = sorted(n for n in names if unknown_setting(n))
    assert unknown == ["[vector] consistency", "[vector] tokn"]


# --- the benches: docs/BENCHMARKS.md says how to run each, docs/RESULTS.md is what they wrote ---

BENCH = REPO / "bench"
# bench/ files that measure nothing: the writer of RESULTS.md, the unpacker of a baseline
# revision and the data set converters
NOT_BENCHES = {"results.py", "revisions.py", "convert_hotpotqa.py", "convert_musique.py"}
BENCH_SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in NOT_BENCHES)
ENTRY = re.compile(r"^### (\S+\.py)\b", re.M)


def test_every_bench_has_its_entry_in_benchmarks_md() -> None:
    text = (REPO / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    entries = ENTRY.findall(text)
    assert sorted(entries) == sorted(set(entries)), "a bench has two entries"
    missing = sorted(set(BENCH_SCRIPTS) - set(entries))
    assert not missing, f"docs/BENCHMARKS.md has no `### <script>` entry for {missing}"
    gone = sorted(set(entries) - set(BENCH_SCRIPTS))
    assert not gone, f"docs/BENCHMARKS.md describes benches bench/ no longer has: {gone}"
    for name in BENCH_SCRIPTS:
        entry = text.split(f"### {name}", 1)[1].split("\n### ", 1)[0]
        assert f"python bench/{name}" in entry, f"the entry of {name} gives no command to run it"
        assert "Rows" in entry, f"the entry of {name} says not what it writes to RESULTS.md"
    for name in NOT_BENCHES:
        assert f"bench/{name}" in text, f"docs/BENCHMARKS.md does not say what {name} is"


def test_benchmarks_md_points_to_the_notes_and_the_results() -> None:
    text = (REPO / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "(notes/)" in text and "(RESULTS.md)" in text
    assert len(text.splitlines()) < 500, "docs/BENCHMARKS.md says how to run; notes go in notes/"


def test_results_md_is_what_the_writer_writes() -> None:
    from bench import results

    text = (REPO / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    rows = results.parse(text)
    assert rows, "docs/RESULTS.md has no rows: run a bench"
    assert results.render(rows) == text, (
        "docs/RESULTS.md is not as bench/results.py writes it: it was edited by hand; run the "
        "benches again instead"
    )


def test_every_row_of_results_md_names_a_bench_that_exists() -> None:
    from bench import results

    rows = results.parse((REPO / "docs" / "RESULTS.md").read_text(encoding="utf-8"))
    for row in rows:
        assert row.bench.startswith("bench/") and (REPO / row.bench).is_file(), row.bench
        assert Path(row.bench).name in BENCH_SCRIPTS, f"{row.bench} is not a bench"
        assert row.command.startswith(f"python {row.bench}"), (row.bench, row.command)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", row.date), row.date
        assert re.fullmatch(r"[0-9a-f]{7,}(\+dirty)?", row.commit), row.commit


def test_notes_are_named_by_date_and_topic() -> None:
    for path in (REPO / "docs" / "notes").glob("*.md"):
        if path.name != "README.md":
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[^/]+\.md", path.name), path.name
