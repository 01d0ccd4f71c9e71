"""The README against what it describes: its test commands are the ones CI runs (.ci/run), with
the fast everyday command beside them; its paragraphs stay short enough to read; and its table
of where each kind of rule lives names modules and symbols that exist. (Settings and commands
the README names are checked in test_docs.py.)"""

from __future__ import annotations

import ast
import re
import shlex

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
CI_RUN = (REPO / ".ci" / "run").read_text(encoding="utf-8")
FAST_COMMAND = 'python -m pytest -m "not slow" -n 2'
# A paragraph longer than this (8 lines of 100 columns) is a wall a reader skips; split it.
MAX_PARAGRAPH = 8 * 100


def ci_commands(script: str) -> list[str]:
    """What .ci/run runs after installing: each `step …` gate, then pytest."""
    found = []
    for line in script.splitlines():
        if not line.startswith(("step ", "python -m pytest")):
            continue
        words = shlex.split(line, comments=True)
        if words[:1] == ["step"]:
            found.append(" ".join(words[1:]))
        elif words[:3] == ["python", "-m", "pytest"]:
            found.append(" ".join(words))
    return found


def readme_test_commands(text: str) -> tuple[list[str], str]:
    """The README's fenced block that installs the dev tools (its other commands) and the
    paragraph right after it."""
    match = re.search(r"```bash\n(pip install -e '\.\[dev\]'.*?)```\n\n(.*?)\n\n", text, re.S)
    assert match, "the README has no block that installs the dev tools and runs the tests"
    lines = [line.split(" #")[0].strip() for line in match.group(1).splitlines()[1:]]
    return [line for line in lines if line], match.group(2)


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each prose paragraph and list item, outside fences and tables."""
    found: list[tuple[int, str]] = []
    lines: list[str] = []
    start, fence = 0, False

    def flush() -> None:
        if lines:
            found.append((start, " ".join(line.strip() for line in lines)))
            lines.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            fence = not fence
            continue
        if fence or not stripped or stripped.startswith(("|", "#", "![")):
            flush()
            continue
        if re.match(r"(\d+\.|-)\s", stripped):
            flush()
        if not lines:
            start = number
        lines.append(line)
    flush()
    return found


def rule_table(text: str) -> list[tuple[str, str]]:
    """(rule, module cell) of each row of the "where each kind of rule lives" table."""
    section = text[text.index("Where each kind of rule lives") :]
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", section, re.M)
    return [(rule, cell) for rule, cell in rows if rule not in ("rule", "---")]


def defined_names(path: str) -> set[str]:
    """Names a module defines at its top level (not those it imports)."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def missing_from_the_code(cell: str) -> list[str]:
    """What a module cell names that the code lacks: each `path` must exist (a glob must match
    a file), and each `symbol` in parentheses after a path must be defined in it."""
    missing = []
    for path, symbols in re.findall(r"`([^`]+)`(?:\s*\(([^)]*)\))?", cell):
        if not any(REPO.glob(path)):
            missing.append(path)
            continue
        for symbol in re.findall(r"`([^`]+)`", symbols):
            if symbol not in defined_names(path):
                missing.append(f"{path}: {symbol}")
    return missing


def test_the_readmes_test_commands_are_what_ci_runs() -> None:
    commands, _ = readme_test_commands(README)
    assert commands == ci_commands(CI_RUN)
    # the gates come first, each its own step, and the whole suite last
    assert commands[-1] == "python -m pytest"
    assert {"ruff check .", "python -m mypy", "lint-imports"} <= set(commands[:-1])


def test_the_fast_everyday_command_is_named_beside_ci_s() -> None:
    _, after = readme_test_commands(README)
    assert f"`{FAST_COMMAND}`" in after and "fast" in after


def test_the_ci_script_reads_as_its_steps() -> None:
    script = """pip install -q -e '.[dev]'
step ruff check .  # lint
step python -m mypy
python -m pytest
"""
    assert ci_commands(script) == ["ruff check .", "python -m mypy", "python -m pytest"]


def test_no_readme_paragraph_is_a_wall() -> None:
    long = [(line, len(text)) for line, text in paragraphs(README) if len(text) > MAX_PARAGRAPH]
    assert not long, f"README paragraphs over {MAX_PARAGRAPH} characters (line, length): {long}"


def test_paragraphs_are_split_at_blank_lines_list_items_fences_and_tables() -> None:
    text = "one\ntwo\n\n- a\n  b\n- c\n```\nx\n```\n| t |\nend"
    assert paragraphs(text) == [(1, "one two"), (4, "- a b"), (6, "- c"), (11, "end")]


def test_the_rule_table_names_modules_and_symbols_that_exist() -> None:
    rows = rule_table(README)
    assert len(rows) >= 10
    missing = {rule[:50]: m for rule, cell in rows if (m := missing_from_the_code(cell))}
    assert not missing, missing


def test_the_rule_table_check_finds_a_moved_symbol_and_a_missing_module() -> None:
    # core/gate/features.py imports normalise from core/language/words.py: named there, it is stale
    assert missing_from_the_code("`core/gate/features.py` (`normalise`)") == [
        "core/gate/features.py: normalise"
    ]
    assert missing_from_the_code("`core/language/words.py` (`normalise`, `fold`)") == []
    assert missing_from_the_code("`core/nowhere.py`, `prompts/*.j2`") == ["core/nowhere.py"]
